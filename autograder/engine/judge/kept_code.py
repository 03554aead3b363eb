"""The code grading accepted, kept beside a batch's results for the class report.

    kept = keep(submission_files(staged, "mha"))     # in grade(), while the staging exists
    ref = write(out, "alice", kept)                   # out/code/alice.json; ref goes into alice.json
    files, note = read(out, "alice", ref)             # the report: {path: text}, or None and why

The class report compares students' code. It must compare what grading took (staging's files:
no links followed, no pipes or devices opened, nothing too large), never the submission folders
again, which may hold links to a classmate's files, devices, or have changed since. So grading
keeps it: the accepted files' texts, whole, the smallest first, up to KEEP_BYTES a submission,
and the size and SHA-256 of every accepted file (those past the limit: only that). The result's
JSON names the kept file's digest (`code`), and is written after it: a result whose digest does
not match (a kill between the two writes, a later run, an edit) is read as having no code.
"""

import hashlib
import json
from pathlib import Path

from autograder.engine.judge.result_files import write_atomically
from autograder.engine.scan.submission import read_regular

FORMAT = 1
KEEP_BYTES = 1 << 20  # bytes of accepted source kept per submission (the reference package: 46 KiB)
FOLDER = "code"  # out/code/<id>.json
READ_LIMIT = 8 * KEEP_BYTES  # the kept file, JSON-escaped (a control character takes 6 bytes)


def keep(files: dict) -> dict:
    """What is kept of `files` ({path in the package: bytes}, as grading took them): every file's
    size and SHA-256, and the texts of the smallest files up to KEEP_BYTES in all (decoded as
    UTF-8, an undecodable byte as U+FFFD)."""
    kept, total = [], 0
    for path, data in sorted(files.items(), key=lambda item: (len(item[1]), item[0])):
        record = {"path": path, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        if total + len(data) <= KEEP_BYTES:
            record["text"] = data.decode("utf-8", errors="replace")
            total += len(data)
        kept.append(record)
    return {"format": FORMAT, "files": sorted(kept, key=lambda record: record["path"])}


def encoded(kept: dict) -> bytes:
    return json.dumps(kept, ensure_ascii=False, sort_keys=True).encode("utf-8")


def reference(kept: dict) -> dict:
    """What the result's JSON says of its kept code: the digest of the kept file, how many files
    grading took, their bytes, and how many of them are kept whole."""
    return {
        "sha256": hashlib.sha256(encoded(kept)).hexdigest(),
        "files": len(kept["files"]),
        "bytes": sum(record["bytes"] for record in kept["files"]),
        "kept": sum("text" in record for record in kept["files"]),
    }


def path_of(out, name: str) -> Path:
    return Path(out) / FOLDER / f"{name}.json"


def write(out, name: str, kept: dict) -> dict:
    """Write out/code/<name>.json atomically; returns its reference (for the result's JSON)."""
    write_atomically(path_of(out, name), encoded(kept))
    return reference(kept)


def read(out, name: str, ref) -> tuple:
    """({path in the package: text} of the kept files, note) for the result `name` whose JSON
    says `ref`; (None, note) where there is nothing to compare. The note is None, or why:
    `code_not_kept` (graded by an older kit, or not by `grade --out`), `code_missing`,
    `code_mismatch` (not the code this result was graded from), `code_unreadable`,
    `code_partial` (some accepted files were too large to keep: those are not compared)."""
    if not isinstance(ref, dict) or not isinstance(ref.get("sha256"), str):
        return None, "code_not_kept"
    data = read_regular(path_of(out, name), READ_LIMIT)
    if data is None:
        return None, "code_missing"
    if hashlib.sha256(data).hexdigest() != ref["sha256"]:
        return None, "code_mismatch"
    try:
        kept = json.loads(data.decode("utf-8"))
        records = kept["files"]
        files = {r["path"]: r["text"] for r in records if isinstance(r.get("text"), str)}
        partial = len(files) < len(records)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None, "code_unreadable"
    if not all(isinstance(path, str) for path in files):
        return None, "code_unreadable"
    return files, "code_partial" if partial else None
