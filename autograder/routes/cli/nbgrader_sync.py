"""The grade of record of an nbgrader course: the submitted notebooks graded by the sandboxed
judge, their scores written into nbgrader's gradebook.

    python -m autograder nbgrader-sync COURSE_DIR [--assignment ID] [--workers N] [--force]

For each assignment of the course that grading.yml knows (or the one chosen), every student's
notebook in nbgrader's `submitted/` folder is graded as `python -m autograder grade` grades it:
in the sandbox, hidden checks included, with the instructor's grading.yml and reference. What is
graded is the notebook as nbgrader autograde runs it: the student's cells, the locked cells as the
gradebook kept them (nbgrader's OverwriteCells), nothing else of the submission (files beside
the notebook are not read). The scores go into the gradebook by the rule of
routes/nbgrader_gradebook.py (manual scores and comments kept; a check cell that claimed more
than the sandbox gives is flagged), and each autograded notebook's check cells get the verdict,
which formgrader and `nbgrader generate_feedback` show. Late penalties are computed again with the
course's own nbgrader plugin.

The batch's results stay in COURSE_DIR/judged/<assignment>/ (one JSON per student, grades.csv,
the notebooks as graded under notebooks/; `python -m autograder report` reads it). A second run
grades only the notebooks that changed since (a new submission, a changed course), and writes
the same scores: re-running is idempotent. `--force` grades everything again (after a change of
grading.yml or the kit). A submission nbgrader has not autograded yet is added to the gradebook
(as autograde would) and graded; one whose notebook cannot be read (missing, a link, not JSON,
too large) scores zero, with the reason; a failure of the grader itself leaves that student's
gradebook entry as it was and the command exits 1, naming them, so that a second run completes.
"""

import glob
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from autograder import KIT
from autograder.engine.course import config as grading_config
from autograder.engine.judge import result_files
from autograder.engine.judge.table import points
from autograder.engine.scan.submission import NOTEBOOK_LIMIT

OUT = "judged"  # COURSE_DIR/judged/<assignment>/: the sync's batch


@dataclass
class Submission:
    """A student's submitted assignment, as nbgrader's `submitted/` folder holds it."""

    student: str
    folder: Path
    timestamp: object = None  # datetime, from nbgrader's timestamp.txt


def course_directory(course: Path):
    """nbgrader's CourseDirectory of the course in `course`, configured as nbgrader configures it
    there: the Jupyter config path's nbgrader_config.py files, then the course's own; and that
    config (a traitlets Config)."""
    from jupyter_core.paths import jupyter_config_path  # late: comes with nbgrader
    from nbgrader.coursedir import CourseDirectory  # late: comes with nbgrader
    from traitlets.config import Config  # late: comes with nbgrader
    from traitlets.config.loader import PyFileConfigLoader  # late: comes with nbgrader

    config = Config()
    for directory in [*reversed(jupyter_config_path()), str(course)]:
        if (Path(directory) / "nbgrader_config.py").is_file():
            config.merge(PyFileConfigLoader("nbgrader_config.py", path=directory).load_config())
    if "root" not in config.CourseDirectory:
        config.CourseDirectory.root = str(Path(course).absolute())
    return CourseDirectory(config=config), config


def submissions(coursedir, assignment: str) -> list:
    """Every student's submission of `assignment` in the course's submitted folder, by student id."""
    pattern = coursedir.format_path(coursedir.submitted_directory, "(?P<student_id>[^/]+)", assignment, escape=True)
    found = []
    for name in sorted(glob.glob(coursedir.format_path(coursedir.submitted_directory, "*", assignment))):
        folder = Path(name)
        match = re.fullmatch(pattern, str(folder))
        if match and folder.is_dir() and not folder.is_symlink():
            found.append(Submission(match.group("student_id"), folder, coursedir.get_existing_timestamp(name)))
    return found


