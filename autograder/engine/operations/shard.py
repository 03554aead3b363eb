"""Grading a class larger than one machine: `grade --shard K/N`, its manifest, and `merge`.

A shard is chosen by the submission's id (batch.submission_ids over ALL the paths given, so an
id never depends on which shard graded it): shard K of N takes the ids whose SHA-1 is K-1 modulo
N. That split is stable whatever the order of the arguments, and needs no coordination: N jobs
given the same list (best: the same frozen class list, `grade --class-list FILE`) each grade
their own part.

Every `grade --out DIR` writes DIR/batch/manifest.json (a Manifest) when it starts and again
when it ends: which shard it is, the seed, the ids of the whole class and the ids it owes, the
command that re-runs it, and whether it completed. `merge` puts many --out directories back
into one, with one grades.csv in the format of a single run, and only when nothing is missing:
a shard that stopped half-way, a shard whose directory was not given, a result deleted since;
otherwise it names the shards and students to grade again, with the command for each.
"""

import dataclasses
import datetime
import hashlib
import json
import re
import shlex
import shutil
from pathlib import Path

from autograder.engine.checks.text import csv_records
from autograder.engine.judge import kept_code
from autograder.engine.judge.grades_csv import csv_text
from autograder.engine.judge.result_files import load_result, write_atomically

MANIFEST = Path("batch") / "manifest.json"  # in a --out directory: a folder, so no id can clash with it
LOCK = Path("batch") / "lock"
FORMAT = 1
MAX_SHOWN_COMMAND = 2000  # characters of a re-run command shown; a longer one is pointed at
SHOWN_IDS = 20  # students named per shard in merge's message; the rest are counted


class ShardError(ValueError):
    """A bad --shard value or out directories that cannot be merged (exit code 2)."""


class IncompleteMerge(ShardError):
    """Some submissions of the class have no result in the directories given (exit code 1):
    the message names the shards and students, and the command that grades them."""


@dataclasses.dataclass
class Manifest:
    """What one `grade --out` run is: written at its start (complete False) and its end."""

    assignment: str  # the assignment's id in grading.yml (None: a batch graded without one)
    shard: tuple  # (K, N), or None: the whole class
    seed: int  # the hidden checks' seed: every shard of a class needs the same (merge checks)
    class_ids: list  # the ids of the whole class, in the order given (batch.submission_ids)
    owed: list  # the ids this run grades: its shard of class_ids
    command: list  # the command line that runs it again (it resumes: only what is missing)
    cwd: str  # where that command runs
    class_list: str = None  # the frozen class list it read (--class-list), if any
    complete: bool = False  # every owed id has its JSON; False while running or after a stop
    not_graded: list = dataclasses.field(default_factory=list)  # owed ids the grader failed on
    started: str = None  # UTC, ISO 8601
    finished: str = None
    merged_from: list = None  # a merged directory: the directories it came from

    @property
    def class_digest(self) -> str:
        """Tells two class lists apart (a late submission added to one)."""
        return hashlib.sha256("\n".join(self.class_ids).encode("utf-8")).hexdigest()[:16]

    def describe_shard(self) -> str:
        return f"shard {self.shard[0]}/{self.shard[1]}" if self.shard else "the whole class"

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["shard"] = list(self.shard) if self.shard else None
        data["class_size"] = len(self.class_ids)
        data["class_digest"] = self.class_digest
        return {"format": FORMAT, **data}


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def write_manifest(out: Path, manifest: Manifest) -> None:
    write_atomically(Path(out) / MANIFEST, json.dumps(manifest.to_json(), indent=1) + "\n")


def read_manifest(out: Path):
    """The Manifest of --out directory `out`, or None where it has none (an older kit's run).
    A manifest that does not parse is a ShardError naming it."""
    path = Path(out) / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        fields = {f.name for f in dataclasses.fields(Manifest)}
        manifest = Manifest(**{key: value for key, value in data.items() if key in fields})
        manifest.shard = tuple(manifest.shard) if manifest.shard else None
        if not (isinstance(manifest.class_ids, list) and isinstance(manifest.owed, list)):
            raise TypeError("class_ids and owed must be lists")
    except (ValueError, TypeError) as error:
        raise ShardError(f"{path}: not a grading manifest ({error}); grade into a fresh --out") from None
    return manifest


