"""What a student release stores instead of computing it: the public checks' inputs and expected
observations, the earlier steps' results on their probes, and the expected values of the
smaller inputs that the smallest-example search may try. The instructor's kit computes them
(engine/generate/answers_build.py, at `release`); the release holds no code that could.

    stored = load("mha")                      # {key: value}, or None in the instructor's kit
    stored["probe::split_heads"]              # the written-out split_heads on its probe

The file, autograder/assignments/<id>/answers.wire, is a header line and then one message of
sandbox/wire.py per entry, each {"key": str, "value": ...} behind its 8-byte length: decoded
without running code (no pickle), each message within the wire's own bounds.
"""

import struct
import threading
from pathlib import Path

from autograder.sandbox import wire

FILE = "answers.wire"
MAGIC = b"mha-lab answers 1\n"
ASSIGNMENTS = Path(__file__).resolve().parents[1] / "assignments"

_loaded = {}
_lock = threading.Lock()


class AnswersError(Exception):
    """The stored answers are malformed."""


def path_of(assignment: str) -> Path:
    return ASSIGNMENTS / assignment / FILE


def dumps(entries: dict) -> bytes:
    """The file's bytes for {key: value}."""
    chunks = [MAGIC]
    for key, value in entries.items():
        message = wire.dumps({"key": key, "value": value})
        chunks.append(struct.pack("!Q", len(message)) + message)
    return b"".join(chunks)


def loads(data: bytes) -> dict:
    """{key: value} of the file's bytes; AnswersError if they are malformed."""
    if not data.startswith(MAGIC):
        raise AnswersError("not a stored-answers file")
    entries, position = {}, len(MAGIC)
    while position < len(data):
        if position + 8 > len(data):
            raise AnswersError("cut short")
        (size,) = struct.unpack("!Q", data[position : position + 8])
        position += 8
        try:
            entry = wire.loads(data[position : position + size])
        except wire.WireError as error:
            raise AnswersError(str(error)) from None
        position += size
        if not (isinstance(entry, dict) and isinstance(entry.get("key"), str)):
            raise AnswersError("an entry without a key")
        entries[entry["key"]] = entry.get("value")
    return entries


def load(assignment: str):
    """The assignment's stored answers ({key: value}, read once per process), or None where it
    has none (the instructor's kit computes them)."""
    with _lock:
        if assignment not in _loaded:
            path = path_of(assignment)
            _loaded[assignment] = loads(path.read_bytes()) if path.is_file() else None
        return _loaded[assignment]
