"""The reference scores full marks; the untouched skeleton scores zero in every step."""

import pytest

from autograder.engine.judge.runner import grade
from conftest import ASSIGNMENTS, SOLUTIONS, full_marks, grade_with_hidden


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_reference_scores_full_marks_with_hidden_checks(config, seed):
    result = grade_with_hidden(SOLUTIONS, config, seed=seed)
    assert full_marks(result) == []
    assert result.score == pytest.approx(result.max_score)
    assert result.max_score == pytest.approx(100)  # the cuda step is graded here too (simulated)


def test_reference_scores_full_marks_on_public_checks(config):
    result = grade(SOLUTIONS, config)
    assert full_marks(result) == []
    assert all(c.visibility == "public" for step in result.steps for c in step.checks)


def test_skeleton_scores_zero_in_every_step_and_says_not_implemented(config):
    result = grade_with_hidden(ASSIGNMENTS, config)
    for step in result.steps:
        assert step.score == 0, step.id
        assert step.status == "not_implemented", (step.id, [c.message for c in step.checks])
        assert all(c.message.startswith("not implemented yet") for c in step.checks)
