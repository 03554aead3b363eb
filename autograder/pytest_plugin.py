"""pytest integration for students: one pytest test per public check, then the score table.

assignments/test_mha.py parametrizes one test over `public_checks(__file__)`; assignments/
conftest.py registers StudentPlugin, which records each check's outcome and prints the per-step
table at the end of the run. Student code runs in this process, so an exception in it shows a
normal traceback into the student's file; a per-check time limit comes from pytest-timeout.
"""
from pathlib import Path

import pytest

from . import config as grading_config
from . import messages, results
from .check import ContractError, Fail
from .checks import step_modules
from .diagnosis import Record, diagnose
from .forbidden import watching
from .runner import (Observation, check_inputs, check_seed, clone, device_mode, forbidden_in_source, judge,
                     known_failure, mode_note, not_checked, observe, raised, score_step)
from .submission import Package, SubmissionError

_verdicts = {}  # check -> the Fail that run_public_check reported for it
_records = {}  # check -> its Record (inputs, observation, verdict), for the diagnosis
_modes = {}  # step id -> the device mode its checks ran in


def pytest_addoption(parser):
    parser.addoption("--cuda", action="store_true", default=False,
                     help="without a GPU, also run the cuda step on a simulated CUDA device "
                          "(a few seconds: it loads PyTorch's fake-tensor machinery)")
    parser.addoption("--step", action="append", default=[], metavar="ID",
                     help="run only this step's checks (may repeat); exact, unlike -k")


