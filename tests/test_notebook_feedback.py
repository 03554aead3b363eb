"""The notebook check cell: public checks only, as feedback, whatever the kernel sets; the judge's
verdict that nbgrader's feedback shows in the cell (check_cell.step_report): hidden checks only
as a count and points; and the points frozen into the course when it was made."""

import json
import re

import pytest

from autograder.engine.course.assignment import step_modules
from autograder.publish.check_cell import step_report
from autograder.routes.nbgrader_cell import check_step
from conftest import SOLUTIONS
from planted import planted_of


def test_hidden_checks_show_as_a_count_and_points(submission, config):
    from autograder.engine.judge.runner import grade

    mistake = next(m for m in planted_of("attention") if m.id == "no_scale")
    result = grade(submission(mistake), config, reference=SOLUTIONS, seed=3, steps=["attention"])
    out = step_report(result, config, "attention", verbose=True)
    hidden = {c.id for c in step_modules("mha")["attention"].CHECKS if c.visibility == "hidden"}
    public = {c.id for c in step_modules("mha")["attention"].CHECKS if c.visibility == "public"}
    failing = set(re.findall(r"x (\w+):", out))  # verbose: each failing check's line
    assert failing and failing <= public, out  # the public failures are named ...
    assert not any(check in out for check in hidden - public), out  # ... the hidden ones nowhere
    assert re.search(rf"hidden checks: {len(hidden)}, 0.00/[0-9.]+ points", out), out


def test_the_check_cell_runs_public_checks_only_whatever_the_kernel_sets(submission, config, monkeypatch, capsys):
    """A mistake only a hidden check catches (test_a_diagnosis_only_hidden_checks_give...), with
    every variable that ever switched hidden checks on set as at nbgrader autograde: the cell
    runs the public checks (full marks, as feedback, saying so) and never loads the reference;
    the grade of record is the judge's (routes/cli/nbgrader_sync.py)."""
    from autograder.engine.judge import runner
    from planted import PLANTED

    path = submission(next(p for p in PLANTED if p.name == "causal_ignores_device"))
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setenv("MHA_LAB_HIDDEN", "1")
    references = []
    real_grade = runner.grade

    def spying(*args, **kwargs):
        references.append(kwargs.get("reference"))
        return real_grade(*args, **kwargs)

    monkeypatch.setattr("autograder.routes.nbgrader_cell.grade", spying)
    assert check_step("masking", directory=str(path), seed=3, points=15.0) == 15.0
    out = capsys.readouterr().out
    assert references == [None] and "hidden checks:" not in out, out
    assert "Feedback from your notebook" in out.splitlines()[0], out


