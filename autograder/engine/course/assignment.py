"""Find an assignment's parts by its id: the engine names no assignment and no step.

An assignment is a folder `autograder/assignments/<id>/`:

    checks/<step>.py     one module per step id: its Check classes (public, hidden, probes), FILES
                         (INTEGRATES = True on a step that runs the whole module)
    checks/_<name>.py    helpers that several steps' checks share (public; never imported step to step)
    observers/<step>.py  the functions that run student code, one per kind of observation (the
                         worker loads these, warmup.py and written_out.py, nothing else of it)
    mistakes/<step>.py   instructor-only: MISTAKES, known errors as knob settings of mistakes/model.py
    mistakes/model.py    `package(**knobs)`: the assignment computed once more, one knob per mistake
    written_out.py       instructor-only: WRITTEN_OUT, the earlier steps' functions written out for the
                         integration steps (harness/earlier.py: one mistake, one charge)
    warmup.py            optional `warm_up(simulation)`: ops to run once in the worker server
    fingerprints.json    what the known mistakes observe on the public checks (the release's diagnosis)
    locale/              its messages (diagnoses, its checks' and observers' own), en and ko
    __init__.py          what the engine reads of it by name: CONTRACT_FAILURES (the ways its
                         observers report a missed contract), NOT_EVIDENCE (its checks' failures
                         that say nothing about the computation); both optional

plus its reference package `solutions/<id>/` (the skeleton `assignments/<id>/` is made from it)
and an entry in grading.yml. Students' code is the package `<id>`.
"""

import functools
import importlib
import importlib.util
import inspect
import pkgutil
from dataclasses import dataclass

# The engine's callers find an assignment's folder and step ids here too; messages.py reads
# folders.py itself, since the checks loaded here import it.
from autograder.engine.checks.folders import PACKAGE, folder, known, step_ids  # noqa: F401

_step_modules = {}  # assignment id -> {step id: module}; a cache of code that never changes


@functools.cache
def contract_failures(assignment_id: "str | None") -> frozenset:
    """The message ids with which the assignment's observers report a missed contract
    (its CONTRACT_FAILURES), besides the engine's own (judge/observation.py); none for None
    (a check made outside an assignment)."""
    return _declared(assignment_id, "CONTRACT_FAILURES")


@functools.cache
def not_evidence(assignment_id: "str | None") -> frozenset:
    """The message ids of the assignment's checks' failures that say nothing about the computation
    (its NOT_EVIDENCE), besides the engine's own (mistakes/evidence.py); none for None."""
    return _declared(assignment_id, "NOT_EVIDENCE")


@functools.cache
def every_contract_failure() -> frozenset:
    """The contract failures of every assignment the kit holds: a message id means one thing
    kit-wide (messages.CATALOGS merges the catalogs), so where only an id is known (a route's
    ranking of symptoms: judge/feedback.py) it is one of these or not."""
    return frozenset().union(*(contract_failures(assignment_id) for assignment_id in known()))


def _declared(assignment_id, name) -> frozenset:
    if assignment_id is None:
        return frozenset()
    return frozenset(getattr(importlib.import_module(f"{PACKAGE}.{assignment_id}"), name, ()))


def step_modules(assignment_id: str) -> dict:
    """step id -> its checks module (with .CHECKS, .PROBES, .FILES filled in)."""
    if assignment_id not in _step_modules:
        package = importlib.import_module(f"{PACKAGE}.{assignment_id}.checks")
        _step_modules[assignment_id] = {
            info.name: _load(assignment_id, info.name)
            for info in pkgutil.iter_modules(package.__path__)
            if not info.name.startswith("_")  # checks/_x.py: helpers that several steps' checks share
        }
    return _step_modules[assignment_id]


