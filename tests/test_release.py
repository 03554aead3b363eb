"""The student release and the Gradescope autograder, built and run for real."""

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from autograder.engine.course.assignment import mistakes_of, step_modules
from autograder.engine.generate.skeleton import solution_regions
from autograder.engine.mistakes.fingerprints import load, shipped_ids
from autograder.publish.release import release
from autograder.publish.student_release import strip_hidden
from conftest import KIT, SOLUTIONS
from planted import planted_of


@pytest.fixture(scope="module")
def student_release(tmp_path_factory):
    return release(tmp_path_factory.mktemp("release") / "mha-lab")


def release_text(root):
    """path -> its text without comment lines (TODO comments state the contract on purpose); a
    notebook's, its cells' sources (the grader it carries is the release's own, zipped)."""

    def text(path):
        if path.suffix != ".ipynb":
            return path.read_text(errors="replace")
        cells = json.loads(path.read_text())["cells"]
        return "\n".join("".join(cell["source"]) for cell in cells)

    return {
        path: "\n".join(line for line in text(path).splitlines() if not line.strip().startswith("#"))
        for path in root.rglob("*")
        if path.is_file()
    }


# The integration steps' observers write earlier steps' functions out (harness/earlier.py, one
# mistake one charge), and observers ship: they are written as those steps' public oracles state
# them (public knowledge), and held to the same rule, no reference line.


def test_release_has_no_reference_no_hidden_check_and_no_mistake(student_release):
    files = release_text(student_release)
    # Reference lines that compute something (assignments and returns); bare control flow such
    # as `if pad_mask is not None:` is common to any implementation, the public oracle included.
    packages = ("mha", "kv_cache")
    code_lines = {
        line.strip()
        for package in packages
        for path in (SOLUTIONS / package).glob("*.py")
        for region in solution_regions(path.read_text())
        for line in region.splitlines()
        if (" = " in line or line.strip().startswith("return ")) and len(line.strip()) > 12
    }
    hidden_ids = {
        c.id for a in packages for module in step_modules(a).values() for c in module.CHECKS if c.visibility == "hidden"
    } - {
        c.id for a in packages for module in step_modules(a).values() for c in module.CHECKS if c.visibility == "public"
    }
    # the ids the fingerprints can name ship (that is how the kit diagnoses); the others must not
    mistake_ids = {m.id for a in packages for step in step_modules(a) for m in mistakes_of(a, step)} - {
        i for a in packages for i in shipped_ids(load(a))
    }
    probe_ids = {p.diagnosis for a in packages for module in step_modules(a).values() for p in module.PROBES}
    assert "causal_ignores_device" in mistake_ids  # one that shows on a hidden check only
    for path, text in files.items():
        for line in code_lines:
            assert line not in text, f"{path}: reference line {line!r}"
        for check_id in hidden_ids:
            assert f'"{check_id}"' not in text, f"{path}: hidden check {check_id}"
        for mistake_id in mistake_ids - probe_ids:  # probes ship: they explain failures locally
            assert f'"{mistake_id}"' not in text and f'"diagnosis.{mistake_id}"' not in text, (
                f"{path}: hidden-only mistake {mistake_id}"
            )
    # observers that only hidden checks use describe what they look at: not shipped
    hidden_observers = {
        (a, type(c).observer.__module__.rsplit(".", 1)[-1], type(c).observer.__name__)
        for a in packages
        for module in step_modules(a).values()
        for c in module.CHECKS
        if c.visibility == "hidden"
    } - {
        (a, type(c).observer.__module__.rsplit(".", 1)[-1], type(c).observer.__name__)
        for a in packages
        for module in step_modules(a).values()
        for c in [*module.CHECKS, *module.PROBES]
        if c.visibility == "public"
    }
    assert hidden_observers  # there are some to leave out
    for a, module_name, name in hidden_observers:
        shipped = student_release / "autograder" / "assignments" / a / "observers" / f"{module_name}.py"
        assert f"def {name}(" not in shipped.read_text(), f"{shipped}: hidden-only observer {name}"
    assert not (student_release / "solutions").exists()
    assert (student_release / "autograder" / "assignments" / "mha" / "checks").is_dir()
    assert not (student_release / "autograder" / "assignments" / "mha" / "mistakes").exists()


