"""Observing in this process: a student's own run, the reference, a known mistake's model.

    observation = observe(check, package, inputs, timeout)     # read as a worker's report is
    with InProcess(submission, "mha", budget=120) as executor:  # what remote.RemoteExecutor does
        observations = executor.observe(tasks)                  # in the sandbox

What the harness reports is read against the judge's own facts (observation.py) before anything
is judged, exactly as a sandboxed worker's report is.
"""

import contextlib
import copy
import functools
import sys
import threading
import warnings
from contextlib import contextmanager

from autograder.engine.checks.check import Fail
from autograder.engine.checks.text import printable
from autograder.engine.course import assignment as assignments
from autograder.engine.judge.budget import Budget
from autograder.engine.judge.observation import Facts, Hang, Observation, read_report
from autograder.engine.scan.forbidden import package_files
from autograder.engine.scan.source_reader import lookup_rule
from autograder.harness import observe as harness
from autograder.harness.lookups import LookupRule
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
    contract = assignments.contract_failures(getattr(check, "assignment", None))
    return Facts(name, local_files(package), check.step, timeout, tuple(forbidden), hangs or {}, contract)


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
        self.held = None  # the hidden phase's printing (hide()), held back from the terminal
        try:
            self.student = Package.load(submission, package, rule=LookupRule.from_data(lookup_rule()))
        except SubmissionError as error:
            self.error = Fail(error.what, error.params)
        self.package = package
        self.files = local_files(self.student) if self.student is not None else frozenset()
        self.layers = []
        self.hangs = Hangs()
        self.budget = budget if isinstance(budget, Budget) else Budget(budget)  # seconds, or one already begun

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def observe(self, tasks):
        """An iterator of one Observation per task, as RemoteExecutor.observe."""
        for check, inputs, timeout, forbidden in tasks:
            left = self.budget.left()
            observation = self.hangs.skipped(check)
            if left <= 0:
                observation = Observation(error=Fail("budget_spent", {"seconds": self.budget.seconds}))
            elif observation is None:
                with held_printing(self.held):
                    observation = observe(
                        check, self.student, inputs, min(timeout or left, left), forbidden, self.hangs.by_function
                    )
                if (
                    observation.error is not None
                    and observation.error.message_id == "timeout"
                    and left < (timeout or left)
                ):
                    observation = Observation(error=Fail("budget_spent", {"seconds": self.budget.seconds}))
                hung = self.hangs.note(check, timeout, observation)
                if hung is not None:
                    harness.trap(self.student, *hung)
            yield observation

    def output(self):
        return ""  # printed where the run prints, as it happens (before any hidden input: hide())

    def hidden_output(self) -> str:
        return "" if self.held is None else printable(self.held.text())

    def hide(self) -> None:
        """End the public phase: from here on what student code prints (Python's sys.stdout and
        sys.stderr, on this thread) is held back, into hidden_output(), not printed where a
        student reads (a notebook's cell). Code that writes to the file descriptors itself, or
        that takes this process over, is not held: in-process grading is for code you trust."""
        self.held = Held()


class Held:
    """Text written to a held-back stream, the first SHOWN characters of it."""

    SHOWN = 4 * 4000  # more than a result keeps (printable cuts it)

    def __init__(self):
        self.parts, self.size = [], 0

    def write(self, text) -> int:
        text = str(text)
        if self.size < self.SHOWN:
            self.parts.append(text[: self.SHOWN - self.size])
            self.size += len(self.parts[-1])
        return len(text)

    def flush(self) -> None:
        pass

    def text(self) -> str:
        return "".join(self.parts)


_holding = {}  # thread id -> Held: the threads whose printing is held back now
_held_streams = []  # (sys.stdout, sys.stderr) as they were before the first thread held its printing
_holding_lock = threading.Lock()


class _Routed:
    """sys.stdout or sys.stderr while some thread holds its printing back: a holding thread
    writes into its Held, every other thread where it wrote before."""

    def __init__(self, index: int):
        self.index = index

    def _target(self):
        held = _holding.get(threading.get_ident())
        return held if held is not None else _held_streams[self.index]

    def write(self, text):
        return self._target().write(text)

    def flush(self):
        return self._target().flush()

    def __getattr__(self, name):
        return getattr(_held_streams[self.index], name)


@contextmanager
def held_printing(held):
    """Hold this thread's printing back into `held` (a Held; None: print as usual). A batch's
    threads share sys.stdout: the streams are swapped once, for as long as any thread holds."""
    if held is None:
        yield
        return
    me = threading.get_ident()
    with _holding_lock:
        if not _holding:
            _held_streams[:] = [sys.stdout, sys.stderr]
            sys.stdout, sys.stderr = _Routed(0), _Routed(1)
        _holding[me] = held
    # Warnings too, where they can be caught for this thread alone (the main thread of a
    # notebook's kernel, say): the warnings module's state is the process's.
    caught = warnings.catch_warnings(record=True) if threading.current_thread() is threading.main_thread() else None
    try:
        with caught or contextlib.nullcontext() as seen:
            if seen is not None:
                warnings.simplefilter("always")
            try:
                yield
            finally:
                for warning in seen or ():
                    held.write(f"{warning.category.__name__}: {warning.message}\n")
    finally:
        with _holding_lock:
            del _holding[me]
            if not _holding and isinstance(sys.stdout, _Routed):  # unless someone swapped them since
                sys.stdout, sys.stderr = _held_streams
