"""The nbgrader course, run for real and offline, and the same three submissions through every
route: CLI (`python -m autograder grade`), nbgrader, GitHub Classroom commands, Gradescope.

One course for the module: generate_assignment, three students (the reference, the untouched
skeleton, the reference with a masking mistake), autograde, export, generate_feedback.
"""

import base64
import contextlib
import html
import io
import json
import math
import os
import re
import subprocess
import sys

import pytest

from autograder.routes import classroom
from autograder.routes.cli import main as cli
from autograder.engine.course.assignment import step_modules
from autograder.engine.scan.submission import notebook_files
from autograder.routes.nbgrader_course import fill_notebook
from planted import planted_of
from autograder.routes.student_release import HIDDEN_MARKER, PROBES_MARKER
from autograder.engine.build.skeleton import solution_regions
from conftest import KIT, SOLUTIONS

if not os.environ.get("MHA_LAB_CI"):  # CI installs the instructor extra: never skip there
    pytest.importorskip("nbgrader", reason="pip install -e .[instructor]")
import nbformat  # noqa: E402 - comes with nbgrader

pytestmark = pytest.mark.slow  # real nbgrader / Classroom runs: minutes; CI runs them (pytest -m "")

STEPS = [step_id for step_id in step_modules("mha")]
MISTAKE = next(m for m in planted_of("masking") if m.id == "mask_fill_zero")


def reference_files():
    return {p.name: p.read_text() for p in sorted((SOLUTIONS / "mha").glob("*.py"))}


def student_files():
    """student id -> {file: source} (empty: the skeleton as released). The masking student
    also leaves debugging output on stderr, which must cost nothing."""
    mistaken = reference_files()
    mistaken[MISTAKE.file] = MISTAKE.apply(mistaken[MISTAKE.file])
    mistaken["masking.py"] += (
        '\nimport sys, warnings\nprint("debugging masks", file=sys.stderr)\nwarnings.warn("still debugging")\n'
    )
    return {"reference": reference_files(), "skeleton": {}, "masking": mistaken}


def run_nbgrader(course, *args):
    # nbgrader runs the `alembic` script of its environment: put that environment's bin first.
    env = {
        **os.environ,
        "PYTHONPATH": str(KIT),
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
    }
    completed = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True, text=True, timeout=900
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return completed


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    assert cli(["nbgrader", str(root)]) == 0
    run_nbgrader(root, "generate_assignment", "mha", "--create")
    released = nbformat.read(str(root / "release" / "mha" / "mha.ipynb"), as_version=4)
    for student, files in student_files().items():
        target = root / "submitted" / student / "mha"
        target.mkdir(parents=True)
        nbformat.write(fill_notebook(released, files, "mha"), str(target / "mha.ipynb"))
    autograde = run_nbgrader(root, "autograde", "mha", "--create")
    (root / "autograde.log").write_text(autograde.stdout + autograde.stderr)
    run_nbgrader(root, "export", "--to", str(root / "grades.csv"))
    run_nbgrader(root, "generate_feedback", "mha")
    return root