def parse_shard(text: str) -> tuple:
    """'K/N' -> (K, N) with 1 <= K <= N."""
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise ShardError(f"--shard {text!r}: expected K/N, e.g. 2/8") from None
    if not 1 <= k <= n:
        raise ShardError(f"--shard {text!r}: K must be between 1 and N")
    return k, n


def shard_of(submission_id: str, count: int) -> int:
    """The shard (1..count) a submission id belongs to: a hash, so shards come out about equal."""
    digest = hashlib.sha1(submission_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def in_shard(submission_id: str, shard: tuple) -> bool:
    k, n = shard
    return shard_of(submission_id, n) == k


def read_class_list(path: Path) -> list:
    """The submissions of a frozen class list (`python -m autograder class-list ... > FILE`, or
    `ls -d submissions/* > FILE`): one path a line, relative ones from the current directory;
    blank lines and lines starting with # are skipped. A path that is not there is a ShardError
    naming the file and line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ShardError(f"--class-list {path}: cannot read it ({error})") from None
    paths = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if not Path(text).exists():
            raise ShardError(f"{path}, line {number}: {text}: no such submission")
        paths.append(Path(text))
    if not paths:
        raise ShardError(f"--class-list {path}: lists no submission")
    return paths


def _merge_history(dirs: list, merged: Path) -> None:
    """Every history line of `dirs` (gradebook.py's history.jsonl) into merged's, once each, the
    merged folder's own first: a merge loses no grading of anyone."""
    lines = []
    for folder in [merged, *dirs]:
        path = Path(folder) / "history.jsonl"
        if path.is_file() and not path.is_symlink():
            lines += path.read_text(encoding="utf-8").splitlines()
    if lines:
        kept = [line for line in dict.fromkeys(lines) if line.strip()]
        write_atomically(merged / "history.jsonl", "\n".join(kept) + "\n")


def class_list_text(paths: list) -> str:
    """A frozen class list of `paths` (what `python -m autograder class-list` prints): their
    absolute paths, sorted, one a line (a path with a line break in its name is refused)."""
    chosen = sorted({str(Path(path).absolute()) for path in paths})
    odd = [path for path in chosen if "\n" in path or "\r" in path]
    if odd:
        raise ShardError(f"a submission's path holds a line break: {odd[0]!r}; rename it")
    return "".join(f"{path}\n" for path in chosen)


def merge(out_dirs: list, merged: Path, allow_missing: bool = False) -> dict:
    """Copy every result of `out_dirs` into `merged` and write one grades.csv for them all,
    rows sorted by submission id. Where the directories carry manifests (every `grade --out`
    writes one), the merge is of the class they name: a shard of it that is not there, or an
    owed id without its result, makes an IncompleteMerge that names them and the commands that
    grade them (nothing written), unless `allow_missing` (then their rows are empty). An id
    graded in two directories with different scores is an error (two runs disagree: which one
    counts is the instructor's call). Returns {id: path of its merged JSON}."""

    merged = Path(merged)
    dirs = [Path(out) for out in out_dirs]
    for out in dirs:
        if not out.is_dir():
            raise ShardError(f"{out}: not a directory")
    manifests = {out: read_manifest(out) for out in dirs}
    found, paths = {}, {}
    for out in dirs:
        owed = set(manifests[out].owed) if manifests[out] else None
        for name, row in _csv_rows(out).items():
            if owed is None or name in owed:
                paths.setdefault(name, row.get("path", ""))
        for json_path in sorted(out.glob("*.json")):
            name = json_path.stem
            if owed is not None and name not in owed:
                continue  # not this run's: a leftover of another class list
            data = _result_data(json_path)
            if data is None:
                continue  # half a file from a killed run of an older kit: graded again on re-run
            if name in found and _comparable(found[name][1]) != _comparable(data):
                raise ShardError(
                    f"{name} was graded twice with different scores: {found[name][0]} and {json_path}; "
                    "keep the one that counts and merge again"
                )
            found.setdefault(name, (json_path, data))
            paths.setdefault(name, data.get("submission", ""))
    with_manifest = [out for out in dirs if manifests[out] is not None]
    if with_manifest:
        missing = [out for out in dirs if manifests[out] is None]
        if missing:
            raise ShardError(
                f"{', '.join(map(str, missing))}: no {MANIFEST} (not a whole `grade --out` directory, "
                "or one from an older kit): give directories made by one version, or grade them again"
            )
        names, gaps = _complete_class([manifests[out] for out in dirs], dirs, found)
        if gaps and not allow_missing:
            raise IncompleteMerge(_incomplete_message(gaps, merged, manifests[dirs[0]]))
    else:  # an older kit's directories: what they hold, with the ids their grades.csv lists
        names = sorted(set(found) | set(paths))
    merged.mkdir(mode=0o700, parents=True, exist_ok=True)  # as grade's --out (batch.py): the seed, grades, code
    for name, (source, _) in found.items():
        if name not in names:
            continue
        target = merged / source.name
        if source.resolve() != target.resolve():
            code = kept_code.path_of(source.parent, name)  # the code it was graded from (first, as grading does)
            if code.is_file() and not code.is_symlink():
                write_atomically(kept_code.path_of(merged, name), code.read_bytes())
            write_atomically(target, source.read_bytes())
            # the pictures `grade --out --plots` drew for it (the judge's files, never links)
            pictures = source.parent / "pictures" / name
            if pictures.is_dir() and not pictures.is_symlink():
                shutil.copytree(pictures, merged / "pictures" / name, symlinks=True, dirs_exist_ok=True)
    _merge_history(dirs, merged)
    results = [load_result(found[name][0]) if name in found else None for name in names]
    write_atomically(merged / "grades.csv", csv_text(results, names, paths=[paths.get(name, "") for name in names]))
    if with_manifest:
        first = manifests[dirs[0]]
        write_manifest(
            merged,
            dataclasses.replace(
                first,
                shard=None,
                owed=list(first.class_ids),
                complete=all(name in found for name in names),
                not_graded=[name for name in names if name not in found],
                started=now(),
                finished=now(),
                merged_from=[str(out) for out in dirs],
            ),
        )
    return {name: merged / f"{name}.json" for name in found if name in names}


def _csv_rows(out: Path) -> dict:
    csv_path = out / "grades.csv"
    rows = {}
    if csv_path.exists():
        with open(csv_path, newline="", encoding="utf-8") as f:
            for line, row in enumerate(csv_records(f), start=2):
                if not row.get("submission"):
                    raise ShardError(f"{csv_path}, line {line}: no submission id")
                rows.setdefault(row["submission"], row)
    return rows


def _result_data(json_path: Path):
    """The result JSON at `json_path`, or None where it is not a whole one."""
    try:
        data = json.loads(json_path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("steps"), list) else None


def _complete_class(manifests: list, dirs: list, found: dict):
    """(the class's ids, sorted; the gaps: [(shard K or None, its Manifest or None, its
    directories, the owed ids without a result)]). Directories of different classes, shard
    counts or assignments are a ShardError."""
    first, first_dir = manifests[0], dirs[0]
    for manifest, out in zip(manifests[1:], dirs[1:], strict=True):
        if manifest.class_digest != first.class_digest:
            raise ShardError(
                f"{first_dir} and {out} graded different classes ({len(first.class_ids)} and "
                f"{len(manifest.class_ids)} submissions): a class list changed between shards (a late "
                "submission?). Grade every shard from the same --class-list FILE (a re-run grades only "
                "what its directory lacks), then merge"
            )
        if (manifest.shard or (None, None))[1] != (first.shard or (None, None))[1]:
            raise ShardError(
                f"{first_dir} is {first.describe_shard()} and {out} {manifest.describe_shard()}: "
                "merge the shards of one split"
            )
        if manifest.assignment != first.assignment:
            raise ShardError(f"{first_dir} graded {first.assignment} and {out} {manifest.assignment}")
        if manifest.seed != first.seed:  # which seeds, never: the message goes to a log
            raise ShardError(
                f"{first_dir} and {out} drew the hidden checks' inputs from different seeds (a machine without "
                "the course secret, or another --seed): grade one of them again, into a fresh --out, on a machine "
                "that has this course's secret (or with the same --seed), then merge"
            )
    count = first.shard[1] if first.shard else 1
    by_shard = {}
    for manifest, out in zip(manifests, dirs, strict=True):
        by_shard.setdefault(manifest.shard[0] if manifest.shard else 1, []).append((manifest, out))
    gaps = []
    for k in range(1, count + 1):
        owed = [name for name in first.class_ids if count == 1 or in_shard(name, (k, count))]
        lacking = [name for name in owed if name not in found]
        if k not in by_shard:
            gaps.append((k, None, [], lacking))
        elif lacking:
            runs = by_shard[k]
            gaps.append((k, max((m for m, _ in runs), key=lambda m: m.complete), [out for _, out in runs], lacking))
    return sorted(first.class_ids), gaps


def _incomplete_message(gaps: list, merged: Path, template: Manifest) -> str:
    """What is missing, shard by shard, and the command that grades it (`template`: a manifest
    of the class, for a shard whose directory was not given)."""
    lacking = sum(len(ids) for *_, ids in gaps)
    lines = [f"the merge is incomplete: {lacking} submission(s) have no result; nothing was written to {merged}/"]
    for k, manifest, dirs, ids in gaps:
        some = ", ".join(ids[:SHOWN_IDS]) + (f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else "")
        if manifest is None:
            lines.append(f"  shard {k}/{template.shard[1]}: no directory of it was given; it owes {some or 'nobody'}")
            command = command_for_shard(template, k)
        else:
            why = "stopped before it finished" if not manifest.complete else "a result was removed since it finished"
            if manifest.not_graded:
                why = f"the grader failed on {len(manifest.not_graded)}"
            lines.append(f"  {manifest.describe_shard()} ({', '.join(map(str, dirs))}, {why}): {some} not graded")
            command = _shell(manifest.cwd, manifest.command)
        lines.append(f"      re-run: {command}")
    lines.append(
        "A re-run keeps what its directory holds and grades only what is missing (under Slurm: "
        "sbatch --array=K with the same script and arguments); then merge again. "
        "`merge --allow-missing` writes what there is, with empty rows for the missing."
    )
    return "\n".join(lines)


def command_for_shard(template: Manifest, k: int) -> str:
    """`template`'s command (a sibling shard's) made into shard `k`'s."""
    k_from, n = template.shard if template.shard else (1, 1)
    words = list(template.command)
    for index, word in enumerate(words[:-1]):
        if word == "--shard":
            words[index + 1] = f"{k}/{n}"
        elif word == "--out":
            words[index + 1] = _renumbered(words[index + 1], k_from, k)
    for index, word in enumerate(words):
        if word.startswith("--shard="):
            words[index] = f"--shard={k}/{n}"
        elif word.startswith("--out="):
            words[index] = "--out=" + _renumbered(word.removeprefix("--out="), k_from, k)
    return _shell(template.cwd, words)


def _renumbered(out: str, k_from: int, k_to: int) -> str:
    """`out` with its last number `k_from` made `k_to` (parts/2 -> parts/3), else OUT-`k_to`."""
    matches = list(re.finditer(r"\d+", out))
    if matches and int(matches[-1].group()) == k_from:
        last = matches[-1]
        return out[: last.start()] + str(k_to) + out[last.end() :]
    return f"{out.rstrip('/')}-shard{k_to}"


def _shell(cwd: str, words: list) -> str:
    """`words` run in `cwd`, as a shell line; a command of many paths (a batch given its
    submissions one by one, not as a --class-list) is named by where it is recorded instead."""
    line = f"cd {shlex.quote(cwd)} && {shlex.join(words)}"
    if len(line) > MAX_SHOWN_COMMAND:
        return f'the "command" recorded in its {MANIFEST} (run in its "cwd"); a --class-list FILE keeps it short'
    return line


def _comparable(data: dict) -> dict:
    """What decides whether two gradings of one submission agree: the scores only (not how long
    it took, nor the sandbox layers of the machine, nor the messages' language)."""
    return {
        "assignment": data.get("assignment"),
        "score": data.get("score"),
        "max_score": data.get("max_score"),
        "steps": [
            (
                step.get("id"),
                step.get("score"),
                step.get("max_score"),
                step.get("status"),
                [(check.get("id"), check.get("passed"), check.get("points")) for check in step.get("checks", [])],
            )
            for step in data.get("steps", [])
        ],
    }