def as_autograded(path: Path, source_cells: dict) -> tuple:
    """(the student's notebook at `path` as nbgrader autograde runs it, or None; why not). Its
    locked cells take the source the gradebook kept (`source_cells`: {grade id: (source,
    locked)}), as nbgrader's OverwriteCells does; everything else is the student's. Read as
    plain JSON, within NOTEBOOK_LIMIT, never through a link."""
    if path.is_symlink() or not path.is_file():
        return None, "no notebook" if not path.is_symlink() else "a link, not a notebook"
    if path.stat().st_size > NOTEBOOK_LIMIT:
        return None, f"larger than {NOTEBOOK_LIMIT >> 20} MiB"
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError, MemoryError) as error:
        return None, f"not a readable notebook ({type(error).__name__})"
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        return None, "not a notebook (no list of cells)"
    cells = []
    for cell in notebook["cells"]:
        if not isinstance(cell, dict):
            continue
        meta = cell.get("metadata")
        nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
        grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
        kept = source_cells.get(grade_id) if isinstance(grade_id, str) else None
        if kept is not None and kept[1]:
            cell = {**cell, "source": kept[0]}
        cells.append(cell)
    return {**notebook, "cells": cells}, ""


def source_cells(gradebook, notebook: str, assignment: str) -> dict:
    """{grade id: (source, locked)} of the notebook's cells as the gradebook kept them."""
    return {
        cell.name: (cell.source, cell.locked) for cell in gradebook.find_notebook(notebook, assignment).source_cells
    }


def stage(found: list, out: Path, package: str, kept: dict) -> dict:
    """Write each submission's notebook as graded into out/notebooks/<student id>/; returns
    {folder: (Submission, why it could not be read or "")}. A folder whose notebook changed since
    the last run loses its result (out/<id>.json), so that the batch grades it again."""
    staged = {}
    for item, name in zip(found, folder_names([item.student for item in found]), strict=True):
        folder = out / "notebooks" / name
        notebook, why = as_autograded(item.folder / f"{package}.ipynb", kept)
        text = json.dumps(notebook if notebook is not None else {"cells": []}, indent=1, sort_keys=True) + "\n"
        target = folder / f"{package}.ipynb"
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            folder.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            (out / f"{name}.json").unlink(missing_ok=True)
        staged[folder] = (item, why)
    return staged


def folder_names(students: list) -> list:
    """A file-name-safe name per student id, unique: the id's safe characters, with a digest of
    the id where two ids would give the same name."""
    import hashlib

    safe = ["".join(c if c.isalnum() or c in "-_." else "_" for c in student).strip(".") or "_" for student in students]
    return [
        name
        if safe.count(name) == 1 and name == student
        else f"{name}-{hashlib.sha256(student.encode()).hexdigest()[:8]}"
        for name, student in zip(safe, students, strict=True)
    ]


def sync(course: Path, assignment: str = None, workers: int = None, force: bool = False, log=None) -> int:
    """Grade the course's submissions into its gradebook (see the module); an exit code."""
    from nbgrader.api import Gradebook  # late: comes with nbgrader

    log = log or sys.stderr
    coursedir, nbconfig = course_directory(course)
    graded = {config.id: config for config in grading_config.load_all()}
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        known = [a.name for a in gradebook.assignments]
    chosen = [assignment] if assignment else [name for name in known if name in graded]
    if assignment and (assignment not in graded or assignment not in known):
        where = "grading.yml" if assignment not in graded else f"the gradebook of {course}"
        print(f"error: no assignment {assignment!r} in {where} (run nbgrader generate_assignment first)", file=log)
        return 2
    if not chosen:
        print(f"error: the gradebook of {course} has no assignment of grading.yml ({', '.join(graded)})", file=log)
        return 2
    status = 0
    for name in chosen:
        status = max(status, sync_assignment(coursedir, nbconfig, graded[name], workers, force, log))
    return status