def pytest_collection_modifyitems(config, items):
    """--step ID: keep only that step's checks (a -k substring would also pick other steps)."""
    wanted = set(config.getoption("step") or ())
    if not wanted:
        return
    keep, drop = [], []
    for item in items:
        check = getattr(item, "callspec", None) and item.callspec.params.get("check")
        (keep if check is not None and check.step in wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def find_config(start):
    """The nearest grading.yml at or above `start`, else the kit's own."""
    for directory in [Path(start).resolve(), *Path(start).resolve().parents]:
        if (directory / "grading.yml").is_file():
            return directory / "grading.yml"
    return grading_config.default_path()


def load_config(start):
    return grading_config.load(find_config(start), known_steps=step_modules())


def public_checks(test_file):
    """pytest params, one per public check of the steps in grading.yml, in step order, each
    with the step's time limit."""
    config = load_config(Path(test_file).parent)
    params = []
    for step in config.steps:
        for check in step_modules()[step.id].CHECKS:
            if check.visibility == "public":
                params.append(pytest.param(check, id=f"{step.id}-{check.id}",
                                           marks=[pytest.mark.timeout(step.timeout)]))
    return params


def run_public_check(check, mha, config):
    """Run one check in this process; fail the test with the check's message if it fails.

    Exceptions from student code propagate, so pytest shows the traceback into their file;
    only the expected kinds (the TODO still there, a broken file, a missing layer, a forbidden
    call) become a one-line message."""
    __tracebackhide__ = True
    step = config.step(check.step)
    mode = None
    if check.requires == "cuda":
        mode, reason = device_mode(step, simulate=config.simulate_cuda)
        if mode is None:
            pytest.skip(messages.render("not_checked", reason=messages.render(reason)))
        _modes[check.step] = mode
    fail = forbidden_source(check.step, step, mha)
    inputs = check_inputs(check, check_seed(check))
    if mode is not None:
        inputs["mode"] = mode
    observation, expected = Observation(), None
    if fail is None:
        try:
            with watching(step.forbidden) as seen:
                observation.values = check.observe(mha, **clone(inputs))
            observation.forbidden = tuple(seen)
        except (NotImplementedError, SubmissionError, ContractError) as error:
            fail = known_failure(error, mha)  # other exceptions propagate: pytest shows the traceback
        except Exception as error:
            # recorded as the grader records it, for the diagnosis; pytest shows the traceback
            observation.error = raised(error, mha)
            _records[check] = Record(check, inputs, observation, observation.error,
                                     expected=check.expected(**clone(inputs)))
            raise
        observation.error = fail
    if not observation.forbidden:  # also for an error: the diagnosis judges the known mistakes on it
        expected = check.expected(**clone(inputs))
    if fail is None:
        fail = judge(check, inputs, observation, expected, step.tolerance)
    _records[check] = Record(check, inputs, observation, fail, expected=expected)
    if not_checked(fail):
        pytest.skip(messages.render(fail.message_id, **fail.params))
    if fail:
        report(check, fail)


_source_scans = {}


def forbidden_source(step_id, step, mha):
    """runner.forbidden_in_source, once per step and run."""
    if step_id not in _source_scans:
        _source_scans[step_id] = forbidden_in_source(step_modules()[step_id], step, mha)
    return _source_scans[step_id]


def report(check, fail):
    __tracebackhide__ = True
    _verdicts[check] = fail
    pytest.fail(messages.render(fail.message_id, **fail.params), pytrace=False)


@pytest.fixture(scope="session")
def mha(request):
    """The student's mha package (see StudentPlugin.package)."""
    return request.config.pluginmanager.get_plugin(PLUGIN_NAME).package()


@pytest.fixture(scope="session")
def grading(request):
    """The GradingConfig the public checks run with."""
    return request.config.pluginmanager.get_plugin(PLUGIN_NAME).config


PLUGIN_NAME = "mha-lab"


class StudentPlugin:
    """Records every check's outcome and prints the per-step score table at the end."""

    def __init__(self, submission_dir, simulate_cuda=True):
        self.submission_dir = Path(submission_dir)
        self.config = load_config(self.submission_dir)
        self.config.simulate_cuda = simulate_cuda
        self.outcomes = {}  # check -> (passed, Fail or None)
        self._mha = None

    def reference(self):
        """The reference solutions beside grading.yml, if this copy of the kit has them
        (an instructor's checkout does; a student release does not: then only probes run)."""
        directory = find_config(self.submission_dir).parent / "solutions"
        return directory if (directory / "mha").is_dir() else None

    def package(self):
        """The student's mha package, loaded file by file on first use."""
        if self._mha is None:
            self._mha = Package.load(self.submission_dir)
        return self._mha

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report_ = outcome.get_result()
        check = getattr(item, "callspec", None) and item.callspec.params.get("check")
        if check is None or (report_.when != "call" and not report_.failed):
            return
        if report_.skipped and check.requires == "cuda":
            self.outcomes[check] = (None, Fail("not_checked", {"reason": str(report_.longrepr[-1]).removeprefix("Skipped: not checked: ")}))
        elif report_.passed:
            self.outcomes[check] = (True, None)
        elif report_.failed:
            self.outcomes[check] = (False, self.failure(check, call.excinfo))

    def failure(self, check, excinfo):
        if check in _verdicts:
            return _verdicts.pop(check)
        if excinfo is None:
            return Fail("raised", {"type": "Error", "message": "(setup failed)", "where": "pytest"})
        if excinfo.errisinstance(pytest.fail.Exception) and "Timeout" in str(excinfo.value):
            # pytest-timeout's message; its traceback above shows where the code was stuck
            step = self.config.step(check.step)
            return Fail("timeout", {"seconds": step.timeout, "where": "see the traceback above"})
        return raised(excinfo.value, self._mha)

    def pytest_unconfigure(self, config):
        """Print the table last, after pytest's own summary, where students look."""
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        steps = []
        for step in self.config.steps:
            outcomes = [(check, *self.outcomes[check]) for check in step_modules()[step.id].CHECKS
                        if check in self.outcomes]
            if outcomes:
                result = score_step(step, outcomes)
                if step.id in _modes:
                    result.mode = mode_note(_modes[step.id])
                records = [_records[check] for check, passed, _ in outcomes if check in _records]
                if any(passed is False for _, passed, _ in outcomes) and self._mha is not None:
                    result.diagnoses = diagnose(
                        step_modules()[step.id], records,
                        lambda c, package, i, timeout=step.timeout: observe(c, package, i, timeout),
                        self._mha, step.tolerance, reference=self.reference())
                steps.append(result)
        if not steps or terminal is None:
            return
        result = results.GradeResult(assignment=self.config.assignment,
                                     submission=str(self.submission_dir), steps=steps)
        terminal.write_sep("=", "MHA Lab score (public checks)")
        title = f"{self.config.assignment}: public checks; hidden checks add to the final grade"
        terminal.write_line(results.table(result, title=title))
