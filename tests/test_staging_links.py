"""Staging never follows a link the student made: mha.ipynb as a symlink to a solved notebook
elsewhere is not graded."""

from autograder.engine.judge.runner import grade
from conftest import SOLUTIONS


def test_a_notebook_symlink_to_a_solved_notebook_is_not_graded(tmp_path, config):
    for layout in ("mha.ipynb", "mha/mha.ipynb"):
        root = tmp_path / layout.replace("/", "_")
        (root / layout).parent.mkdir(parents=True, exist_ok=True)
        (root / layout).symlink_to(SOLUTIONS / "mha.ipynb")
        result = grade(root, config, steps=["padding"])
        assert result.score == 0, layout
