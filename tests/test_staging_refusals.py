"""Staging refuses what it must not follow or read: a symbolic link, a pipe, a file too large.
The refused file's steps say why, naming the file; every other step is graded as usual."""

import os

import pytest

from autograder.engine.judge.runner import grade
from autograder.engine.scan.submission import SOURCE_LIMIT
from conftest import INTEGRATION_STEPS, SOLUTIONS, full_marks


def refusals(result, step_id):
    step = next(s for s in result.steps if s.id == step_id)
    return {c.message for c in step.checks if c.passed is False}


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "sandboxed"])
def test_a_symlinked_step_file_is_refused_not_followed(submission, config, isolate):
    path = submission()
    target = path / "mha" / "padding.py"
    target.unlink()
    target.symlink_to(SOLUTIONS / "mha" / "padding.py")  # someone else's (here: the reference) solution
    result = grade(path, config, seed=1, isolate=isolate)
    assert refusals(result, "padding") == {
        "mha/padding.py was not graded: it is a symbolic link (hand in the file itself)"
    }
    assert set(full_marks(result)) - INTEGRATION_STEPS == {"padding"}


def test_a_fifo_is_refused_and_does_not_hang_the_grader(submission, config):
    path = submission()
    target = path / "mha" / "heads.py"
    target.unlink()
    os.mkfifo(target)  # opening it for reading would wait for a writer for ever
    result = grade(path, config, seed=1, isolate=True)
    assert refusals(result, "split_heads") == {
        "mha/heads.py was not graded: it is not a regular file (a pipe, socket or device)"
    }
    assert set(full_marks(result)) - INTEGRATION_STEPS == {"split_heads"}


def test_a_file_over_the_size_cap_is_refused(submission, config):
    source = (SOLUTIONS / "mha" / "padding.py").read_text()
    path = submission(files={"padding.py": source + "#" * (SOURCE_LIMIT + 1) + "\n"})
    result = grade(path, config, seed=1, isolate=True)
    assert refusals(result, "padding") == {f"mha/padding.py was not graded: it is larger than {SOURCE_LIMIT} bytes"}
    assert set(full_marks(result)) - INTEGRATION_STEPS == {"padding"}
