"""Observing in this process: a student's own run, the reference, a known mistake's model.

    observation = observe(check, package, inputs, timeout)     # read as a worker's report is
    with InProcess(submission, "mha", budget=120) as executor:  # what remote.RemoteExecutor does
        observations = executor.observe(tasks)                  # in the sandbox

What the harness reports is read against the judge's own facts (observation.py) before anything
is judged, exactly as a sandboxed worker's report is.
"""

import copy
import functools
import time

from autograder.engine.checks.check import Fail
from autograder.engine.scan.source_reader import lookup_rule
from autograder.harness.lookups import LookupRule
from autograder.engine.judge.observation import Facts, Hang, Observation, read_report
from autograder.engine.scan.forbidden import package_files
from autograder.harness import observe as harness
from autograder.harness.package import Package, SubmissionError


def clone(inputs):
    """A private copy of the inputs, so student code that writes into them changes nothing else."""
    return copy.deepcopy(inputs)


def observe(check, package, inputs, timeout=None, forbidden=(), hangs=None) -> Observation:
    """Run the student half of `check` on `package` in this process (the reference, a known
    mistake's model, or a student's own run), read as the judge reads a worker's report.
    `hangs`: Hangs.by_function of the package's run so far (what a stop in a trap stands for)."""
    report = harness.observe(check.observe, package, inputs, timeout, tuple(forbidden))
    return read_report(report, facts_of(package, check, timeout, forbidden, hangs))


def facts_of(package, check, timeout=None, forbidden=(), hangs=None) -> Facts:
    """What the judge knows when it reads a report of `check` run on `package` in this process."""
    name = getattr(getattr(package, "_directory", None), "name", "package")
    return Facts(name, local_files(package), check.step, timeout, tuple(forbidden), hangs or {})


def local_files(package) -> frozenset:
    """The .py files of a package loaded from a folder, relative to it (what `where` may name)."""
    directory = getattr(package, "_directory", None)
    if directory is None:
        return frozenset()
    return _local_files(str(directory))


@functools.lru_cache(maxsize=32)
def _local_files(directory: str) -> frozenset:
    return frozenset(name.split("/", 1)[1] for name in package_files(directory))


class Hangs:
    """Where a submission's code has run past its time limit, so that the later checks and
    probes that would run that code again stop at once (harness.observe.trap: one endless loop
    costs one time limit, not one per check, nor one per step that calls it). Where the code had
    to be stopped from outside (the place is unknown), the rest of the hung check's step is not
    run; a limit that ran out in the grader's own code is not the student's hang. Shared by the
    in-process executor and the pytest route."""

    def __init__(self):
        self.by_function = {}  # (file, function) -> Hang
        self.by_step = {}  # step -> Hang, where the place is unknown

    def skipped(self, check) -> "Observation | None":
        """The Observation that stands for running `check` when its step hung somewhere unknown."""
        hang = self.by_step.get(check.step)
        if hang is None:
            return None
        return Observation(
            error=Fail("skipped_after_hang", {"seconds": hang.seconds, "where": hang.where, "check": hang.check})
        )

    def note(self, check, timeout, observation) -> "tuple | None":
        """Record `observation` of `check`; the (file, function) to trap when it is a new hang at a
        known place."""
        error = observation.error
        if error is None or error.message_id != "timeout":
            return None
        hang = Hang(check.id or check.diagnosis, check.step, timeout, error.params["where"])
        if observation.hung is None:
            if observation.overran:
                self.by_step.setdefault(check.step, hang)
            return None
        if observation.hung in self.by_function:
            return None
        self.by_function[observation.hung] = hang
        return observation.hung


class InProcess:
    """Runs student code in this process (a student's own run, the kit's tests, --in-process),
    within the submission's time budget, stopping at once in a function that hung before."""

    def __init__(self, submission, package, budget: float = None):
        self.student, self.error = None, None
        try:
            self.student = Package.load(submission, package, rule=LookupRule.from_data(lookup_rule()))
        except SubmissionError as error:
            self.error = Fail(error.what, error.params)
        self.package = package
        self.files = local_files(self.student) if self.student is not None else frozenset()
        self.layers = []
        self.hangs = Hangs()
        self.budget = budget
        self.deadline = None if budget is None else time.monotonic() + budget

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def observe(self, tasks):
        """An iterator of one Observation per task, as RemoteExecutor.observe."""
        for check, inputs, timeout, forbidden in tasks:
            left = float("inf") if self.deadline is None else self.deadline - time.monotonic()
            observation = self.hangs.skipped(check)
            if left <= 0:
                observation = Observation(error=Fail("budget_spent", {"seconds": self.budget}))
            elif observation is None:
                observation = observe(
                    check, self.student, inputs, min(timeout or left, left), forbidden, self.hangs.by_function
                )
                if (
                    observation.error is not None
                    and observation.error.message_id == "timeout"
                    and left < (timeout or left)
                ):
                    observation = Observation(error=Fail("budget_spent", {"seconds": self.budget}))
                hung = self.hangs.note(check, timeout, observation)
                if hung is not None:
                    harness.trap(self.student, *hung)
            yield observation

    def output(self):
        return ""
