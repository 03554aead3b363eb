"""The same submission gets the same grade in repeated runs, on every route (issue 22, item 5).

The hidden checks draw their sizes from the grading seed. Left to chance, a seed decides whether
a mistake shows (softmax over the queries lost masking points on 1 seed in 5), so a grade was a
lottery. Without --seed, every route grades with plan.default_seed: fixed by grading.yml and
the assignment id.
"""

import json

import pytest

from autograder.engine.course import config as grading_config
from autograder.engine.judge.plan import default_seed
from autograder.routes.nbgrader_cell import check_step
from conftest import replace_once
from planted import PLANTED
from test_cli import run

SOFTMAX_WRONG_DIM = next(p for p in PLANTED if p.name == "softmax_wrong_dim")


def without_timing(data):
    """A JSON result minus what may differ between two runs of the same grade: the time taken."""
    return {key: value for key, value in data.items() if key != "duration_s"}


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_the_cli_without_seed_grades_the_same_twice(submission, tmp_path):
    root = submission(SOFTMAX_WRONG_DIM)
    results = []
    for name in ("first.json", "second.json"):
        completed = run("grade", root, "--assignment", "mha", "--json", tmp_path / name)
        assert completed.returncode == 0, completed.stderr
        results.append(json.loads((tmp_path / name).read_text()))
    first, second = results
    assert first["seed"] == second["seed"] == default_seed(grading_config.load(assignment="mha"))
    assert without_timing(first) == without_timing(second)


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_the_notebook_route_grades_public_checks_as_the_cli_does(submission, tmp_path, capsys):
    """A notebook's check cell (routes/nbgrader_cell.check_step, public checks: its hidden ones
    are the sandboxed judge's, tests/test_nbgrader.py) twice: the checks draw the same sizes (the
    student's code prints the ones it gets) and give the same points, the points the command
    line's public checks give."""
    root = submission(SOFTMAX_WRONG_DIM)
    source = (root / "mha" / "attention.py").read_text()
    printing = replace_once(
        source,
        "weights = torch.softmax(scores, dim=-2)",
        'print("sizes", tuple(q.shape), tuple(v.shape))\n    weights = torch.softmax(scores, dim=-2)',
    )
    (root / "mha" / "attention.py").write_text(printing)
    runs = []
    for _ in range(2):
        points = check_step("attention", directory=str(root), assignment="mha")
        printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("sizes")]
        runs.append((points, printed))
    assert len(runs[0][1]) > 5, runs  # the public checks' calls
    assert runs[0] == runs[1]
    completed = run("grade", root, "--assignment", "mha", "--public-only", "--json", tmp_path / "cli.json")
    assert completed.returncode == 0, completed.stderr
    cli = json.loads((tmp_path / "cli.json").read_text())
    assert runs[0][0] == round(next(s["score"] for s in cli["steps"] if s["id"] == "attention"), 4)
