"""What a student release's checks read in place of their inputs and oracles: the values the
instructor's kit computed when it wrote the release (engine/generate/answers_build.py), stored in
the release's answers.wire (harness/answers.py). The release's checks modules say so themselves:

    class AgainstTorch(Check):
        inputs = stored.inputs        # the check's fixed public inputs
        expected = stored.expected    # what a right solution observes on them

A public check's inputs are fixed (its own seed), so its expectation is one value; the smallest
failing example may try smaller inputs (engine/judge/shrink.py), whose expectations are stored
for the inputs the known mistakes lead the search to. Any other input has none (NotStored): the
search passes it over, as it passes over an input the oracle cannot take. Nothing here computes
an answer: it looks one up.
"""

import copy
import hashlib

from autograder.harness import answers
from autograder.sandbox import wire

IGNORED = ("mode",)  # added by the runner (a cuda check's device mode), not the check's inputs


class NotStored(LookupError):
    """No stored value for these inputs."""


def key_of(check) -> str:
    """The answers key of a check (a probe by its diagnosis)."""
    return f"check::{check.step}::{check.id or 'probe:' + str(check.diagnosis)}"


def digest(inputs: dict) -> str:
    """A digest of a check's inputs (their dtypes, shapes and bytes; numbers, lists, names)."""
    kept = {name: value for name, value in inputs.items() if name not in IGNORED}
    return hashlib.sha256(wire.dumps(kept)).hexdigest()[:32]


def _entry(check) -> dict:
    stored = answers.load(check.assignment)
    entry = None if stored is None else stored.get(key_of(check))
    if not isinstance(entry, dict):
        raise NotStored(f"{check!r}: nothing stored")
    return entry


def inputs(check, rng=None) -> dict:
    """The check's stored inputs (a copy: checks may not change what they are given)."""
    return copy.deepcopy(_entry(check)["inputs"])


def expected(check, **given):
    """The stored expectation of the check on `given` (its own inputs, or a smaller input the
    smallest-example search may try); NotStored for any other."""
    entry = _entry(check)
    wanted = digest(given)
    if wanted == entry.get("digest"):
        return copy.deepcopy(entry["expected"])
    bank = _bank(check)
    if wanted in bank:
        return copy.deepcopy(bank[wanted])
    raise NotStored(f"{check!r}: no stored expectation for these inputs")


_banks = {}


def _bank(check) -> dict:
    """{inputs digest: expectation} of the smaller inputs stored for the check (in chunks
    "<key>#bank<n>", each a list of [digest, expectation], within the wire's bounds)."""
    key = (check.assignment, key_of(check))
    if key not in _banks:
        stored, bank = answers.load(check.assignment) or {}, {}
        for number in range(10_000):
            chunk = stored.get(f"{key[1]}#bank{number}")
            if not isinstance(chunk, list):
                break
            bank.update((seen, value) for seen, value in chunk)
        _banks[key] = bank
    return _banks[key]
