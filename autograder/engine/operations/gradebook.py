"""The gradebook of a `grade --out` folder: the whole class, every run, the instructor's word.

    stamp = run_stamp()                                 # who grades, when, with which kit
    apply(out, config, times={...})                     # adjustments and late policy into each JSON,
                                                        # then grades.csv: the whole class
    history(out, ["bob"])                               # every grading of bob, oldest first

What a folder holds (one run writes at a time: the batch's lock, out/batch/lock):
- out/<id>.json: each submission's latest grading, with the gradebook's fields (results.GRADEBOOK_FIELDS):
  `graded` (run_stamp), `submitted` (when, and from which source), `adjustments` (each with what it
  counted), `late` (late_policy's decision) and `total`, the grade of record.
- out/grades.csv: one row per submission the folder has ever graded (the manifest's class and every
  JSON), rewritten whole and atomically after each run and each adjustment: re-grading two students
  updates their two rows and keeps the others.
- out/history.jsonl: one line per grading of one submission, appended by every run, never edited:
  who, when, kit version and commit, score and total. out/history/<id>/ keeps each JSON a re-grade
  replaced, whole.
- out/adjustments.csv: the instructor's adjustments (a file to edit by hand, or `adjust` appends to
  it): `submission,step,points,comment` (step empty: the total). Read again at every run, so an
  adjustment outlives any re-grade; a row that does not parse stops the run naming file and line.

The total: the score, less the late penalty (never below 0), plus each adjustment, the total kept
within [0, max_score]. A step's adjustment keeps that step within [0, its maximum]; what it could
not count (the step re-graded to full marks, say) is shown with why, never dropped in silence.
"""

import csv
import dataclasses
import datetime
import getpass
import io
import json
import os
import secrets
from pathlib import Path

from autograder import KIT, __version__
from autograder.engine.checks.text import csv_records, csv_table, spreadsheet_record
from autograder.engine.course import late_policy
from autograder.engine.judge.grades_csv import csv_text
from autograder.engine.judge.result_files import load_result, write_atomically
from autograder.engine.judge.results import GradeResult
from autograder.engine.operations.commits import head_commit

ADJUSTMENTS = "adjustments.csv"
HISTORY = "history.jsonl"
HISTORY_FOLDER = "history"
CSV = "grades.csv"
ADJUSTMENT_COLUMNS = ("submission", "step", "points", "comment")


class GradebookError(ValueError):
    """An instructor's file (adjustments, times) that does not read: names the file and line (exit 2)."""


@dataclasses.dataclass(frozen=True)
class Adjustment:
    submission: str
    points: float
    comment: str
    step: str = None  # None: the total
    line: int = None  # its line in adjustments.csv


def run_stamp() -> dict:
    """Who grades, when (UTC), with which kit (version, and its git commit where the kit is a
    clone): the `graded` of every JSON this run writes, and its history lines."""
    try:
        by = getpass.getuser()
    except (KeyError, OSError):
        by = str(os.getuid())
    commit = head_commit(KIT)
    at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {
        "run": at.replace(":", "").replace("+0000", "Z") + "-" + secrets.token_hex(3),
        "by": by,
        "at": at,
        "kit": __version__,
        **({"commit": commit.sha[:12]} if commit else {}),
    }


def keep_replaced(out: Path, name: str) -> None:
    """Before out/<name>.json is graded again: keep the JSON it replaces in out/history/<name>/."""
    current = Path(out) / f"{name}.json"
    if not current.is_file() or current.is_symlink():
        return
    data = current.read_bytes()
    try:
        when = json.loads(data).get("graded", {}).get("run")
    except (ValueError, AttributeError):
        when = None
    when = when or "before-" + datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    write_atomically(Path(out) / HISTORY_FOLDER / name / f"{_file_safe(when)}.json", data)


