"""One writer at a time per `grade --out` folder: its lock file (out/batch/lock, an flock released
however the holder ends), held by a batch and by `adjust`.

    with holding(out):
        ...  # no other run writes to `out` meanwhile
"""

import contextlib
import fcntl
import os
from pathlib import Path

from autograder.engine.judge.result_files import WriteError
from autograder.engine.operations.shard import LOCK


class BatchBusy(RuntimeError):
    """Another `grade --out` run holds the same directory's lock (exit code 1)."""


@contextlib.contextmanager
def holding(out):
    """Hold `out`'s lock (BatchBusy if another process holds it)."""
    lock = hold(Path(out) / LOCK)
    try:
        yield
    finally:
        os.close(lock)


def hold(path: Path) -> int:
    """Hold `path`'s lock (flock: released however this process ends); BatchBusy if another
    process holds it, WriteError if it cannot be made."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise WriteError(path, error) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise BatchBusy(
            f"another `grade` is writing to {path.parent.parent} now (its lock: {path}); "
            "wait for it to finish, or use another --out"
        ) from None
    return fd