def test_the_course_check_cells_call_the_same_whatever_a_cell_sets(config, monkeypatch):
    """Each check cell of the course notebook (solutions/mha.ipynb, what nbgrader releases), run
    with a recording check_step under every environment a student's cell can set: the same call
    every time, without `hidden` (public checks only), worth the cell's points. Fails on main
    7d8dbad: its cells asked for the hidden checks only where NBGRADER_EXECUTION said autograde,
    which a cell can change."""
    notebook = json.loads((SOLUTIONS / "mha.ipynb").read_text())
    cells = [c for c in notebook["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    assert len(cells) == len(config.steps)
    environments = [{}, {"NBGRADER_EXECUTION": "autograde"}, {"NBGRADER_EXECUTION": "off"}, {"MHA_LAB_HIDDEN": "0"}]
    for cell in cells:
        calls = []
        for environment in environments:
            with monkeypatch.context() as patch:
                for name in ("NBGRADER_EXECUTION", "MHA_LAB_HIDDEN"):
                    patch.delenv(name, raising=False)
                for name, value in environment.items():
                    patch.setenv(name, value)
                exec("".join(cell["source"]), {"check_step": lambda *a, **k: calls.append((a, k))})  # noqa: B023 - run here
        assert len(calls) == len(environments) and all(call == calls[0] for call in calls), calls
        args, kwargs = calls[0]
        assert "hidden" not in kwargs and kwargs["points"] == cell["metadata"]["nbgrader"]["points"], calls[0]


def test_points_changed_since_the_course_was_made_are_scored_out_of_the_cells(capsys):
    score = check_step("padding", directory=str(SOLUTIONS), points=4)  # grading.yml gives 10
    assert score == 4.0  # nbgrader refuses a cell scoring above its points
    assert "regenerate the course" in capsys.readouterr().out


def test_the_course_freezes_each_steps_points_into_its_check_cell(config):
    # solutions/mha.ipynb is the course notebook (a test keeps it up to date with nbgrader_course.py)
    notebook = json.loads((SOLUTIONS / "mha.ipynb").read_text())
    cells = {c["id"]: c for c in notebook["cells"]}
    for step in config.steps:
        cell = cells[f"check-{step.id}"]
        assert f"points={step.points!r}" in "".join(cell["source"])
        assert cell["metadata"]["nbgrader"]["points"] == step.points


def test_a_diagnosis_only_hidden_checks_give_stays_out_of_the_cell(submission, config):
    from autograder.engine.checks import messages
    from autograder.engine.judge.runner import grade
    from planted import PLANTED

    mistake = next(p for p in PLANTED if p.name == "causal_ignores_device")  # caught by a hidden check only
    path = submission(mistake)
    said = messages.render("diagnosis.causal_ignores_device")
    full = grade(path, config, reference=SOLUTIONS, seed=3, steps=["masking"]).step("masking")
    assert said in [d["message"] for d in full.diagnoses]  # the grader finds it ...
    out = step_report(grade(path, config, reference=SOLUTIONS, seed=3, steps=["masking"]), config, "masking")
    points, max_points = map(float, re.search(r"hidden checks: \d+, ([0-9.]+)/([0-9.]+) points", out).groups())
    assert points < max_points, out  # ... from a hidden check's failure ...
    assert said not in out, out  # ... and the cell, which students read, does not describe it


def test_a_step_gone_from_grading_yml_scores_zero_and_says_to_regenerate(tmp_path, monkeypatch, capsys):
    from autograder.engine.course import config as grading_config
    from conftest import KIT

    text = (KIT / "grading.yml").read_text()
    entry = "      - id: embedding\n        title: Token embedding with a padding row\n        points: 5\n"
    assert entry in text
    (tmp_path / "grading.yml").write_text(text.replace(entry, ""))
    monkeypatch.setattr(grading_config, "default_path", lambda: tmp_path / "grading.yml")
    assert check_step("embedding", directory=str(SOLUTIONS), points=5) == 0.0  # the course's cell, made before
    out = capsys.readouterr().out
    assert "no such step any more" in out and "python -m autograder nbgrader" in out, out


class FakeKernelShell:
    kernel = object()  # what Jupyter's and Colab's shells have, a terminal's does not


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_the_pictures_of_failing_public_checks_show_in_the_notebook(submission, config, monkeypatch, capsys, tmp_path):
    import IPython
    import IPython.display

    from autograder.engine.judge.runner import grade
    from autograder.publish.plots import pictures_for

    mistake = next(m for m in planted_of("masking") if m.id == "mask_inverted_where")
    path = submission(mistake)
    every = grade(path, config, reference=SOLUTIONS, seed=3, steps=["masking"], pictures=pictures_for(tmp_path))
    public = {c.id for c in step_modules("mha")["masking"].CHECKS if c.visibility == "public"}
    drawn = {p.rsplit("/", 1)[-1] for p in every.step("masking").pictures}
    expected = {name for name in drawn if name.removeprefix("masking-").removesuffix(".png") in public}
    assert expected and drawn - expected  # public checks' pictures, and hidden ones' the cell must leave out
    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: FakeKernelShell())
    monkeypatch.setattr(IPython.display, "display", lambda image: shown.append(image))
    check_step("masking", directory=str(path), seed=3)
    out = capsys.readouterr().out
    assert all(isinstance(image, IPython.display.Image) for image in shown)
    assert all(image.data.startswith(b"\x89PNG\r\n\x1a\n") for image in shown)  # read in when shown
    assert {image.filename.rsplit("/", 1)[-1] for image in shown} == expected
    assert "a picture of your attention weights" not in out  # shown, not named


def test_outside_a_notebook_the_table_names_the_pictures(submission, capsys):
    import os

    mistake = next(m for m in planted_of("attention") if m.id == "no_scale")
    check_step("attention", directory=str(submission(mistake)), seed=3)
    out = capsys.readouterr().out
    named = re.findall(r"the expected ones: (\S+\.png)", out)
    assert named and all(os.path.isfile(path) for path in named), out