def _load(assignment_id, step_id):
    # Late: check.py imports torch, and grading.yml is validated (config.py) before torch loads.
    from autograder.engine.checks.check import Check  # late: keeps torch out until it runs

    module = importlib.import_module(f"{PACKAGE}.{assignment_id}.checks.{step_id}")
    checks, probes = [], []
    for value in vars(module).values():
        if not (inspect.isclass(value) and issubclass(value, Check) and value.__module__ == module.__name__):
            continue
        if value.diagnosis or value.id:
            check = value()
            check.step, check.assignment = step_id, assignment_id
            (probes if check.diagnosis else checks).append(check)
    observers = f"{PACKAGE}.{assignment_id}.observers."
    for check in checks + probes:  # the worker runs nothing else: a check must name one of these
        observer = type(check).observer
        if not (inspect.isfunction(observer) and observer.__module__.startswith(observers)):
            raise RuntimeError(
                f"{assignment_id} step {step_id}: {type(check).__name__} names no function of {observers}*"
            )
        if observer.__module__.rsplit(".", 1)[-1].startswith("_") or observer.__name__.startswith("_"):
            raise RuntimeError(f"{assignment_id} step {step_id}: {type(check).__name__}'s observer is a private helper")
    ids = [check.id for check in checks]
    duplicated = {i for i in ids if ids.count(i) > 1}
    if duplicated:
        raise RuntimeError(f"{assignment_id} step {step_id}: check ids used twice: {sorted(duplicated)}")
    module.CHECKS, module.PROBES = checks, probes
    module.FILES = getattr(module, "FILES", [])
    module.ASSIGNMENT = assignment_id
    return module


@dataclass(init=False)
class Mistake:
    """A known mistake: `id` (its diagnosis message is `diagnosis.<id>`) and its variants, each a
    dict of knobs of the assignment's mistakes/model.py. `also_breaks` names other steps it
    genuinely breaks as well (besides the steps that integrate everything). `says` gives a
    variant its own message, `diagnosis.<says>` (None: `diagnosis.<id>`), where the ways of making
    the mistake need different words (a softmax over the heads is not one over the queries); the
    diagnosis id stays `id`."""

    id: str
    variants: tuple
    also_breaks: tuple = ()
    says: tuple = ()  # per variant: its own message id (without `diagnosis.`), or None
    assignment: str = None  # set by mistakes_of

    def __init__(self, id: str, *variants: dict, also_breaks: tuple = (), says: tuple = ()):
        self.id, self.variants, self.also_breaks = id, tuple(variants), tuple(also_breaks)
        self.says = tuple(says) + (None,) * (len(self.variants) - len(says))
        self.assignment = None

    def message_id(self, variant: int) -> str:
        """The message id (without `diagnosis.`) that names variant number `variant`."""
        return self.says[variant] or self.id

    def packages(self) -> list:
        """One model package per variant (made once per process)."""
        key = self.assignment, self.id, repr(self.variants)
        if key not in _packages:
            model = importlib.import_module(f"{PACKAGE}.{self.assignment}.mistakes.model")
            _packages[key] = [model.package(**variant) for variant in self.variants]
        return _packages[key]


_packages = {}


def mistakes_of(assignment_id: str, step_id: str) -> list:
    """The step's MISTAKES ([] when the step has none, or the kit is a student release)."""
    name = f"{PACKAGE}.{assignment_id}.mistakes.{step_id}"
    try:
        if importlib.util.find_spec(name) is None:
            return []
    except ModuleNotFoundError:  # no mistakes/ package at all (a student release)
        return []
    mistakes = importlib.import_module(name).MISTAKES
    for mistake in mistakes:
        mistake.assignment = assignment_id
    return mistakes


def warm_up(assignment_id: str, simulation=None) -> None:
    """Run the assignment's warmup.warm_up(simulation), if it has one (in the worker server)."""
    name = f"{PACKAGE}.{assignment_id}.warmup"
    if importlib.util.find_spec(name) is not None:
        importlib.import_module(name).warm_up(simulation)