def _file_safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def record_history(out: Path, graded: dict, stamp: dict = None) -> None:
    """Append one line per submission of `graded` ({id: GradeResult}, settled) to
    out/history.jsonl, the file rewritten whole (atomically): a stop leaves the old or the new.
    `stamp`: who changed it and how, where it was not graded now (an adjustment); else each
    result's own `graded`."""
    if not graded:
        return
    path = Path(out) / HISTORY
    old = path.read_bytes() if path.is_file() else b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    lines = []
    for name, result in graded.items():
        if result is None:
            continue
        line = {
            "submission": name,
            **(stamp or result.graded or {}),
            "score": round(result.score, 4),
            "max_score": round(result.max_score, 4),
            "total": round(result.total if result.total is not None else result.score, 4),
            "steps": {step.id: round(step.score, 4) for step in result.steps},
        }
        lines.append(json.dumps(line, ensure_ascii=False))
    write_atomically(path, old + ("\n".join(lines) + "\n").encode("utf-8"))


def history(out: Path, names=None) -> dict:
    """{id: [history lines, oldest first]} of out/history.jsonl, for `names` (None: all)."""
    path = Path(out) / HISTORY
    found = {}
    if not path.is_file():
        return found
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            continue  # a line cut by a stop of an older writer
        name = line.get("submission")
        if names is None or name in names:
            found.setdefault(name, []).append(line)
    return found


def history_text(out: Path, names=None) -> str:
    """`python -m autograder history OUT [ID ...]`'s text: per student, each grading's when, who,
    kit, score and total."""
    found = history(out, names)
    lines = []
    for name in names or sorted(found):
        lines.append(name)
        entries = found.get(name)
        if not entries:
            lines.append("  (never graded in this folder)")
        for entry in entries or []:
            kit = entry.get("kit", "?") + (f" ({entry['commit']})" if entry.get("commit") else "")
            total = entry.get("total", entry.get("score"))
            if entry.get("event") == "adjust":
                lines.append(
                    f"  {entry.get('at', '?')}  by {entry.get('by', '?')}  adjusted {entry.get('points', 0):+g}"
                    f" ({entry.get('comment') or 'no comment'})  total {total:.2f}"
                )
                continue
            lines.append(
                f"  {entry.get('at', '?')}  by {entry.get('by', '?')}  kit {kit}  "
                f"score {entry['score']:.2f} / {entry['max_score']:.2f}  total {total:.2f}"
            )
        lines.append("")
    return "\n".join(lines)


def read_adjustments(out: Path) -> list:
    """The Adjustments of out/adjustments.csv (none where it is missing); GradebookError naming
    file and line for a row that does not read."""
    path = Path(out) / ADJUSTMENTS
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise GradebookError(f"{path}: cannot read it ({error})") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [column for column in ("submission", "points") if column not in (reader.fieldnames or [])]
    if missing:
        raise GradebookError(
            f"{path}, line 1: the header needs the columns {', '.join(ADJUSTMENT_COLUMNS)} (missing: {', '.join(missing)})"
        )
    found = []
    for row in reader:
        line = reader.line_num
        row = spreadsheet_record(row)  # adjustments.csv or lms.csv, as the kit wrote it
        name = (row.get("submission") or "").strip()
        if not name and not any((value or "").strip() for value in row.values() if isinstance(value, str)):
            continue  # a blank line
        try:
            points = float((row.get("points") or "").strip())
        except ValueError:
            raise GradebookError(f"{path}, line {line}: points {row.get('points')!r} is not a number") from None
        if not name:
            raise GradebookError(f"{path}, line {line}: no submission id")
        if points != points or abs(points) == float("inf"):
            raise GradebookError(f"{path}, line {line}: points {row.get('points')!r} is not a number")
        step = (row.get("step") or "").strip() or None
        found.append(Adjustment(name, points, (row.get("comment") or "").strip(), step, line))
    return found


