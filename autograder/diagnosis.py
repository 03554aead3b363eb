"""Explain a failing step: which known mistake, or which behaviour, produced the student's output.

Two sources of evidence, neither of which changes a score:

* Known mistakes (autograder/mistakes/<step>.py): the reference with one specific error planted is
  run on the inputs of every failing check; a mistake whose observations equal the student's on
  a failing check is reported. Needs the reference, so it runs where hidden checks run.
* Probes (Check subclasses with a `diagnosis` id): behavioural tests of the student's code that
  need no reference, e.g. "a projection receives no gradient". Where a probe and a mistake share
  an id, the probe decides: two mistakes can fail with the same output (the same device error,
  say) while a probe can still tell them apart.

When neither finds anything, the diagnosis says so and repeats the closest evidence.
"""
import atexit
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from . import messages
from .check import Fail, compare, judged
from .mistakes import mistakes_of
from .submission import Package

# Failures that say nothing about the computation: nothing to diagnose.
NOT_EVIDENCE = {"not_implemented", "not_checked", "missing_package", "missing_file", "syntax_error",
                "import_error", "forbidden_call", "forbidden_call_at", "forbidden_source", "tampering", "timeout",
                "worker_crashed", "worker_exited", "bad_worker_message", "unreadable_observation"}


@dataclass
class Record:
    """One check's run: what went in, what came out, and how it was judged."""

    check: object
    inputs: dict
    observation: object  # runner.Observation
    fail: Fail = None
    seed: int = None  # the seed the inputs were made from; None: they may differ between runs


def diagnose(module, records, observe, student, tol, reference=None):
    """[{"id", "message"}] for a step with failing checks ([] if none failed).

    `observe(check, package, inputs)` runs a check's student half on a package and returns an
    Observation; `student` is the student's package, or None when `observe` sends student code to
    a worker itself; `reference` the reference directory (or None: then only the probes run)."""
    failing = [r for r in records if r.fail is not None and r.fail.message_id not in NOT_EVIDENCE]
    if not failing:
        return []
    found = []
    for probe in getattr(module, "PROBES", []):
        inputs = probe.inputs(_generator(probe))
        observation = observe(probe, student, inputs)
        if observation.error is None:
            fail = judged(probe, inputs, observation.values, None, tol)
            if fail is not None and fail.message_id != "unreadable_observation":
                found.append(entry(probe.diagnosis, **fail.params))
    if reference is not None:
        probed = {probe.diagnosis for probe in getattr(module, "PROBES", [])}
        for mistake in mistakes_of(module.__name__.rsplit(".", 1)[-1]):
            if mistake.id in probed:  # a probe tells this one apart better than matching outputs
                continue
            package = mistake_package(reference, module.__name__.rsplit(".", 1)[-1], mistake)
            with _lock:  # mistake packages are shared by the threads of a batch
                matched = any(same_observation(r.observation, mistake_observation(observe, package, r), tol)
                              for r in failing)
            if matched:
                found.append(entry(mistake.id))
    if not found:
        evidence = next((r.fail for r in failing if r.observation.error is None), failing[0].fail)
        found.append(entry("no_known_mistake",
                           evidence=messages.render(evidence.message_id, **evidence.params)))
    return found


_mistake_observations = {}


def mistake_observation(observe, package, record):
    """What the mistake `package` (one of _packages, kept for the process) observes on the
    record's inputs: run once per check and seed, since every failing submission of a batch
    (one seed) asks the same question."""
    if record.seed is None:
        return observe(record.check, package, record.inputs)
    key = (id(package), record.check.step, record.check.id, record.seed, record.inputs.get("mode"))
    if key not in _mistake_observations:
        if len(_mistake_observations) > 20_000:  # many seeds in one process (the kit's tests)
            _mistake_observations.clear()
        _mistake_observations[key] = observe(record.check, package, record.inputs)
    return _mistake_observations[key]


def entry(diagnosis_id, **params):
    return {"id": diagnosis_id, "message": messages.render(f"diagnosis.{diagnosis_id}", **params)}


def same_observation(student, mistake, tol):
    """True if a mistake's observation reproduces the student's: equal values, or the same error."""
    if student.error is None and mistake.error is None:
        try:
            return compare(student.values, mistake.values, tol) is None
        except Exception:  # noqa: BLE001 - values the student's code made: unreadable is no match
            return False
    if student.error is not None and mistake.error is not None:
        return (student.error.message_id == mistake.error.message_id
                and student.error.message_id not in NOT_EVIDENCE
                and _without_where(student.error.params) == _without_where(mistake.error.params))
    return False


def _without_where(params):
    """Error parameters minus the file position, which differs between two packages."""
    return {key: value for key, value in params.items() if key != "where"}


def _generator(probe):
    import torch
    return torch.Generator().manual_seed(len(probe.diagnosis))


_packages = {}
_scratch = []
_lock = threading.RLock()


def mistake_package(reference, step_id, mistake):
    """The reference with `mistake` planted, as a package of its own (made once per process)."""
    key = (str(Path(reference).resolve()), step_id, mistake.id)
    with _lock:
        return _packages[key] if key in _packages else _make_mistake_package(key, reference, step_id, mistake)


def _make_mistake_package(key, reference, step_id, mistake):
    if not _scratch:
        _scratch.append(Path(tempfile.mkdtemp(prefix="mha-lab-mistakes-")))
        atexit.register(shutil.rmtree, _scratch[0], True)
    root = _scratch[0] / f"{step_id}-{mistake.id}"
    shutil.copytree(Path(reference) / "mha", root / "mha")
    target = root / "mha" / mistake.file
    target.write_text(mistake.apply(target.read_text(encoding="utf-8")), encoding="utf-8")
    _packages[key] = Package.load(root, name=f"mha_mistake_{step_id}_{mistake.id}")
    return _packages[key]
