"""Grading inside a Jupyter notebook: the check cells of the course notebook call `check_step`.

    check_step("padding")               # public checks, prints a table, returns the points
    check_step("padding", lang="ko")    # messages and table in Korean (default: MHA_LAB_LANG, the locale)
    check_step("padding", verbose=True) # every failing check's full message under the step's verdict

What a check cell says is feedback: it runs in the student's kernel, on the public checks only,
and says so. The hidden checks and the reference never load there (not even at nbgrader
autograde): the grade of record is the sandboxed judge's, which routes/cli/nbgrader_sync.py writes
into nbgrader's gradebook, and step_report (publish/check_cell.py) is what that judge's verdict looks like in the cell.

Each solution cell of the notebook writes one file of the student's package (`%%writefile`), so a
check cell grades exactly the files the other routes grade. The value returned is the step's
points as a float: nbgrader reads a check cell's last value as its partial credit.

nbgrader scores a cell that wrote anything to stderr as zero, so everything student code or
PyTorch writes there while grading (and every warning) is caught and shown on stdout instead.

Where a public check of attention fails, the picture of the student's weights next to the expected
ones (publish/plots.py) shows under the table, in the notebook itself (IPython's display); outside a
notebook kernel the table names the file.
"""

import contextlib
import io
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from autograder.engine.checks import messages
from autograder.engine.course import config as grading_config
from autograder.engine.judge.runner import grade
from autograder.publish.check_cell import frozen_score, step_report

OUTPUT_LIMIT = 2000  # characters of captured stderr shown back


def check_step(
    step_id: str,
    directory=".",
    seed: int = None,
    assignment: str = None,
    lang: str = None,
    points: float = None,
    verbose: bool = False,
) -> float:
    """Grade step `step_id` of `assignment` (default: the first in grading.yml) in `directory`,
    which holds its package; print the table (in `lang`; with `verbose`, every failing check's
    full message too), return the points.

    `points`: what the course notebook's check cell is worth (frozen when the course was made).
    nbgrader rejects a cell scoring above it, so a grading.yml edited since is scored out of
    `points`, with a note that the course needs regenerating."""
    with messages.speaking(lang):
        return _check_step(step_id, directory, seed, assignment, points, verbose)


def _check_step(step_id, directory, seed, assignment, points, verbose=False):
    config = grading_config.load(assignment=assignment)
    if step_id not in {step.id for step in config.steps}:  # grading.yml changed since the course was made
        print(messages.render("course_step_missing", step=step_id, assignment=config.id))
        return 0.0
    display = inline_display()
    folder, keep = Path(tempfile.mkdtemp(prefix="mha-lab-pictures-")), False
    try:
        with captured_stderr() as stderr:
            result = grade(
                Path(directory),
                config,
                reference=None,  # public checks only: the hidden ones are the sandboxed judge's
                seed=seed,
                steps=[step_id],
                pictures=public_pictures(folder),
            )
            step = result.step(step_id)
        print(messages.render("notebook_feedback_only"))
        print(step_report(result, config, step_id, verbose=verbose, pictures=display is None))
        if display is not None:
            for picture in step.pictures:
                display(picture)
        keep = display is None and bool(step.pictures)  # the table names them: they stay
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    if stderr.text:
        print("\n" + messages.render("notebook_stderr") + "\n" + stderr.text[:OUTPUT_LIMIT])
    score, note = frozen_score(step, config, points)
    if note:
        print("\n" + note)
    return score


def public_pictures(directory: Path):
    """The runner's `pictures` callable: publish/plots.py's pictures of the failing public checks
    only (a hidden check's picture would show its inputs), saved under `directory`."""
    from autograder.publish.plots import save_pictures  # late: not at the start of a notebook's check cell

    return lambda step_id, records: save_pictures(
        directory, step_id, [r for r in records if r.check.visibility == "public"]
    )


def inline_display():
    """`show(path)`: IPython's display of a PNG file, when this runs in a notebook kernel
    (Jupyter, Colab, nbgrader's autograde); None elsewhere (a terminal, a script, pytest)."""
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return None
    return lambda path: display(Image(filename=str(path)))


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