def add_adjustment(out: Path, adjustment: Adjustment) -> None:
    """Append `adjustment` to out/adjustments.csv (made with its header if new), rewritten whole."""
    path = Path(out) / ADJUSTMENTS
    old = path.read_text(encoding="utf-8-sig") if path.is_file() else ""
    if old and not old.endswith("\n"):
        old += "\n"
    rows = [] if old.strip() else [ADJUSTMENT_COLUMNS]
    rows.append([adjustment.submission, adjustment.step or "", f"{adjustment.points:g}", adjustment.comment])
    write_atomically(path, old + csv_table(rows, line_end="\n"))


def settle(result: GradeResult, name: str, adjustments: list, policy, submitted: dict = None) -> GradeResult:
    """`result` with its gradebook fields worked out: `submitted` (given, or the JSON's own),
    `late` (the policy's decision, where there is a policy), `adjustments` (each with what it
    counted) and `total`."""
    submitted = submitted or result.submitted
    score, maximum = result.score, result.max_score
    late = None
    if policy is not None:
        at = late_policy.parse_time(submitted["at"]) if submitted and submitted.get("at") else None
        late = policy.decide(at, name, maximum, lms_late=(submitted or {}).get("lms_late"))
    penalty = late["penalty"] if late else 0.0
    total = max(0.0, score - penalty)
    steps = {step.id: step for step in result.steps}
    step_scores = {step.id: step.score for step in result.steps}
    shown = []
    for adjustment in adjustments:
        entry = {
            "points": adjustment.points,
            **({"step": adjustment.step} if adjustment.step else {}),
            "comment": adjustment.comment,
        }
        wanted = adjustment.points
        if adjustment.step is not None:
            step = steps.get(adjustment.step)
            if step is None:
                entry.update(counted=0.0, why=f"no step {adjustment.step!r} in this assignment")
                shown.append(entry)
                continue
            new = min(max(step_scores[step.id] + wanted, 0.0), step.max_score)
            counted = new - step_scores[step.id]
            step_scores[step.id] = new
            if abs(counted - wanted) > 1e-9:
                entry["why"] = f"the step {step.id} is kept within 0 and {step.max_score:.2f}"
        else:
            counted = wanted
        new_total = min(max(total + counted, 0.0), maximum)
        if abs(new_total - total - counted) > 1e-9 and "why" not in entry:
            entry["why"] = f"the total is kept within 0 and {maximum:.2f}"
        counted = new_total - total
        total = new_total
        entry["counted"] = round(counted, 4)
        shown.append(entry)
    return dataclasses.replace(
        result,
        submitted=submitted,
        late=late,
        adjustments=shown or None,
        total=round(total, 4),
    )


def apply(out: Path, config=None, class_ids=(), paths=None, times=None) -> dict:
    """Settle every submission the folder has graded (its JSONs: `class_ids` first, in order, then
    any other), rewrite the JSONs whose gradebook fields changed, and write grades.csv, the whole
    class, atomically. `paths` {id: path} for this run's; the others keep grades.csv's. `times`
    {id: {"at", "source", ...}} overrides what the JSONs say of when they were handed in.
    Returns {id: GradeResult or None} in the CSV's order. GradebookError for an adjustments file
    that does not read (before anything is written)."""
    out = Path(out)
    adjustments = read_adjustments(out)
    policy = getattr(config, "late", None)
    previous = _csv_paths(out)
    names = list(dict.fromkeys([*class_ids, *sorted(_result_names(out))]))
    settled, shown_paths = {}, []
    for name in names:
        path = out / f"{name}.json"
        result = None
        if path.is_file() and not path.is_symlink():
            try:
                result = load_result(path)
            except (ValueError, KeyError, TypeError, OSError):
                result = None
        if result is not None:
            mine = [adjustment for adjustment in adjustments if adjustment.submission == name]
            new = settle(result, name, mine, policy, (times or {}).get(name))
            if _fields(new) != _fields(result):
                data = json.loads(path.read_text(encoding="utf-8"))
                data.update({field: getattr(new, field) for field in _FIELDS if getattr(new, field) is not None})
                for field in _FIELDS:
                    if getattr(new, field) is None:
                        data.pop(field, None)
                write_atomically(path, json.dumps(data, indent=2) + "\n")
            result = new
        settled[name] = result
        given = (paths or {}).get(name)
        shown_paths.append(str(given) if given is not None else previous.get(name, result.submission if result else ""))
    write_atomically(out / CSV, csv_text(list(settled.values()), names, paths=shown_paths))
    return settled