def nbgrader_points(course):
    """student -> {step: points} from nbgrader's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        points = {}
        for student in student_files():
            notebook = gradebook.find_submission_notebook("mha", "mha", student)
            points[student] = {g.name.removeprefix("check_"): round(g.score, 4) for g in notebook.grades}
    return points


def cli_points(tmp_path, submission, public_only=False):
    out = tmp_path / ("public.json" if public_only else "result.json")
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli(["grade", str(submission), "--json", str(out), *(["--public-only"] if public_only else [])]) == 0
    return {s["id"]: round(s["score"], 4) for s in json.loads(out.read_text())["steps"]}


def write_package(root, files):
    """root/mha/ holding `files` (the skeleton's files where `files` is empty)."""
    package = root / "mha"
    package.mkdir(parents=True)
    source = files or {p.name: p.read_text() for p in (KIT / "assignments" / "mha").glob("*.py")}
    for name, text in source.items():
        (package / name).write_text(text)
    return root


def hidden_check_lines():
    """Distinctive source lines of every hidden check (what feedback must never show)."""
    lines = set()
    for path in (KIT / "autograder" / "assignments" / "mha" / "checks").glob("*.py"):
        text = path.read_text()
        if HIDDEN_MARKER in text:
            region = text.split(HIDDEN_MARKER, 1)[1].split(PROBES_MARKER, 1)[0]
            lines |= {
                line.strip()
                for line in region.splitlines()
                if len(line.strip()) > 24 and not line.strip().startswith(("#", '"""'))
            }
    assert lines, "no hidden check lines found: the test would prove nothing"
    return lines


def hidden_only_check_ids():
    """Ids of hidden checks that no public check shares (feedback shows them as a count only)."""
    checks = [c for module in step_modules("mha").values() for c in module.CHECKS]
    return {c.id for c in checks if c.visibility == "hidden"} - {c.id for c in checks if c.visibility == "public"}


def test_the_course_notebook_in_solutions_is_up_to_date(config):
    from autograder.routes.nbgrader_course import write_course_notebook

    assert write_course_notebook(config, dry_run=True) == [], "run `python -m autograder skeleton` and commit"


def test_a_stale_course_notebook_is_reported(config, tmp_path):
    from autograder.routes.nbgrader_course import write_course_notebook

    stale = tmp_path / "mha.ipynb"
    stale.write_text((SOLUTIONS / "mha.ipynb").read_text().replace("raise NotImplementedError", "pass  # "))
    assert write_course_notebook(config, target=stale, dry_run=True) == [stale]


def test_the_released_notebook_has_no_solution_and_no_hidden_switch(course):
    text = (course / "release" / "mha" / "mha.ipynb").read_text()
    assert "HIDDEN TESTS" not in text and "hidden = True" not in text
    released = json.loads(text)
    sources = "\n".join(
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in released["cells"]
    )
    skeletons = {p.name: p.read_text() for p in (KIT / "assignments" / "mha").glob("*.py")}
    shown = "\n".join(skeletons.values())
    for name, source in reference_files().items():
        for region in solution_regions(source):
            for line in region.splitlines():
                code = line.strip()  # a line the skeleton itself shows (in a TODO comment) is no leak
                assert len(code) < 12 or code not in sources or code in shown, f"{name}: {code}"
    # The released solution cells hold exactly the skeletons students get in assignments/mha.
    for name, source in notebook_files(released, "mha").items():
        assert source.strip() in skeletons[name], name


def test_autograde_finds_no_locked_cell_changed(course):
    """nbgrader compares each locked cell with the checksum its gradebook kept at
    generate_assignment, before it cut hidden-test regions: a check cell with such a region was
    reported changed for every student. The check cells switch on the hidden checks otherwise."""
    log = (course / "autograde.log").read_text()
    assert "Attribute 'checksum'" not in log and "has changed" not in log, log[-2000:]
    assert "autograding" in log.lower() or "Autograding" in log


def test_nbgrader_scores_each_step_as_the_cli_does(course, tmp_path):
    points = nbgrader_points(course)
    assert set(points["reference"]) == set(STEPS)
    assert sum(points["reference"].values()) == pytest.approx(100)
    assert sum(points["skeleton"].values()) == 0
    assert 0 < points["masking"]["masking"] < 15
    for student in student_files():
        submitted = course / "submitted" / student  # the CLI reads the notebook itself
        assert cli_points(tmp_path / student, submitted) == points[student], student


def test_exported_csv_totals_match_the_gradebook(course):
    import csv

    rows = {row["student_id"]: row for row in csv.DictReader((course / "grades.csv").open())}
    for student, steps in nbgrader_points(course).items():
        assert float(rows[student]["score"]) == pytest.approx(sum(steps.values()), abs=1e-3)
        assert float(rows[student]["max_score"]) == pytest.approx(100)


def test_check_cells_write_nothing_to_stderr(course):
    for student in student_files():
        graded = nbformat.read(str(course / "autograded" / student / "mha" / "mha.ipynb"), as_version=4)
        checks = [c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade")]
        assert len(checks) == len(STEPS)
        for cell in checks:
            assert not [o for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"], cell.source
            assert [o for o in cell.outputs if o.output_type == "execute_result"], cell.source


def test_feedback_shows_what_failed_but_no_hidden_check_source(course):
    hidden = hidden_check_lines()
    assert len(hidden) > 20
    for student in student_files():
        page = html.unescape(re.sub(r"<[^>]+>", "", (course / "feedback" / student / "mha" / "mha.html").read_text()))
        assert "HIDDEN TESTS" not in page and "hidden = True" not in page
        shown = [line for line in hidden if line in page]
        assert shown == [], f"{student}: hidden check source in the feedback: {shown[:3]}"
        named = set(re.findall(r"x (\w+):", page)) & hidden_only_check_ids()
        assert not named, f"{student}: hidden checks named in the feedback: {named}"
    masking = html.unescape((course / "feedback" / "masking" / "mha" / "mha.html").read_text())
    assert "blocked key" in masking  # the failing check says what is wrong


def classroom_points(submission):
    """{step: points} from `python -m autograder.routes.classroom STEP` per step: the per-push
    feedback, public checks only (the Classroom grade of record is the CLI's, docs/classroom.md)."""
    points = {}
    for step in STEPS:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            classroom.main(
                [
                    step,
                    "--path",
                    str(submission),
                    "--config",
                    str(KIT / "grading.yml"),
                    "--in-process",
                ]
            )
        line = next(text for text in out.getvalue().splitlines() if text.startswith("result="))
        result = json.loads(base64.b64decode(line.removeprefix("result=")))
        points[step] = round(sum(t["score"] for t in result["tests"]), 2)
    return points


def test_four_routes_give_the_same_step_scores(course, tmp_path):
    from test_release import run_gradescope

    nbgrader_scores = nbgrader_points(course)
    for student, files in student_files().items():
        package = write_package(tmp_path / student / "repo", files)
        routes = {
            "cli": cli_points(tmp_path / student, package),
            "nbgrader": nbgrader_scores[student],
            "classroom": classroom_points(package),
            "public": cli_points(tmp_path / student, package, public_only=True),
        }
        uploaded = {p.name: p.read_text() for p in (package / "mha").glob("*.py")}
        gradescope = run_gradescope(tmp_path / student, uploaded)
        routes["gradescope"] = {
            step: round(sum(t["score"] for t in gradescope["tests"] if t["name"].startswith(f"{step}: ")), 2)
            for step in STEPS
        }
        for step in STEPS:
            seen = {route: scores[step] for route, scores in routes.items() if route not in ("classroom", "public")}
            assert max(seen.values()) - min(seen.values()) <= 0.011, f"{student}, {step}: {seen}"
            # Classroom's per-push feedback: the public checks' score, in whole points (rounded half up)
            public = routes["public"][step]
            assert routes["classroom"][step] == math.floor(public + 0.5 + 1e-6), f"{student}, {step}: {routes}"
