"""Nothing a hidden input reached reaches a student (issue 31, docs/threat-model.md "Information
flow"), tested as a difference: each submission of a corpus that tries to leak (tests/leaks.py)
is graded twice, with two hidden-check seeds (other hidden inputs, the same public ones), and
every output a student reads must be the same bytes both times, while the instructor's result
differs (the hidden inputs did reach the code, which did try to say so).

What a student reads, route by route where hidden checks run: the step as public_view shows it
(its JSON, its table and its pictures), Gradescope's visible tests and top-level output, and nbgrader's check
cell as it prints. (Classroom, `pytest assignments/` and a student's notebook run the public
checks only.) The hidden checks' points are the grade: each leak passes or fails its hidden
checks the same way under both seeds, so they are compared too.
"""

import contextlib
import hashlib
import io
import json
import re
from pathlib import Path

import pytest

import leaks
from autograder.engine.checks import messages
from autograder.engine.judge.runner import grade
from autograder.engine.judge.table import table
from autograder.engine.mistakes.diagnosis import public_message_ids
from autograder.publish.plots import pictures_for
from autograder.publish.public_view import public_view
from conftest import KIT, SOLUTIONS

SEEDS = (11, 12)


def student_outputs(result, public_ids) -> dict:
    """{where: text} of every output of `result` a student reads."""
    from autograder.publish.gradescope import gradescope_results

    shown = {}
    for step in result.steps:
        for lang in ("en", "ko"):
            with messages.speaking(lang):
                view, summary = public_view(result, step.id, public_ids)
                shown[f"view {step.id} json {lang}"] = json.dumps(view.to_json(), sort_keys=True)
                shown[f"view {step.id} table {lang}"] = table(view, verbose=True) + "\n" + summary
        for picture in view.steps[0].pictures:  # what they show, as drawn (grade --plots)
            shown[f"picture {Path(picture).name}"] = hashlib.sha256(Path(picture).read_bytes()).hexdigest()
    data = gradescope_results(result, 1.0, public_ids=public_ids)
    shown["gradescope top"] = json.dumps({k: v for k, v in data.items() if k != "tests"}, sort_keys=True)
    for test in data["tests"]:
        if test["visibility"] == "visible":
            shown[f"gradescope {test['name']}"] = json.dumps(test, sort_keys=True)
    # A worker's scratch folder (in a warning's file name, say) is named at random: it tells
    # nothing, and differs from one grading to the next whatever the seed.
    return {where: re.sub(r"mha-lab-scratch-\d+/\d+", "SCRATCH", text) for where, text in shown.items()}


def instructor_output(result) -> str:
    """What the instructor reads (the whole JSON), but the seed."""
    data = result.to_json()
    data.pop("seed"), data.pop("duration_s", None), data.pop("submission")
    return json.dumps(data, sort_keys=True)


def notebook_cell(step_id, path, seed) -> str:
    """What nbgrader's check cell prints for `step_id` (graded in the kernel: public checks only, the
    hidden ones are the sandboxed judge's)."""
    from autograder.routes.nbgrader_cell import check_step

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        points = check_step(step_id, directory=path, seed=seed)
    # the folder of its pictures is a new temporary one each time
    return re.sub(r"mha-lab-pictures-\w+", "PICTURES", f"{printed.getvalue()}\n{points}")


def differences(first: dict, second: dict) -> dict:
    return {
        key: (first.get(key), second.get(key)) for key in set(first) | set(second) if first.get(key) != second.get(key)
    }


@pytest.fixture
def run_bounded(monkeypatch):
    """The smallest example's search bounded by its runs alone: its wall-clock guard (for slow
    code) would make what it finds depend on this machine's load, which no hidden input sets."""
    from autograder.engine.judge import shrink

    monkeypatch.setattr(shrink, "SECONDS", 600.0)


# one of each kind; CI runs them all
QUICK = ("changes_what_it_returned", "prints_inputs", "state_across_steps", "warns", "wrong_values")


def every_leak(quick=QUICK):
    return [name if name in quick else pytest.param(name, marks=pytest.mark.slow) for name in sorted(leaks.LEAKS)]