def sync_assignment(coursedir, nbconfig, config, workers, force, log) -> int:
    """sync() of one assignment of grading.yml; an exit code."""
    from nbgrader.api import Gradebook, MissingEntry  # late: comes with nbgrader

    from autograder.engine.judge.plan import default_seed  # late: torch, once there is a class to grade
    from autograder.engine.operations.batch import BatchBusy, grade_batch  # not in the student kit
    from autograder.engine.operations.shard import ShardError, read_manifest  # not in the student kit

    out = Path(coursedir.root) / OUT / config.id
    found = submissions(coursedir, config.id)
    if not found:
        print(f"{config.id}: no submission in {coursedir.submitted_directory}/ (run nbgrader collect first)", file=log)
        return 0
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        try:
            kept = source_cells(gradebook, config.package, config.id)
        except MissingEntry:
            print(f"error: assignment {config.id} of the gradebook has no notebook {config.package}", file=log)
            return 2
    seed = default_seed(config)
    try:
        previous = read_manifest(out) if out.is_dir() else None
    except ShardError:
        previous = None
    if previous is not None and previous.seed not in (None, seed):
        print(f"{out}: graded with another seed before: grading every submission again", file=log)
        force = True
    staged = stage(found, out, config.package, kept)
    try:
        ordered = grade_batch(
            list(staged),
            config,
            out,
            workers=workers,
            reference=KIT / "solutions",
            seed=seed,
            force=force,
            command=[
                sys.executable,
                "-m",
                "autograder",
                "nbgrader-sync",
                str(coursedir.root),
                "--assignment",
                config.id,
            ],
            log=log,
        )
    except (result_files.WriteError, BatchBusy) as error:
        print(f"error: {error}", file=log)
        return 1
    failed = []
    for (_folder, (item, why)), result in zip(staged.items(), ordered.values(), strict=False):
        if result is None:
            failed.append(item.student)
            continue
        done = write_gradebook(coursedir, nbconfig, config, item, result)
        print(summary_line(done, why), file=log)
    if failed:
        print(
            f"error: the grader failed on {len(failed)} submission(s) ({', '.join(failed)}): their gradebook "
            "entries are as they were; run the same command again to grade them",
            file=log,
        )
        return 1
    return 0


def write_gradebook(coursedir, nbconfig, config, item: Submission, result):
    """record() one student's result: the submission added where autograde has not run, the
    autograded notebook's check cells given the verdict, the late penalty computed again."""
    from nbgrader.api import Gradebook, MissingEntry  # late: comes with nbgrader

    from autograder.publish.nbgrader_gradebook import record, write_notebook  # late: imports nbgrader

    autograded_path = Path(coursedir.format_path(coursedir.autograded_directory, item.student, config.id))
    autograded_path = autograded_path / f"{config.package}.ipynb"
    autograded = None
    if autograded_path.is_file() and not autograded_path.is_symlink():
        try:
            autograded = json.loads(autograded_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            autograded = None
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        gradebook.update_or_create_student(item.student)
        try:
            gradebook.find_submission(config.id, item.student)
        except MissingEntry:
            extra = {"timestamp": item.timestamp} if item.timestamp else {}
            gradebook.update_or_create_submission(config.id, item.student, **extra)
        done = record(gradebook, config.id, config.package, item.student, result, config, autograded)
    if autograded is not None:
        write_notebook(autograded_path, autograded)
    else:
        done.notes.append("not autograded by nbgrader yet: formgrader shows its notebook once it is")
    late_penalty(coursedir, nbconfig, config, item.student)
    return done


def late_penalty(coursedir, nbconfig, config, student: str):
    """The submission's late penalty from its new scores, by the course's nbgrader plugin (as
    nbgrader autograde computes it)."""
    import nbformat  # late: comes with nbgrader
    from nbgrader.preprocessors import AssignLatePenalties  # late: comes with nbgrader

    resources = {
        "nbgrader": {
            "notebook": config.package,
            "assignment": config.id,
            "student": student,
            "db_url": coursedir.db_url,
        }
    }
    AssignLatePenalties(config=nbconfig).preprocess(nbformat.v4.new_notebook(), resources)


def summary_line(done, why: str) -> str:
    parts = [f"{done.student}: {points(done.total)} in the gradebook"]
    if why:
        parts.append(f"notebook {why}: scored 0")
    if done.claims:
        said = ", ".join(f"{c.grade_id} said {points(c.claimed)} (sandbox {points(c.public)})" for c in done.claims)
        parts.append(f"FLAGGED: its check cells claimed more than its code earns ({said})")
    if done.manual:
        parts.append("manual scores kept: " + ", ".join(f"{k} {points(v)}" for k, v in done.manual.items()))
    return "; ".join(parts + done.notes)


def run(args) -> int:
    """`python -m autograder nbgrader-sync`."""
    course = Path(args.course_dir)
    if not (course / "nbgrader_config.py").is_file() and not (course / "gradebook.db").is_file():
        print(f"error: {course} is not an nbgrader course (no nbgrader_config.py, no gradebook.db)", file=sys.stderr)
        return 2
    return sync(course, args.assignment, args.workers, args.force)
