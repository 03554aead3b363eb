"""An LMS's bulk download in, its gradebook import file out, through a roster.

    students = read_roster(Path("roster.csv"))                     # id, name, email, canvas_id, moodle_id
    found = import_canvas(Path("submissions.zip"), Path("submissions"), students)
    found = import_moodle(Path("moodle-download"), Path("submissions"), students,
                          worksheet_times(Path("worksheet.csv"), ZoneInfo("Asia/Seoul")))
    text = canvas_csv(results, students, column="MHA (12345)")      # Canvas's gradebook import
    text = moodle_csv(results, students)                            # Moodle's grading worksheet

Canvas's submissions.zip holds each student's files flat, named
`{sortable name}[_LATE]_{canvas user id}_{attachment id}_{file name}` (a file re-submitted
under the same name gets `-1`, `-2` before its extension). Moodle's download (in folders) holds
a folder per participant, `{full name}_{participant id}_assignsubmission_file_`, or the same
prefix on each file when flat. Each student becomes a folder `out/<id>/` of their files, the id
the roster's (else the LMS's name and number), and `out/lms.csv` says who each is, what the LMS
said of the submission (Canvas's late flag; the time Moodle's grading worksheet gives), and which
files came: the `--times` file of `grade` takes it. Canvas's names carry no time.

Everything a download holds past the LMS's own prefix is the student's: the zip is extracted
within archive.py's limits (no name outside the target, no link, no bomb), a file name is kept
only as one safe path part, and a name that does not parse is listed, not guessed.
"""

import csv
import dataclasses
import datetime
import io
import re
import shutil
import tempfile
from pathlib import Path

from autograder.engine.checks.text import csv_table
from autograder.engine.judge.grades_csv import gradebook_notes
from autograder.engine.judge.result_files import write_atomically
from autograder.engine.scan import archive

CANVAS_NAME = re.compile(r"^(?P<name>[^_/\\]*?)(?P<late>_late)?_(?P<user>\d+)_(?P<attachment>\d+)_(?P<file>.+)$", re.I)
MOODLE_NAME = re.compile(r"^(?P<name>.+?)_(?P<participant>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<file>.*)$")
RESUBMITTED = re.compile(r"^(?P<stem>.+?)-\d+(?P<suffix>\.[A-Za-z0-9]+)$")
LIMITS = archive.Limits(members=20000, total=2 << 30, depth=4, member=64 << 20)
LMS_CSV = "lms.csv"


class LmsError(ValueError):
    """A roster or download that cannot be read (exit 2): names the file (and line)."""


@dataclasses.dataclass
class Student:
    id: str
    name: str = ""
    email: str = ""
    canvas_id: str = ""
    sis_id: str = ""
    login: str = ""
    section: str = ""
    moodle_id: str = ""


@dataclasses.dataclass
class Imported:
    id: str
    lms: str
    lms_id: str
    name: str
    late: bool = None  # what the LMS said (Canvas's _LATE), None where it says nothing
    submitted_at: str = ""  # when, where the LMS said (Moodle's worksheet), ISO 8601 with its offset
    files: list = dataclasses.field(default_factory=list)


ROSTER_COLUMNS = {  # roster column (lower case) -> Student field; a Canvas gradebook export reads as one
    "id": "id",
    "student_id": "id",
    "name": "name",
    "student": "name",
    "email": "email",
    "email address": "email",
    "canvas_id": "canvas_id",
    "sis_id": "sis_id",
    "sis user id": "sis_id",
    "login": "login",
    "sis login id": "login",
    "section": "section",
    "moodle_id": "moodle_id",
}


def read_roster(path: Path) -> list:
    """The Students of a roster CSV: `id,name,email` and any of `canvas_id`, `moodle_id`, `sis_id`,
    `login`, `section`; or Canvas's own gradebook export (Student, ID, SIS User ID, SIS Login ID,
    Section: the id is the SIS User ID, else Canvas's). LmsError naming file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise LmsError(f"--roster {path}: cannot read it ({error})") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [name.strip() for name in reader.fieldnames or []]
    canvas = "Student" in header and "ID" in header
    if not canvas and "id" not in [name.lower() for name in header]:
        raise LmsError(f"{path}, line 1: a roster needs an `id` column (and name, email; canvas_id, moodle_id)")
    students, seen = [], {}
    for row in reader:
        row = {(key or "").strip(): (value or "").strip() for key, value in row.items() if isinstance(value, str)}
        if canvas:
            if row.get("Student") in ("", "Points Possible") or row.get("Student", "").startswith("    "):
                continue
            fields = {"canvas_id": row.get("ID", "")}
            fields.update(
                {ROSTER_COLUMNS[k.lower()]: v for k, v in row.items() if k.lower() in ROSTER_COLUMNS and k != "ID"}
            )
            fields["id"] = fields.get("sis_id") or fields["canvas_id"]
        else:
            fields = {ROSTER_COLUMNS[k.lower()]: v for k, v in row.items() if k.lower() in ROSTER_COLUMNS}
        if not fields.get("id"):
            raise LmsError(f"{path}, line {reader.line_num}: no student id")
        if fields["id"] in seen:
            raise LmsError(
                f"{path}, line {reader.line_num}: id {fields['id']} again (first on line {seen[fields['id']]})"
            )
        seen[fields["id"]] = reader.line_num
        students.append(Student(**fields))
    return students


def safe_id(text: str) -> str:
    """`text` as a folder name: letters, digits and -_. kept, the rest _."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text).strip("._") or "_"