def graded_twice(name, config, tmp_path, isolate):
    """(what a student reads, what the instructor reads) of leak `name` graded with each seed."""
    leak = leaks.LEAKS[name]
    path = leaks.make(tmp_path, name)
    public_ids = public_message_ids(config)
    shown, instructor, outcomes = [], [], []
    for seed in SEEDS:
        pictures = pictures_for(tmp_path / "pictures")  # the same names each time: read before the next
        result = grade(
            path, config, reference=SOLUTIONS, seed=seed, steps=list(leak.steps), isolate=isolate, pictures=pictures
        )
        assert not any(c.message_id == "tampering" for s in result.steps for c in s.checks), "the leak must run"
        shown.append(student_outputs(result, public_ids))
        if not isolate:
            shown[-1]["notebook"] = notebook_cell(leak.steps[-1], path, seed)
        instructor.append(instructor_output(result))
        outcomes.append([(s.id, c.id, c.passed) for s in result.steps for c in s.checks])
    assert outcomes[0] == outcomes[1], "the corpus keeps the grade itself the same under both seeds"
    assert instructor[0] != instructor[1], "the hidden inputs reached the code and changed what it did"
    return shown


@pytest.mark.parametrize("name", every_leak())
def test_a_leaking_submission_shows_a_student_the_same_whatever_the_hidden_inputs(name, config, tmp_path, run_bounded):
    """In the grader's own process (a notebook's kernel, `grade --in-process`): the public phase
    is over before any hidden input reaches the code."""
    assert not differences(*graded_twice(name, config, tmp_path, isolate=False))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(leaks.LEAKS))
def test_in_the_sandbox_too(name, config, tmp_path, run_bounded):
    """Sandboxed (`grade`, Gradescope, Classroom): the hidden checks run in a worker of their own."""
    assert not differences(*graded_twice(name, config, tmp_path, isolate=True))


def test_a_hidden_checks_picture_is_the_instructors_only(config, submission, tmp_path):
    """`grade --plots` draws every failing check (the instructor's); what a student is shown
    (public_view) keeps the pictures of the public checks only: a hidden check's would draw its
    inputs."""
    from planted import planted_of

    mistake = next(m for m in planted_of("masking") if m.name == "mask_fill_zero")
    result = grade(
        submission(mistake), config, reference=SOLUTIONS, seed=5, steps=["masking"], pictures=pictures_for(tmp_path)
    )
    drawn = {Path(path).name for path in result.step("masking").pictures}
    view, _ = public_view(result, "masking", public_message_ids(config))
    hidden = {f"masking-{c.id}.png" for c in result.step("masking").checks if c.visibility != "public"}
    assert drawn & hidden, drawn  # the planted mistake fails a hidden check that has a picture
    assert {Path(path).name for path in view.steps[0].pictures} == drawn - hidden


@pytest.mark.slow  # two sandboxed runs of the command line: CI runs them (pytest -m "")
@pytest.mark.parametrize("name", ["prints_inputs", "wrong_values"])
def test_gradescopes_results_json_shows_the_same_whatever_the_hidden_inputs(name, tmp_path):
    """The route itself, as run_autograder runs it (`grade UPLOAD --gradescope results.json`, in
    the sandbox): what results.json shows before grades are published is the same bytes under
    two hidden seeds."""
    import subprocess
    import sys

    path = leaks.make(tmp_path, name)
    shown = []
    for seed in SEEDS:
        results_json = tmp_path / f"results-{seed}.json"
        command = [sys.executable, "-m", "autograder", "grade", str(path), "--seed", str(seed)]
        command += ["--gradescope", str(results_json)]
        done = subprocess.run(command, cwd=KIT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        data = json.loads(results_json.read_text())
        assert any(test["visibility"] != "visible" for test in data["tests"])  # the hidden checks ran
        visible = [test for test in data["tests"] if test["visibility"] == "visible"]
        shown.append(json.dumps({**data, "tests": visible}, sort_keys=True))
    assert shown[0] == shown[1]
