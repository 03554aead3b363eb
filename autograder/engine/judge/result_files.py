"""A grading result's files: its JSON written whole or not at all, and read back
(results.from_json)."""

import json
import os
import secrets
from pathlib import Path

from autograder.engine.judge.results import from_json


def load_result(path):
    """A GradeResult read back from its JSON file (from_json)."""
    return from_json(json.loads(Path(path).read_text(encoding="utf-8")))


class WriteError(OSError):
    """A result file could not be written (a full disk, no permission, ...): `path` names it.
    Nothing half-written is left under its name (write_atomically)."""

    def __init__(self, path, error: OSError):
        super().__init__(error.errno, error.strerror or str(error), str(path))
        self.path = Path(path)

    def __str__(self):
        return f"cannot write {self.path}: {self.strerror}"


def write_atomically(path, data, sync: bool = True) -> None:
    """Write `data` (str: UTF-8 text, or bytes) to `path` whole or not at all: into a hidden
    temporary file beside it (a name no `*.json` or `*.csv` glob sees), flushed to disk where
    `sync`, then renamed over `path` (atomic on POSIX: a reader sees the old file or the new,
    never part of one; two writers leave one of the two whole). On any OSError the temporary
    file is removed and WriteError raised."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "wb") as f:
            f.write(payload)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(temporary, path)
        if sync:  # the rename itself survives a crash only once the directory is on disk too
            directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
    except OSError as error:
        try:
            temporary.unlink()
        except OSError:
            pass
        raise WriteError(path, error) from None


def remove_stale_temporaries(directory) -> None:
    """Remove the temporary files a killed writer left in `directory` (write_atomically's
    names); call it only where no other writer can be at work (under the batch's lock)."""
    for stale in Path(directory).glob(".*.tmp"):
        try:
            stale.unlink()
        except OSError:
            pass


def write_json(result, path, sync: bool = True, extra: dict = None):
    """The result's JSON (GradeResult.to_json, with `extra`'s keys added), written atomically
    (write_atomically)."""
    write_atomically(path, json.dumps({**result.to_json(), **(extra or {})}, indent=2) + "\n", sync=sync)