def _file_name(name: str) -> str:
    """The student's file name as one safe path part, Canvas's `-N` of a re-submission taken off."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    match = RESUBMITTED.match(name)
    if match and match["suffix"].lower() in (".py", ".ipynb", ".zip"):
        name = match["stem"] + match["suffix"]
    return safe_id(name)


def import_canvas(download: Path, out: Path, roster: list = None) -> tuple:
    """Canvas's submissions.zip (or the folder it was unzipped to) into out/<id>/ folders.
    Returns ([Imported], [(name, why) not imported]); writes out/lms.csv."""
    by_canvas = {student.canvas_id: student for student in roster or [] if student.canvas_id}
    with tempfile.TemporaryDirectory() as scratch:
        folder = _unpacked(download, Path(scratch))
        found, skipped = {}, []
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.is_symlink():
                continue
            match = CANVAS_NAME.match(path.name)
            if match is None:
                skipped.append((path.name, "not a Canvas submission name"))
                continue
            student = by_canvas.get(match["user"])
            if roster is not None and student is None:
                skipped.append((path.name, f"Canvas user {match['user']} is not on the roster"))
                continue
            ident = student.id if student else f"{match['name'] or 'student'}_{match['user']}"
            entry = found.setdefault(
                ident, Imported(safe_id(ident), "canvas", match["user"], student.name if student else match["name"])
            )
            entry.late = bool(match["late"]) or bool(entry.late)
            entry.files.append((path, _file_name(match["file"])))
        return _write(out, found.values()), skipped


def import_moodle(download: Path, out: Path, roster: list = None, times: dict = None) -> tuple:
    """Moodle's bulk download (a zip, or its folder; in folders per participant or flat) into
    out/<id>/ folders; `times` {participant id: ISO time} (worksheet_times). Returns ([Imported],
    [(name, why)]); writes out/lms.csv."""
    by_moodle = {student.moodle_id: student for student in roster or [] if student.moodle_id}
    by_name = {student.name: student for student in roster or [] if student.name}
    with tempfile.TemporaryDirectory() as scratch:
        folder = _unpacked(download, Path(scratch))
        found, skipped = {}, []
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.is_symlink():
                continue
            relative = path.relative_to(folder).parts
            owner = next((part for part in relative if MOODLE_NAME.match(part)), None)
            if owner is None:
                skipped.append(("/".join(relative), "not a Moodle submission name"))
                continue
            match = MOODLE_NAME.match(owner)
            if match["plugin"] != "file":
                skipped.append(("/".join(relative), f"Moodle's {match['plugin']} submission (only files are graded)"))
                continue
            student = by_moodle.get(match["participant"]) or by_name.get(match["name"])
            if roster is not None and student is None:
                skipped.append(("/".join(relative), f"participant {match['participant']} is not on the roster"))
                continue
            ident = student.id if student else f"{match['name']}_{match['participant']}"
            entry = found.setdefault(
                ident,
                Imported(safe_id(ident), "moodle", match["participant"], student.name if student else match["name"]),
            )
            entry.submitted_at = (times or {}).get(match["participant"], "")
            inside = relative[relative.index(owner) + 1 :] if owner != relative[-1] else (match["file"],)
            entry.files.append((path, "/".join(safe_id(part) for part in inside) or "_"))
        return _write(out, found.values()), skipped


MOODLE_TIME = "%A, %d %B %Y, %I:%M %p"  # the worksheet's "Last modified (submission)", in English


def worksheet_times(path: Path, zone) -> dict:
    """{participant id: ISO time with its offset} of Moodle's grading worksheet (Assignment >
    Download grading worksheet): its Identifier ("Participant N") and "Last modified
    (submission)", a time Moodle's server wrote in the course's time zone `zone` (a tzinfo:
    the worksheet says none). LmsError naming the line of a time that does not read."""
    path = Path(path)
    try:
        reader = csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig")))
    except (OSError, UnicodeDecodeError) as error:
        raise LmsError(f"--worksheet {path}: cannot read it ({error})") from None
    if not {"Identifier", "Last modified (submission)"} <= set(reader.fieldnames or []):
        raise LmsError(f"{path}, line 1: not a Moodle grading worksheet (Identifier, Last modified (submission))")
    found = {}
    for row in reader:
        number = (row["Identifier"] or "").removeprefix("Participant").strip()
        text = (row["Last modified (submission)"] or "").strip()
        if not number.isdigit() or text in ("", "-"):
            continue
        try:
            moment = datetime.datetime.strptime(text, MOODLE_TIME).replace(tzinfo=zone)
        except ValueError:
            raise LmsError(
                f"{path}, line {reader.line_num}: {text!r} is not Moodle's English date "
                "(Thursday, 1 October 2026, 11:59 PM): download the worksheet with English as the language"
            ) from None
        found[number] = moment.isoformat()
    return found


def _unpacked(download: Path, scratch: Path) -> Path:
    """The download as a folder: a zip extracted within LIMITS, a folder as it is."""
    download = Path(download)
    if download.is_dir():
        return download
    try:
        archive.extract(download, scratch / "download", LIMITS)
    except archive.ArchiveError as error:
        message_id, params = error.args
        raise LmsError(f"{download}: cannot be read as an LMS download ({message_id}: {params})") from None
    return scratch / "download"


def _write(out: Path, entries) -> list:
    """Each Imported's files into out/<id>/ (an existing folder of that id is replaced whole),
    and out/lms.csv."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    entries = sorted(entries, key=lambda entry: entry.id)
    for first, second in zip(entries, entries[1:], strict=False):
        if first.id == second.id:  # two ids, one folder name: neither may overwrite the other
            raise LmsError(f"{first.name!r} and {second.name!r} would both be the folder {first.id}: give distinct ids")
    for entry in entries:
        target = out / entry.id
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        names = []
        for source, name in entry.files:
            destination = target / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            if destination.exists():  # two files of one name: both kept
                destination = destination.with_name(f"{len(names)}_{destination.name}")
            shutil.copyfile(source, destination, follow_symlinks=False)
            names.append(str(destination.relative_to(target)))
        entry.files = names
    rows = [["submission", "submitted_at", "lms", "lms_id", "name", "lms_late", "files"]]
    for entry in entries:
        late = "" if entry.late is None else str(entry.late).lower()
        rows.append([entry.id, entry.submitted_at, entry.lms, entry.lms_id, entry.name, late, " ".join(entry.files)])
    write_atomically(out / LMS_CSV, csv_table(rows, line_end="\n"))
    return entries