_FIELDS = ("submitted", "adjustments", "late", "total")


def _fields(result: GradeResult) -> tuple:
    return tuple(json.dumps(getattr(result, field), sort_keys=True) for field in _FIELDS)


def _result_names(out: Path) -> set:
    """The ids of the results in `out` (out/<id>.json that are results, not another JSON)."""
    names = set()
    for path in out.glob("*.json"):
        if path.is_symlink():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, OSError):
            continue
        if isinstance(data, dict) and "steps" in data and "assignment" in data:
            names.add(path.stem)
    return names


def _csv_paths(out: Path) -> dict:
    """{id: path} of the grades.csv a folder has now (the paths of those this run does not grade)."""
    path = out / CSV
    if not path.is_file():
        return {}
    try:
        rows = csv_records(io.StringIO(path.read_text(encoding="utf-8")))
        return {row["submission"]: row.get("path") or "" for row in rows if row.get("submission")}
    except (OSError, UnicodeDecodeError, csv.Error, KeyError):
        return {}


def read_times(path: Path, sources=None) -> dict:
    """{id: {"at", "source"}} of a times file an instructor gives (grade --times FILE): a CSV with
    the columns `submission,submitted_at` (an ISO 8601 time with its UTC offset), the source
    named after the file. GradebookError naming file and line for a row that does not read."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise GradebookError(f"--times {path}: cannot read it ({error})") from None
    reader = csv.DictReader(io.StringIO(text))
    if not {"submission", "submitted_at"} <= set(reader.fieldnames or []):
        raise GradebookError(f"{path}, line 1: the header needs the columns submission,submitted_at")
    found = {}
    for row in reader:
        row = spreadsheet_record(row)  # adjustments.csv or lms.csv, as the kit wrote it
        name, when = (row.get("submission") or "").strip(), (row.get("submitted_at") or "").strip()
        if not name:
            continue
        try:
            at = late_policy.parse_time(when) if when else None
        except ValueError as error:
            raise GradebookError(f"{path}, line {reader.line_num}: {error}") from None
        said = (row.get("lms_late") or "").strip().lower()  # an LMS import's (lms.csv): its late flag
        found[name] = {
            "at": late_policy.iso(at) if at else None,
            "source": f"times file {path.name}",
            **({"lms_late": said == "true"} if said in ("true", "false") else {}),
        }
    return found


def commit_times(given: dict) -> dict:
    """{id: {"at", "source", "commit"}} of each submission's head commit (`given`: {id: path}, a
    repository each; read without running git: commits.py). Its committer date is the student's
    to write: the source says so, and the instructor's times file is the one to trust."""
    found = {}
    for name, path in given.items():
        commit = head_commit(path)
        if commit is not None:
            found[name] = {
                "at": late_policy.iso(commit.committer_time),
                "source": "git commit (its date is the student's to write)",
                "commit": commit.sha[:12],
            }
    return found


def known_ids(out: Path, paths) -> dict:
    """{resolved path: id} of the submissions grades.csv lists with a path: a re-grade of one of
    them keeps the id the class run gave it (a name two students share was told apart there)."""
    found = {}
    for name, path in _csv_paths(Path(out)).items():
        if path:
            found.setdefault(Path(path).resolve(), name)
    return {Path(path).resolve(): found[Path(path).resolve()] for path in paths if Path(path).resolve() in found}
