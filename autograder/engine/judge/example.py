"""The smallest failing input of a step, for a student to read: the search (shrink.py) driven
from a public check, judged against the check's own oracle, and the Example it finds.

    example = first_example(records, observe, tol)   # None: nothing a student may be shown
    example.to_json()                                 # what the JSON result keeps

Only a public check that needs no device and takes inputs is searched (shrinkable); one search per
step, so that a failing run stays quick."""

import copy
from dataclasses import dataclass

import torch

from autograder.engine.checks import messages
from autograder.engine.checks.check import compare, judged
from autograder.engine.judge.shown_values import plain
from autograder.engine.judge.verdict import charged_forbidden
from autograder.engine.mistakes.evidence import says_nothing


@dataclass
class Example:
    """The smallest failing input of a public check (shrink.py), ready to show."""

    check: str  # the id of the check it shrank
    inputs: dict  # the shrunk inputs (tensors, numbers, lists)
    got: dict  # what the student's code gave on them (the parts that are wrong), or {}
    expected: dict  # what a correct solution gives on them (the same parts), or {} where none
    message: str  # the check's verdict on the shrunk inputs, in the student's language
    size_before: int  # shrink.size of the check's own inputs
    size_after: int  # shrink.size of `inputs`
    raised: str = None  # the type of the exception the code raised on them, if it raised

    def to_json(self) -> dict:
        return {
            "check": self.check,
            "inputs": plain(self.inputs),
            "got": plain(self.got),
            "expected": plain(self.expected),
            "message": self.message,
            **({"raised": self.raised} if self.raised else {}),
            "size_before": self.size_before,
            "size_after": self.size_after,
        }


def smallest_example(check, inputs, fail, run, tol, observation=None, **limits):
    """The Example of a public `check` whose `inputs` failed with `fail` (a Fail), or None.
    `observation`: what the student's code gave on `inputs` (the Observation judged), if at hand.

    `run(inputs) -> Observation` (values, error, forbidden) runs the student's half of the check on
    a candidate: in the student's own process (the pytest route) or in a worker. A candidate still
    fails when the check judges it against its own oracle (never a reference: public checks only)
    and the verdict is the same kind of failure: the same message id (and, for an exception, the
    same type). The check may declare `dims` (shrink.dimensions) or opt out with `shrink = False`."""
    from autograder.engine.judge.shrink import shrink  # late: not at the start of a notebook's check cell

    if check.visibility != "public" or not getattr(check, "shrink", True) or not inputs or fail is None:
        return None
    wanted = kind_of(fail)

    def verdict_on(candidate, observation):
        if observation is None or charged_forbidden(observation, check):
            return None
        try:  # a candidate the oracle cannot take (0 heads, say) shows nothing: rejected
            expected = check.expected(**copy.deepcopy(candidate))
        except Exception:  # noqa: BLE001 - the oracle's own limits, not the student's code
            return None
        if observation.error is not None:
            return observation.error
        return judged(check, candidate, observation.values, expected, tol)

    def fails(candidate, observation):
        return kind_of(verdict_on(candidate, observation)) == wanted

    def seeded(candidate):
        # A check in train() mode draws from the global CPU generator (the search shrinks CPU
        # checks only): seeded alone, since torch.manual_seed also queues a seed for every
        # device library, each with the text of the call's stack (milliseconds a candidate).
        torch.default_generator.manual_seed(0)
        return run(candidate)

    shrunk = shrink(inputs, seeded, fails, dims=getattr(check, "dims", None), observation=observation, **limits)
    if shrunk is None:
        return None
    found = verdict_on(shrunk.inputs, shrunk.observation)
    expected = check.expected(**copy.deepcopy(shrunk.inputs))
    raised = found.params.get("type") if found.message_id == "raised" else None
    if shrunk.observation.error is None:
        got, expected = differing(shrunk.observation.values, expected, found, tol)
    else:
        got, expected = {}, expected if isinstance(expected, dict) else {}
    return Example(
        check=check.id,
        inputs={name: value for name, value in shrunk.inputs.items() if name != "mode"},
        got=snapshot(got),
        expected=expected,
        message=messages.render(found.message_id, **found.params),
        raised=raised,
        size_before=shrunk.size_before,
        size_after=shrunk.size_after,
    )


def snapshot(values: dict) -> dict:
    """`values` with each tensor copied: what the student's code gave, as it was when judged. In
    the grader's own process the code may still hold the tensors it returned, and write over
    them once hidden inputs reach it (runner.grade_package: the example is shown after that)."""
    return {key: value.detach().clone() if isinstance(value, torch.Tensor) else value for key, value in values.items()}


def kind_of(fail):
    """What makes two failures the same kind: the message id, and an exception's type."""
    if fail is None:
        return None
    return fail.message_id, fail.params.get("type") if fail.message_id in ("raised", "wrong_exception") else None


def differing(got, expected, fail, tol):
    """(got, expected) cut to the parts of the observation that are wrong: the keys whose values
    differ (all of them where that cannot be told), or, without an expectation, the tensors the
    failure names."""

    if not isinstance(got, dict):
        return {}, {}
    tensors = {key: value for key, value in got.items() if isinstance(value, (torch.Tensor, int, float, bool))}
    if isinstance(expected, dict) and expected:
        keys = []
        for key in expected:
            try:
                if compare(got.get(key), expected[key], tol) is not None:
                    keys.append(key)
            except Exception:  # noqa: BLE001 - values from student code
                keys.append(key)
        keys = keys or list(expected)
        return {key: got.get(key) for key in keys}, {key: expected[key] for key in keys}
    named = str(fail.params.get("name", "")).split(" ")[0] if fail is not None else ""
    if named in tensors:
        return {named: tensors[named]}, {}
    return tensors, {}


def first_example(records, observe, tol, skip=None, **limits):
    """The smallest failing input of a step: smallest_example of the first of its `records`
    (diagnosis.Record) that `shrinkable` says may be shrunk. `observe(check, inputs) ->
    Observation` runs the student's half; `skip(check)`: True for a check not to run again (code
    that hung). One search per step, so that a failing run stays quick; None where there is
    nothing to show."""
    for record in records:
        if shrinkable(record) and (skip is None or not skip(record.check)):
            try:
                return smallest_example(
                    record.check,
                    record.inputs,
                    record.fail,
                    lambda inputs, check=record.check: observe(check, inputs),
                    tol,
                    observation=record.observation,
                    **limits,
                )
            except Exception:  # noqa: BLE001 - the search is a courtesy: it never costs a grade
                return None
    return None


def shrinkable(record) -> bool:
    """Whether a record's failure says something about the computation, on a check whose inputs
    may be shown: no exception the grader expects, no time limit, no forbidden call, not blocked
    by another step's mistake; a public check that needs no device and takes inputs."""
    fail, check, observation = record.fail, record.check, record.observation
    if fail is None or says_nothing(fail, check) or fail.message_id == "not_checked" or not record.inputs:
        return False  # (no inputs: a check that makes its own, nothing to shrink or show)
    if fail.params.get("blocked_by") or check.visibility != "public" or check.requires:
        return False
    return observation is not None and not charged_forbidden(observation, check)
