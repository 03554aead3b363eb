"""Grading a class larger than one machine: `grade --shard K/N` and `merge`.

A shard is chosen by the submission's id (batch.submission_ids over ALL the paths given, so an
id never depends on which shard graded it): shard K of N takes the ids whose SHA-1 is K-1 modulo
N. That split is stable whatever the order of the arguments, and needs no coordination: N jobs
given the same list each grade their own part. `merge` puts many `--out` directories back into
one, with one grades.csv in the format of a single run.
"""

import csv
import hashlib
import json
import shutil
from pathlib import Path


class ShardError(ValueError):
    """A bad --shard value or out directories that cannot be merged (exit code 2)."""


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


def merge(out_dirs: list, merged: Path) -> dict:
    """Copy every <id>.json of `out_dirs` into `merged` and write one grades.csv for them all,
    rows sorted by submission id. An id graded in two directories with different results is an
    error (two runs disagree: which one counts is the instructor's call). Returns {id: path}."""
    from autograder.engine.batch import load_result
    from autograder.engine.results import write_csv

    merged = Path(merged)
    found, paths, ungraded = {}, {}, {}
    for out in map(Path, out_dirs):
        if not out.is_dir():
            raise ShardError(f"{out}: not a directory")
        csv_path = out / "grades.csv"
        if csv_path.exists():
            with open(csv_path, newline="", encoding="utf-8") as f:
                for line, row in enumerate(csv.DictReader(f), start=2):
                    if not row.get("submission"):
                        raise ShardError(f"{csv_path}, line {line}: no submission id")
                    paths.setdefault(row["submission"], row.get("path", ""))
                    if not row.get("total"):
                        ungraded.setdefault(row["submission"], csv_path)
        for json_path in sorted(out.glob("*.json")):
            name = json_path.stem
            try:
                data = json.loads(json_path.read_text(encoding="utf-8"))
            except ValueError as error:
                raise ShardError(f"{json_path}: not a result JSON ({error})") from None
            if name in found and _comparable(found[name][1]) != _comparable(data):
                raise ShardError(f"{name} was graded twice with different results: {found[name][0]} and {json_path}")
            found.setdefault(name, (json_path, data))
            paths.setdefault(name, data.get("submission", ""))
    merged.mkdir(parents=True, exist_ok=True)
    for name, (source, _) in found.items():
        if source.resolve() != (merged / source.name).resolve():
            shutil.copyfile(source, merged / source.name)
            # the pictures `grade --out --plots` drew for it (the judge's files, never links)
            pictures = source.parent / "pictures" / name
            if pictures.is_dir() and not pictures.is_symlink():
                shutil.copytree(pictures, merged / "pictures" / name, symlinks=True, dirs_exist_ok=True)
    names = sorted(set(found) | set(ungraded))
    results = [load_result(found[name][0]) if name in found else None for name in names]
    write_csv(results, names, merged / "grades.csv", paths=[paths.get(name, "") for name in names])
    return {name: merged / f"{name}.json" for name in found}


def _comparable(data: dict) -> dict:
    """A result without what differs between two gradings of the same code (how long it took)."""
    return {key: value for key, value in data.items() if key != "duration_s"}
