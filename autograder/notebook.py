"""Grading inside a Jupyter notebook: the check cells of the course notebook call `check_step`.

    check_step("padding")               # a student's run: public checks, prints a table
    check_step("padding", hidden=True)  # nbgrader autograde: hidden checks too (instructor kit)

Each solution cell of the notebook writes one file of the `mha/` package (`%%writefile`), so a
check cell grades exactly the files the other routes grade. The value returned is the step's
points as a float: nbgrader reads a check cell's last value as its partial credit.

nbgrader scores a cell that wrote anything to stderr as zero, so everything student code or
PyTorch writes there while grading (and every warning) is caught and shown on stdout instead.
"""
import contextlib
import io
import os
import sys
import tempfile
import warnings
from pathlib import Path

from . import config as grading_config
from . import messages
from .checks import step_modules
from .results import table
from .runner import grade

REFERENCE = Path(__file__).resolve().parent.parent / "solutions"
OUTPUT_LIMIT = 2000  # characters of captured stderr shown back


def check_step(step_id, hidden=False, directory=".", seed=None):
    """Grade step `step_id` of the `mha/` package in `directory`; print the table, return points."""
    config = grading_config.load(known_steps=step_modules())
    reference = None
    if hidden:
        if not (REFERENCE / "mha").is_dir():
            raise RuntimeError(messages.render("no_reference", path=str(REFERENCE)))
        reference = REFERENCE
    with captured_stderr() as stderr:
        result = grade(Path(directory), config, reference=reference, seed=seed, steps=[step_id])
    step = result.step(step_id)
    print(table(result, title=f"{step.id}: {config.step(step_id).title}"))
    if stderr.text:
        print("\n" + messages.render("notebook_stderr") + "\n" + stderr.text[:OUTPUT_LIMIT])
    return round(min(max(step.score, 0.0), step.max_score), 4)


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
