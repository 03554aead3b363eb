"""What the class report reads: the out directories of `grade --out`, and nothing else.

    entries = load_out_dirs([Path("grades")])
    entries[0] == {"id", "path", "result", "file", "problem", "code", "code_note", "pictures"}

Only files the grader wrote there are read: each result's JSON (out/<id>.json), grades.csv, the
code grading took of each submission (out/code/<id>.json, kept_code.py) and the pictures `grade
--plots` drew (out/pictures/<id>/). Never the submission folders: they may hold links to a
classmate's files or to devices, and what is there now is not what was graded. Every file is
opened without following a link, only if it is a regular file, and read within a size limit;
one that is not a result the report can read (not JSON, too large, NaN scores, fields of the
wrong kind) is that student's problem alone: the entry says `unreadable_result`, the rest of the
class is reported.
"""

import csv
import io
import json
import math
from pathlib import Path

from autograder.engine.checks.text import csv_records
from autograder.engine.judge import kept_code
from autograder.engine.scan.submission import read_regular

RESULT_LIMIT = 16 << 20  # bytes of one result's JSON (a graded result: under 100 KiB)
CSV_LIMIT = 64 << 20  # bytes of grades.csv
PICTURE_LIMIT = 8 << 20  # bytes of one picture
PNG = b"\x89PNG\r\n\x1a\n"


class ReportError(ValueError):
    """An out directory that cannot be read at all (exit code 2, the directory named)."""


def load_out_dirs(dirs: list) -> list:
    """One entry per submission found in the out directories of `grade --out`, by id: "result"
    (its JSON, or None), "problem" (None, or `unreadable_result`), "path" (what was graded),
    "file" (where its JSON was), "code" ({path: text} grading took, or None) and "code_note"
    (kept_code.read's note), "pictures" ({step: [paths]}). An id listed in grades.csv without a
    JSON is an entry without a result (the grader failed on it). A later directory's copy of an
    id wins."""
    entries = {}

    def entry(sid):
        return entries.setdefault(
            sid,
            {
                "id": sid,
                "path": "",
                "result": None,
                "file": None,
                "problem": None,
                "code": None,
                "code_note": None,
                "pictures": {},
            },
        )

    for out in map(Path, dirs):
        if out.is_symlink() or not out.is_dir():
            raise ReportError(f"{out}: not a directory (expected the --out of a batch grade)")
        for sid, path in _csv_rows(out).items():
            entry(sid)["path"] = entry(sid)["path"] or path
        for json_path in sorted(out.glob("*.json")):
            data = read_result(json_path)
            if data is None:  # not a result: a report.json written beside them, say
                continue
            found = entry(json_path.stem)
            if data == "unreadable":
                found.update(result=None, file=str(json_path), problem="unreadable_result", code=None, pictures={})
                continue
            code, note = kept_code.read(out, json_path.stem, data.get("code"))
            found.update(result=data, file=str(json_path), problem=None, code=code, code_note=note)
            found["path"] = found["path"] or data.get("submission", "")
            found["pictures"] = picture_files(out, json_path.stem, data)
    return sorted(entries.values(), key=lambda entry: entry["id"])


def _csv_rows(out: Path) -> dict:
    """{id: path} of grades.csv's rows (none where it is missing or unreadable)."""
    data = read_regular(out / "grades.csv", CSV_LIMIT)
    rows = {}
    if data is None:
        return rows
    try:
        # The cells as written (text.spreadsheet_cell read back: a quoted "=id" is "=id" again).
        for row in csv_records(io.StringIO(data.decode("utf-8", errors="replace"), newline="")):
            sid = row.get("submission")
            if isinstance(sid, str) and sid:
                rows.setdefault(sid, row.get("path") or "")
    except csv.Error:
        pass  # a cell past csv's limit: the JSONs still say who was graded
    return rows


def read_result(path: Path):
    """The result's JSON dict; None where the file is JSON but no result (no "steps");
    "unreadable" where it is not a result the report can read (read_regular, valid_result)."""
    data = read_regular(path, RESULT_LIMIT)
    if data is None:
        return "unreadable"
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_refuse)
    except (ValueError, RecursionError):
        return "unreadable"
    if not isinstance(value, dict) or "steps" not in value:
        return None
    return value if valid_result(value) else "unreadable"


def _refuse(name):
    raise ValueError(f"{name} is not a score")


def valid_result(data: dict) -> bool:
    """Whether `data` has every field the report reads, each of its kind (the JSON result of
    docs/instructors.md): a result edited or written by something else is refused whole."""

    def number(value):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    def text(value, optional=True):
        return isinstance(value, str) or (optional and value is None)

    def texts(value):
        return isinstance(value, list) and all(isinstance(item, str) for item in value)

    if not (number(data.get("score")) and number(data.get("max_score")) and text(data.get("assignment"), False)):
        return False
    if not (text(data.get("output", "")) and text(data.get("submission", "")) and texts(data.get("sandbox", []))):
        return False
    if not (data.get("seed") is None or isinstance(data.get("seed"), int)):
        return False
    if not (data.get("duration_s") is None or number(data.get("duration_s"))):
        return False
    if not isinstance(data["steps"], list):
        return False
    kit = data.get("kit_files")  # a Classroom repository's kit files (tampering_summary reads them)
    if kit is not None:
        if not isinstance(kit, dict) or not (kit.get("tampering") is None or isinstance(kit["tampering"], list)):
            return False
        for item in kit.get("tampering") or []:
            if not isinstance(item, dict) or not text(item.get("file"), False) or not text(item.get("change"), False):
                return False
    for step in data["steps"]:
        if not isinstance(step, dict) or not text(step.get("id"), False) or not text(step.get("title", "")):
            return False
        if not (number(step.get("score")) and number(step.get("max_score")) and text(step.get("status", "graded"))):
            return False
        if not (isinstance(step.get("checks"), list) and isinstance(step.get("diagnoses", []), list)):
            return False
        if not texts(step.get("pictures", [])):
            return False
        for check in step["checks"]:
            if not isinstance(check, dict) or not text(check.get("id"), False):
                return False
            if check.get("passed") not in (True, False, None) or not text(check.get("visibility")):
                return False
            if not (number(check.get("points")) and number(check.get("max_points"))):
                return False
            if not (text(check.get("message", "")) and text(check.get("message_id"))):
                return False
        for diagnosis in step.get("diagnoses", []):
            if not isinstance(diagnosis, dict) or not text(diagnosis.get("id"), False):
                return False
            if not text(diagnosis.get("message", "")):
                return False
    return True


def picture_files(out: Path, sid: str, result: dict) -> dict:
    """{step id: [paths]}: the pictures `grade --out --plots` drew for `sid` (the JSON's
    steps[].pictures) that are there: in out/pictures/<sid>/ (the out directory may have moved),
    else where the JSON says (`--plots DIR`); each a regular PNG within PICTURE_LIMIT, opened
    without following a link (picture_bytes)."""
    found = {}
    for step in result.get("steps", []):
        for picture in step.get("pictures", []):
            candidates = [out / "pictures" / sid / Path(picture).name, out / picture, Path(picture)]
            path = next((c for c in candidates if picture_bytes(c) is not None), None)
            if path is not None:
                found.setdefault(step["id"], []).append(str(path))
    return found


def picture_bytes(path):
    """The PNG at `path` (a regular file, not a link, within PICTURE_LIMIT, PNG's signature), or None."""
    data = read_regular(path, PICTURE_LIMIT)
    return data if data is not None and data.startswith(PNG) else None
