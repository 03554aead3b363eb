"""The judge stage: a check's verdict from an observation. Runs no student code.

    expected = cached_expectation(check, inputs, reference, seed)   # the oracle, or the reference's
    fail = judge(check, inputs, observation, expected, tolerance)    # None: it passed

The expectation is the check's own oracle, or for a hidden check without one, what the reference
solution observes on the same inputs, computed once per check and seed for a whole batch.
"""

import threading
from pathlib import Path

from autograder.engine.checks.check import Check, Fail, judged
from autograder.engine.checks.earlier import forbidden_excused
from autograder.engine.judge.in_process import clone
from autograder.engine.judge.plan import check_seed
from autograder.harness.package import Package

BLOCKED_BY = "blocked_by"  # a Fail parameter: the id of the step whose mistake keeps this check from a verdict


def expectation(check, inputs, reference):
    """What a correct solution observes: the check's oracle, or for a hidden check without one,
    the reference's observation."""
    if check.visibility == "hidden" and type(check).expected is Check.expected:
        return check.observe(reference, **clone(inputs))
    return check.expected(**clone(inputs))


class ExpectationCache:
    """expectation(), computed once per check and seed: every submission of a batch shares it."""

    def __init__(self):
        self.made = {}
        self.lock = threading.Lock()

    def __call__(self, check, inputs, reference, seed):
        key = (check.assignment, check.step, check.id, check_seed(check, seed), id(reference), inputs.get("mode"))
        with self.lock:
            if key not in self.made:
                self.made[key] = expectation(check, inputs, reference)
            return self.made[key]


cached_expectation = ExpectationCache()


def charged_forbidden(observation, check=None) -> bool:
    """Whether the observation's forbidden calls cost its check: there are some, and they were not
    all made inside earlier steps' functions that their own steps charge (forbidden_excused)."""
    assignment = getattr(check, "assignment", None)
    return bool(observation.forbidden) and not forbidden_excused(observation.values, observation.forbidden, assignment)


def judge(check, inputs, observation, expected, tol, evidence=None):
    """None if the observation passes, else the Fail to report. Runs no student code.
    `evidence`: plan.source_evidence(), to name the line of a forbidden call."""
    if charged_forbidden(observation, check):
        call = observation.forbidden[0]
        if evidence and call in evidence:
            file, line = evidence[call]
            return Fail("forbidden_call_at", {"call": call, "step": check.step, "file": file, "line": line})
        return Fail("forbidden_call", {"call": call, "step": check.step})
    if observation.error is not None:
        return observation.error
    return judged(check, inputs, observation.values, expected, tol)


def not_checked(fail):
    """True for the judge's "not checked on this machine": a check that needs what the grading
    machine lacks (a GPU, or the simulated device a quick local run leaves out). It is the only
    outcome without a verdict, and it is the same for every submission graded there."""
    return fail is not None and fail.message_id == "not_checked"


def blocked(fail) -> bool:
    """True for a failure that says "this cannot be judged while step X's code is wrong" (a Fail
    with the parameter BLOCKED_BY = X). It scores nothing and stays in the step's maximum: a
    check never leaves the maximum because of what the student's code does."""
    return fail is not None and bool(fail.params.get(BLOCKED_BY))


_references = {}
_references_lock = threading.Lock()


def load_reference(directory, package):
    """The reference package under the name `<package>_reference`, loaded once per process."""
    key = Path(directory).resolve(), package
    with _references_lock:
        if key not in _references:
            _references.clear()
            _references[key] = Package.load(key[0], package, name=f"{package}_reference")
        return _references[key]
