"""The notebook check cell: hidden checks only as a count and points (nbgrader's feedback shows
the cell's output), and the points frozen into the course when it was made."""
import json
import re


from autograder.engine.assignment import step_modules
from autograder.routes.notebook import check_step
from conftest import SOLUTIONS
from planted import planted_of


def test_hidden_checks_show_as_a_count_and_points(submission, capsys):
    mistake = next(m for m in planted_of("attention") if m.id == "no_scale")
    check_step("attention", hidden=True, directory=str(submission(mistake)), seed=3)
    out = capsys.readouterr().out
    hidden = {c.id for c in step_modules("mha")["attention"].CHECKS if c.visibility == "hidden"}
    public = {c.id for c in step_modules("mha")["attention"].CHECKS if c.visibility == "public"}
    failing = set(re.findall(r"x (\w+):", out))
    assert failing and failing <= public, out  # the public failures are named ...
    assert not failing & (hidden - public), out  # ... the hidden ones are not
    assert re.search(rf"hidden checks: {len(hidden)}, 0/[0-9.]+ points", out), out


def test_points_changed_since_the_course_was_made_are_scored_out_of_the_cells(capsys):
    score = check_step("padding", directory=str(SOLUTIONS), points=4)  # grading.yml gives 10
    assert score == 4.0  # nbgrader refuses a cell scoring above its points
    assert "regenerate the course" in capsys.readouterr().out


def test_the_course_freezes_each_steps_points_into_its_check_cell(config):
    # solutions/mha.ipynb is the course notebook (a test keeps it up to date with course.py)
    notebook = json.loads((SOLUTIONS / "mha.ipynb").read_text())
    cells = {c["id"]: c for c in notebook["cells"]}
    for step in config.steps:
        cell = cells[f"check-{step.id}"]
        assert f"points={step.points!r}" in "".join(cell["source"])
        assert cell["metadata"]["nbgrader"]["points"] == step.points