def pytest_in_release(root, *args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "assignments", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def command_in_release(root, *args):
    """`python -m autograder ARGS` with the release's own grader."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-m", "autograder", *args], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )


def total_lines(output):
    """Each table's total, "score / maximum", without what follows it (what it leaves out)."""
    return [line.split(None, 1)[1].split("  ")[0] for line in output.splitlines() if line.strip().startswith("total ")]


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_release_grades_the_skeleton_zero_and_the_reference_full(student_release, tmp_path):
    # every assignment's public checks run, against the course's maximum: mha (the cuda step not
    # checked without --cuda, its 5 points still in the maximum), kv_cache
    completed = pytest_in_release(student_release)
    assert completed.returncode == 1 and total_lines(completed.stdout) == ["0.00 / 100.00", "0.00 / 100.00"]
    assert "not implemented yet" in completed.stdout
    copy = tmp_path / "filled"
    shutil.copytree(student_release, copy)
    for package in ("mha", "kv_cache"):
        shutil.rmtree(copy / "assignments" / package)
        shutil.copytree(SOLUTIONS / package, copy / "assignments" / package)
    completed = pytest_in_release(copy)
    assert completed.returncode == 0, completed.stdout[-3000:]
    assert total_lines(completed.stdout) == ["95.00 / 100.00", "100.00 / 100.00"]
    completed = command_in_release(copy, "grade")  # the public checks, the cuda step simulated
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert total_lines(completed.stdout) == ["100.00 / 100.00", "100.00 / 100.00"]
    # the release's own grader ran, not the kit's
    where = subprocess.run(
        [sys.executable, "-c", "import autograder; print(autograder.__file__)"],
        cwd=copy,
        capture_output=True,
        text=True,
    )
    assert where.stdout.strip().startswith(str(copy))


INSTRUCTOR_PARTS = [
    "publish/release.py",
    "publish/student_release.py",
    "publish/gradescope.py",
    "publish/nbgrader_course.py",
    "publish/nbgrader_gradebook.py",
    "publish/report",
    "publish/student_notebook.py",
    "engine/operations",
    "engine/generate",
]


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_release_ships_only_what_the_students_runs_need(student_release):
    grader = student_release / "autograder"
    assert [part for part in INSTRUCTOR_PARTS if (grader / part).exists()] == []
    # every module it ships imports, without the instructor's packages (Babel, nbformat, Jinja2)
    modules = sorted(
        ".".join(path.relative_to(student_release).with_suffix("").parts)
        for path in grader.rglob("*.py")
        if path.name != "__main__.py"
    )
    script = (
        "import importlib, sys\n"
        "for name in ('babel', 'nbformat', 'nbgrader', 'jinja2'):\n"
        "    sys.modules[name] = None  # importing it fails, as on a student's machine\n"
        f"for module in {modules!r}:\n"
        "    importlib.import_module(module)\n"
        "print(importlib.import_module('autograder').__file__)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=student_release, env=env, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip().startswith(str(student_release))


STUDENT_KIT_REFUSES = {  # what a student might type: the command the message names
    "release out": "release",
    "gradescope out/autograder.zip": "gradescope",
    "nbgrader out/course": "nbgrader",
    "skeleton --check": "skeleton",
    "fingerprints --check": "fingerprints",
    "merge assignments --out out": "merge",
    "report assignments --html out/report.html": "report",
    "student-notebook out/mha.ipynb": "student-notebook",
    "doctor": "doctor",
    "grade assignments --out out": "grade --out",
    "grade --gradescope out/results.json": "grade --gradescope",
    "grade --shard 1/2 --out=out": "grade --shard",
    "grade --grades out/results.json": "grade --gradescope",
}


@pytest.mark.parametrize("args", sorted(STUDENT_KIT_REFUSES))
def test_release_says_which_commands_are_the_instructors(student_release, tmp_path, args):
    copy = tmp_path / "kit"
    shutil.copytree(student_release, copy)
    completed = command_in_release(copy, *args.split())
    assert completed.returncode == 2, completed.stdout + completed.stderr
    named = f"this is the student kit: `python -m autograder {STUDENT_KIT_REFUSES[args]}` is an instructor command"
    assert named in completed.stderr, completed.stderr
    assert "Traceback" not in completed.stdout + completed.stderr
    assert not (copy / "out").exists()


def test_strip_hidden_keeps_the_probes():
    source = "A = 1\n\n# ### BEGIN HIDDEN CHECKS\n\nclass H: pass\n\n# ### PROBES (x)\n\nclass P: pass\n"
    assert strip_hidden(source) == "A = 1\n\n\n# ### PROBES (x)\n\nclass P: pass\n"


@functools.cache
def gradescope_zip():
    """The autograder zip, built once by the real command for every test that uploads to it."""
    zip_path = Path(tempfile.mkdtemp(prefix="mha-lab-gradescope-")) / "autograder.zip"
    completed = subprocess.run(
        [sys.executable, "-m", "autograder", "gradescope", str(zip_path)],
        cwd=KIT,
        check=True,
        capture_output=True,
        text=True,
    )
    # two assignments in grading.yml and none chosen: it says which it took, and how to choose
    assert "(assignment mha, the first of 2 in grading.yml; --assignment ID for another (kv_cache))" in completed.stdout
    return zip_path


def run_gradescope(tmp_path, files, upload=None):
    """Unpack the zip as /autograder/source under a temporary root, upload `files` (or the zip
    `upload`, which Gradescope unpacks into submission/), run it."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(gradescope_zip()) as archive:
        names = archive.namelist()
        archive.extractall(root / "source")
    assert {"setup.sh", "run_autograder"} <= set(names)
    (root / "submission").mkdir()
    for name, text in files.items():
        (root / "submission" / name).write_text(text)
    if upload is not None:
        with zipfile.ZipFile(upload) as archive:
            archive.extractall(root / "submission")
    env = {**os.environ, "MHA_LAB_GRADESCOPE_ROOT": str(root), "MHA_LAB_PYTHON": sys.executable}
    env.pop("MHA_LAB_COURSE_DIR")  # the zip's own course secret, as on Gradescope (test_secret.py)
    completed = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True, timeout=600
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text())


def assert_gradescope_shape(data):
    assert set(data) >= {"output", "tests"}
    assert "execution_time" not in data  # hidden checks ran: their code could draw the time out
    assert "score" not in data  # Gradescope adds up the tests, and shows no total before publication
    for test in data["tests"]:
        assert set(test) >= {"name", "score", "max_score", "output", "visibility"}
        # a check's test says passed or failed; a step's points (hidden checks ran) and what the
        # code printed afterwards have no status: Gradescope judges them by their score
        assert test.get("status", "passed") in ("passed", "failed")
        assert test["visibility"] in ("visible", "after_published")
    data["score"] = sum(t["score"] for t in data["tests"])  # the total Gradescope computes


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_gradescope_grades_the_reference_full(tmp_path):
    files = {p.name: p.read_text() for p in (SOLUTIONS / "mha").glob("*.py")}  # uploaded flat
    data = run_gradescope(tmp_path, files)
    assert_gradescope_shape(data)
    assert data["score"] == pytest.approx(100)
    assert {t["visibility"] for t in data["tests"]} == {"visible", "after_published"}
    assert data["extra_data"] == {"graded_files": sorted(files), "package_root": None}


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_gradescope_grades_the_whole_release_zipped_as_github_does(student_release, tmp_path):
    # a student's repository, handed in whole: GitHub's "Download ZIP" puts it one folder deep,
    # the kit's own files (autograder/, tests, workflows) beside the package
    filled = tmp_path / "mha-lab-main"
    shutil.copytree(student_release, filled)
    shutil.rmtree(filled / "assignments" / "mha")
    shutil.copytree(SOLUTIONS / "mha", filled / "assignments" / "mha", ignore=shutil.ignore_patterns("__pycache__"))
    upload = tmp_path / "mha-lab-main.zip"
    with zipfile.ZipFile(upload, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(filled.rglob("*")):
            archive.write(path, path.relative_to(tmp_path).as_posix())
    data = run_gradescope(tmp_path, {}, upload=upload)
    assert_gradescope_shape(data)
    assert data["score"] == pytest.approx(100)
    graded = sorted(f"mha-lab-main/assignments/mha/{p.name}" for p in (SOLUTIONS / "mha").glob("*.py"))
    assert data["extra_data"] == {"graded_files": graded, "package_root": "mha-lab-main/assignments"}
    assert "mha-lab-main/assignments/mha/attention.py" in data["output"]  # the student sees which files counted


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_gradescope_grades_a_mistake_lower_with_its_diagnosis(tmp_path):
    mistake = next(m for m in planted_of("attention") if m.id == "scale_by_d_model")
    files = {p.name: p.read_text() for p in (SOLUTIONS / "mha").glob("*.py")}
    files[mistake.file] = mistake.apply(files[mistake.file])
    data = run_gradescope(tmp_path, files)
    assert_gradescope_shape(data)
    assert data["score"] == pytest.approx(85)
    failing = [t for t in data["tests"] if t.get("status") == "failed"]
    assert failing and all(t["name"].startswith("attention: ") for t in failing)
    assert any("sqrt(d_model)" in t["output"] for t in failing)


# One planted mistake per step (two phrasings of the issue's own examples), run for real with
# `pytest assignments/` inside a release: the table shows the same diagnosis as the grader.
KIT_SAMPLE = [
    "pad_mutates_input_rows_replaced",
    "embedding_pad_row_trained",
    "qkv_shared_alias",
    "qkv_shared_k_and_v",
    "split_one_slice",
    "scale_inverted",
    "scale_by_d_v",
    "padding_mask_inverted",
    "mask_inverted_where",
    "out_merge_view_not_contiguous",
    "mha_mask_on_queries",
    "mha_heads_share_slice",
    "embedding_cpu_ids",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", KIT_SAMPLE)
def test_release_diagnoses_a_planted_mistake(student_release, tmp_path, name):
    from autograder.engine.checks import messages
    from planted import PLANTED

    planted = next(p for p in PLANTED if p.name == name)
    copy = tmp_path / "kit"
    shutil.copytree(student_release, copy)
    shutil.rmtree(copy / "assignments" / "mha")
    shutil.copytree(SOLUTIONS / "mha", copy / "assignments" / "mha")
    target = copy / "assignments" / "mha" / planted.file
    target.write_text(planted.apply(target.read_text()))
    completed = pytest_in_release(copy, "--step", planted.step, *(["--cuda"] if planted.step == "cuda" else []))
    assert completed.returncode == 1
    # the first line under the step names it (the step's explanation, engine/judge/feedback.py)
    assert "x " + messages.render(f"diagnosis.{planted.diagnosis}") in completed.stdout, completed.stdout[-3000:]


def test_students_get_the_gradings_torch_and_are_told_when_theirs_differs(student_release, monkeypatch):
    from autograder.engine.course import torch_pin
    from autograder.routes.pytest_plugin import StudentPlugin

    requirements = (student_release / "requirements.txt").read_text()
    assert f"torch=={torch_pin.GRADING_TORCH}\n" in requirements and torch_pin.CPU_INDEX in requirements
    assert torch_pin.torch_note(f"{torch_pin.GRADING_TORCH}+cu128") is None  # a CUDA build of it is it
    note = torch_pin.torch_note("2.14.0")
    assert f"torch {torch_pin.GRADING_TORCH}" in note and "2.14.0" in note
    assert f"pip install torch=={torch_pin.GRADING_TORCH}" in note
    monkeypatch.setattr(torch_pin, "installed_torch", lambda: "2.14.0")
    assert StudentPlugin.pytest_report_header(None, None) == [note]  # `pytest assignments/` says it first
    monkeypatch.setattr(torch_pin, "installed_torch", lambda: torch_pin.GRADING_TORCH)
    assert StudentPlugin.pytest_report_header(None, None) == []
    notebook = (student_release / "notebooks" / "mha.ipynb").read_text()
    assert "torch_note()" in notebook  # and the notebook's setup cell
    readme = (student_release / "README.md").read_text()  # both languages say which torch, and the notebooks
    assert readme.count(f"torch=={torch_pin.GRADING_TORCH}") == 2 and readme.count("notebooks/mha.ipynb") == 2


def test_what_the_readmes_examples_write_inside_the_kit_is_ignored():
    """`python -m autograder nbgrader course/` and `release out/mha-lab` write inside the kit."""
    if not (KIT / ".git").exists():
        pytest.skip("not a git checkout")
    completed = subprocess.run(
        ["git", "check-ignore", "course/source/mha/mha.ipynb", "out/mha-lab/README.md", "out/autograder.zip"],
        cwd=KIT,
        capture_output=True,
        text=True,
    )
    assert completed.stdout.split() == ["course/source/mha/mha.ipynb", "out/mha-lab/README.md", "out/autograder.zip"]


PROBE = """
import json, os, sys

def pytest_collection_finish(session):
    manager = session.config.pluginmanager
    seen = {"plugins": sorted(dist.project_name for _, dist in manager.list_plugin_distinfo())}
    with open(os.environ["PROBE_OUT"], "w") as out:
        json.dump(seen, out)
"""


def test_release_pytest_loads_only_the_plugins_its_checks_use(student_release, tmp_path):
    # a student's `pytest assignments/` in an environment that holds pytest plugins the kit never
    # uses (this one: hypothesis, anyio, platformdirs) loads none of them: only pytest-timeout,
    # which the checks' time limits need
    (tmp_path / "probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(tmp_path), PROBE_OUT=str(tmp_path / "seen.json"))
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "assignments", "--co", "-q", "-p", "probe", "-p", "no:cacheprovider"],
        cwd=student_release,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert json.loads((tmp_path / "seen.json").read_text())["plugins"] == ["pytest-timeout"]
