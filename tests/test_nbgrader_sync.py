"""The sync's pieces (autograder/routes/cli/nbgrader_sync.py, nbgrader_gradebook.py): what of a
submitted notebook is graded, and what a check cell's own result is compared with. The whole
command runs on a real course in tests/test_nbgrader.py."""

import json
import os

import pytest

from autograder.engine.scan.submission import NOTEBOOK_LIMIT, notebook_files
from autograder.routes.cli.nbgrader_sync import as_autograded
from conftest import SOLUTIONS

if not os.environ.get("MHA_LAB_CI"):  # CI installs the instructor extra: never skip there
    pytest.importorskip("nbgrader", reason="pip install -e .[instructor]")

SETUP = "import os\nos.makedirs('mha', exist_ok=True)\nfrom autograder.routes.nbgrader_cell import check_step"
KEPT = {
    "setup": (SETUP, True),
    "check_padding": ("check_step('padding', points=10.0)", True),
    "file_padding": ("%%writefile mha/padding.py\nTODO\n", False),
}


def cell(source, grade_id=None, **nbgrader):
    meta = {"nbgrader": {"grade_id": grade_id, **nbgrader}} if grade_id else {}
    return {"cell_type": "code", "source": source, "metadata": meta, "outputs": [], "execution_count": None}


def notebook(*cells):
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_locked_cells_take_the_gradebooks_source_and_the_rest_stays_the_students(tmp_path):
    """A writefile smuggled into the locked setup cell is undone, as nbgrader's OverwriteCells
    undoes it; the student's own cells, and a cell whose nbgrader metadata they removed, stay."""
    path = tmp_path / "mha.ipynb"
    smuggled = "%%writefile mha/padding.py\ndef pad_batch(): return 'from the locked cell'\n"
    path.write_text(
        json.dumps(
            notebook(
                cell(smuggled, "setup", locked=True),
                cell("%%writefile mha/padding.py\ndef pad_batch(): return 'mine'\n", "file_padding", solution=True),
                cell("%%writefile mha/masking.py\nX = 1\n"),
                cell("check_step = lambda *a, **k: None", "check_padding", locked=True),
            )
        )
    )
    graded, why = as_autograded(path, KEPT)
    assert why == ""
    assert graded["cells"][0]["source"] == SETUP and graded["cells"][3]["source"] == KEPT["check_padding"][0]
    assert notebook_files(graded, "mha") == {
        "padding.py": "def pad_batch(): return 'mine'\n",
        "masking.py": "X = 1\n",
    }


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda p: p.write_bytes(b"\x00\xff not json"), "not a readable notebook"),
        (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "not a readable notebook"),
        (lambda p: p.write_text(json.dumps({"cells": "all of them"})), "not a notebook"),
        (lambda p: p.write_text(json.dumps([1, 2])), "not a notebook"),
        (lambda p: p.symlink_to(SOLUTIONS.parent / "solutions" / "mha.ipynb"), "a link"),
        (lambda p: p.mkdir(), "no notebook"),
        (lambda p: None, "no notebook"),
        (lambda p: p.write_bytes(b" " * (NOTEBOOK_LIMIT + 1)), "larger than"),
    ],
    ids=["binary", "nested", "cells-not-a-list", "a-list", "link-to-the-solutions", "folder", "missing", "huge"],
)
def test_what_is_not_a_notebook_is_graded_as_nothing_and_says_why(tmp_path, make, why):
    path = tmp_path / "mha.ipynb"
    make(path)
    graded, reason = as_autograded(path, KEPT)
    assert graded is None and why in reason


def test_odd_cells_and_metadata_are_read_not_trusted(tmp_path):
    """Cells that are not objects, metadata of the wrong types, a grade id that is not a string:
    skipped or left as the student's, never a crash."""
    path = tmp_path / "mha.ipynb"
    path.write_text(
        json.dumps(
            notebook(
                "a string",
                {"cell_type": "code", "source": ["%%writefile mha/padding.py\n", "A = 1\n"], "metadata": []},
                {"cell_type": "code", "source": "x", "metadata": {"nbgrader": []}},
                {"cell_type": "code", "source": "y", "metadata": {"nbgrader": {"grade_id": ["setup"]}}},
                cell("%%writefile mha/padding.py\nB = 2\n", "setup", locked=False),  # locked in the gradebook
            )
        )
    )
    graded, why = as_autograded(path, KEPT)
    assert why == "" and len(graded["cells"]) == 4
    assert notebook_files(graded, "mha") == {"padding.py": "A = 1\n"}


@pytest.mark.slow  # grades planted mistakes twice each: tens of seconds; CI runs it (pytest -m "")
@pytest.mark.parametrize("name", ["no_scale", "mask_fill_zero", "causal_ignores_device", "softmax_wrong_dim", None])
def test_the_public_share_of_a_judged_step_is_what_the_check_cell_gives(submission, config, name):
    """An honest notebook is never flagged: what the judge's result says the public checks give
    (nbgrader_gradebook.public_points) is what the check cell's public-only run returns, for
    right code and planted mistakes, all-or-nothing steps included."""
    from autograder.engine.judge.runner import grade
    from autograder.publish.nbgrader_gradebook import public_points
    from autograder.routes.nbgrader_cell import check_step
    from planted import PLANTED

    mistake = next((p for p in PLANTED if p.name == name), None)
    path = submission(mistake)
    steps = [mistake.step] if mistake else ["padding", "attention"]
    judged = grade(path, config, reference=SOLUTIONS, seed=5, steps=steps)
    for step in steps:
        points = config.step(step).points
        assert public_points(judged.step(step), config, points) == check_step(step, directory=str(path), points=points)


def test_autograde_runs_nbgraders_own_stages_with_the_kits_in_their_places():
    """The course's autograde pipeline (nbgrader_course.AUTOGRADE, names) is nbgrader's own
    default, in its order, with its Execute replaced by the confined one, InertOutputs right
    after it, and JudgedScores right after SaveAutoGrades: an nbgrader that changes its stages
    fails here, not silently in a course."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute, SaveAutoGrades
    from traitlets.utils.importstring import import_item

    from autograder.publish.nbgrader_course import AUTOGRADE
    from autograder.routes.nbgrader_gradebook import JudgedScores
    from autograder.routes.nbgrader_kernel import ConfinedExecute, InertOutputs

    stages = [import_item(name) for name in AUTOGRADE]
    assert stages[:2] == [ConfinedExecute, InertOutputs] and issubclass(ConfinedExecute, Execute)
    assert stages[stages.index(SaveAutoGrades) + 1] is JudgedScores
    nbgraders = [
        Execute if stage is ConfinedExecute else stage for stage in stages if stage not in (InertOutputs, JudgedScores)
    ]
    assert nbgraders == list(Autograde.autograde_preprocessors.default())