def result_of(results: dict, student: Student):
    """The student's result: under their roster id, or the folder name lms-import made of it."""
    return results.get(student.id) or results.get(safe_id(student.id))


def canvas_csv(results: dict, roster: list, column: str, max_score: float = None) -> str:
    """Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, then the
    assignment's column (`column`: as Canvas names it, "Title (assignment id)", to update that
    assignment) holding each student's grade of record. `results`: {id: GradeResult or None};
    a roster student without a result gets an empty cell (Canvas leaves it as it is)."""
    rows = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", column]]
    if max_score is not None:
        rows.append(["Points Possible", "", "", "", "", f"{max_score:g}"])
    for student in roster:
        result = result_of(results, student)
        cell = "" if result is None else f"{result.grade:.2f}"
        rows.append([student.name, student.canvas_id, student.sis_id, student.login, student.section, cell])
    return csv_table(rows)


def moodle_csv(results: dict, roster: list, max_score: float) -> str:
    """Moodle's grading worksheet (Assignment > Upload grading worksheet): Identifier
    ("Participant N"), Full name, Email address, Grade, Maximum Grade, Feedback comments (the
    gradebook's notes: late policy and adjustments)."""
    rows = [["Identifier", "Full name", "Email address", "Grade", "Maximum Grade", "Feedback comments"]]
    for student in roster:
        result = result_of(results, student)
        grade = "" if result is None else f"{result.grade:.2f}"
        notes = "" if result is None else gradebook_notes(result)
        rows.append([f"Participant {student.moodle_id}", student.name, student.email, grade, f"{max_score:.2f}", notes])
    return csv_table(rows)
