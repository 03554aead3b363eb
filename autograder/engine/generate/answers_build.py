"""The answers a student release stores instead of computing them (harness/answers.py), computed
by the instructor's kit when it writes the release (publish/student_release.py):

* "probe::<function>": each earlier step's written-out function on its probe (harness/earlier.py),
  so that the release tells a wrong earlier function without holding a right one;
* "check::<step>::<check>": every public check's and probe's fixed inputs, their digest and
  its expected observations (its oracle's, which the release leaves out: stored_checks.py);
* "check::<step>::<check>#bank<n>": the expected observations of the smaller inputs that the
  smallest-example search tries for the known mistakes, by their inputs' digest, from the kit's
  generated examples.wire (examples_build.py; left out, with a warning, where it is stale).

Every value goes through the wire format and back unchanged, or the build stops: what the
release reads is what the kit computed. A build tool of the instructor's: grading only reads.
"""

import importlib
import pkgutil

import torch

from autograder.engine.checks import stored
from autograder.engine.course.assignment import PACKAGE
from autograder.engine.generate import examples_build
from autograder.engine.judge.in_process import clone
from autograder.engine.judge.plan import check_inputs, check_seed
from autograder.harness import answers
from autograder.harness.earlier import Table, expected_results
from autograder.sandbox import wire


def tables(assignment_id: str) -> list:
    """The earlier-function tables (harness.earlier.Table) the assignment's observers hold."""
    package = importlib.import_module(f"{PACKAGE}.{assignment_id}.observers")
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        found += [value for value in vars(module).values() if isinstance(value, Table) and value not in found]
    return found


def shipped_checks(config) -> list:
    """(step, check) of every check the release ships: public checks and probes, in order."""
    modules = config.step_modules()
    return [
        (step, check)
        for step in config.steps
        for check in [*modules[step.id].CHECKS, *modules[step.id].PROBES]
        if check.visibility == "public"
    ]


def build(config) -> dict:
    """{key: value} of everything the release of `config` (an Assignment) stores."""
    entries = {}
    for table in tables(config.id):
        for entry in table:
            results = expected_results(table, entry)
            if results is None:
                raise RuntimeError(f"{config.id}: no written-out version of {entry.name} to store its probe")
            entries[f"probe::{entry.name}"] = results
    for _, check in shipped_checks(config):
        inputs = check_inputs(check, check_seed(check))
        for name, value in inputs.items():
            if isinstance(value, torch.Tensor) and not value.is_contiguous():
                raise RuntimeError(f"{check!r}: input {name} is not contiguous (the stored copy would be)")
        entries[stored.key_of(check)] = {
            "inputs": inputs,
            "digest": stored.digest(inputs),
            "expected": check.expected(**clone(inputs)),
        }
    entries.update(examples_build.bank(config))
    for key, value in entries.items():
        if not same(value, wire.loads(wire.dumps(value))):
            raise RuntimeError(f"{config.id}: {key} does not go through the wire format unchanged")
    return entries


def same(a, b) -> bool:
    """Whether two values are equal in type, shape, dtype and bits (NaN equal to NaN)."""
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool(
                torch.equal(a.detach().cpu(), b)
                or (
                    a.is_floating_point()
                    and torch.equal(a.isnan(), b.isnan())
                    and bool(torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0)))
                )
            )
        )
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same, a, b))
    return a == b


def write(config, directory) -> None:
    """Write the answers file of `config` into `directory` (the release's assignment folder)."""
    (directory / answers.FILE).write_bytes(answers.dumps(build(config)))
