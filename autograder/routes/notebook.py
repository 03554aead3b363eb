"""Grading inside a Jupyter notebook: the check cells of the course notebook call `check_step`.

    check_step("padding")               # a student's run: public checks, prints a table
    check_step("padding", hidden=True)  # nbgrader autograde: hidden checks too (instructor kit)
    check_step("padding", lang="ko")    # messages and table in Korean (default: MHA_LAB_LANG, the locale)

Each solution cell of the notebook writes one file of the student's package (`%%writefile`), so a
check cell grades exactly the files the other routes grade. The value returned is the step's
points as a float: nbgrader reads a check cell's last value as its partial credit.

nbgrader scores a cell that wrote anything to stderr as zero, so everything student code or
PyTorch writes there while grading (and every warning) is caught and shown on stdout instead.
"""
import contextlib
import dataclasses
import io
import os
import sys
import tempfile
import warnings
from pathlib import Path

from autograder import KIT

from autograder.engine import config as grading_config
from autograder.engine import messages
from autograder.engine.results import table
from autograder.engine.runner import grade

REFERENCE = KIT / "solutions"
OUTPUT_LIMIT = 2000  # characters of captured stderr shown back


def check_step(step_id: str, hidden: bool = False, directory=".", seed: int = None, assignment: str = None,
               lang: str = None, points: float = None) -> float:
    """Grade step `step_id` of `assignment` (default: the first in grading.yml) in `directory`,
    which holds its package; print the table (in `lang`), return the points.

    `points`: what the course notebook's check cell is worth (frozen when the course was made).
    nbgrader rejects a cell scoring above it, so a grading.yml edited since is scored out of
    `points`, with a note that the course needs regenerating."""
    with messages.speaking(lang):
        return _check_step(step_id, hidden, directory, seed, assignment, points)


def _check_step(step_id, hidden, directory, seed, assignment, points):
    config = grading_config.load(assignment=assignment)
    reference = None
    if hidden:
        if not (REFERENCE / config.package).is_dir():
            raise RuntimeError(messages.render("no_reference", path=str(REFERENCE)))
        reference = REFERENCE
    with captured_stderr() as stderr:
        result = grade(Path(directory), config, reference=reference, seed=seed, steps=[step_id])
    step = result.step(step_id)
    view, summary = public_view(result, step_id)
    print(table(view, title=f"{step.id}: {config.step(step_id).title}"))
    if summary:
        print(summary)
    if stderr.text:
        print("\n" + messages.render("notebook_stderr") + "\n" + stderr.text[:OUTPUT_LIMIT])
    score = min(max(step.score, 0.0), step.max_score)
    if points is not None and points != config.step(step_id).points:
        print("\n" + messages.render("course_points_changed", step=step_id, live=config.step(step_id).points,
                                     frozen=points))
        score = score / step.max_score * points if step.max_score else 0.0
    return round(score, 4)


def public_view(result, step_id):
    """(the result of step `step_id` without its hidden checks' lines, a one-line summary of them:
    count and points). nbgrader's feedback shows the check cell's output: hidden checks' names
    and messages would tell what they look at."""
    step = result.step(step_id)
    hidden = [c for c in step.checks if c.visibility != "public" and c.passed is not None]
    shown = dataclasses.replace(step, checks=[c for c in step.checks if c.visibility == "public"])
    view = dataclasses.replace(result, steps=[shown])
    if not hidden:
        return view, ""
    return view, messages.render("hidden_checks_summary", count=len(hidden), points=round(sum(c.points for c in hidden), 2),
                                 max_points=round(sum(c.max_points for c in hidden), 2))


class _Captured:
    text = ""


@contextlib.contextmanager
def captured_stderr():
    """Send what is written to stderr (Python's sys.stderr, file descriptor 2 for C++ code, and
    warnings) to a buffer; `.text` holds it afterwards."""
    captured = _Captured()
    buffer = io.StringIO()
    with tempfile.TemporaryFile(mode="w+b") as fd_sink, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sys.stderr.flush()
        saved_fd = os.dup(2)
        os.dup2(fd_sink.fileno(), 2)
        try:
            with contextlib.redirect_stderr(buffer):
                yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            fd_sink.seek(0)
            native = fd_sink.read().decode("utf-8", errors="replace")
        lines = [f"{w.category.__name__}: {w.message}" for w in caught]
        captured.text = "\n".join(part for part in (buffer.getvalue(), native, *lines) if part.strip())
