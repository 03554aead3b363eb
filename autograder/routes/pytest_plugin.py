"""pytest integration for students: one pytest test per public check, then the score table.

assignments/test_checks.py parametrizes one test over `public_checks(__file__)` (every public
check of every assignment of grading.yml whose package is beside it); assignments/conftest.py
registers StudentPlugin, which records each check's outcome and prints the per-step table at
the end of the run. Student code runs in this process, so an exception in it shows a
normal traceback into the student's file; a per-check time limit comes from pytest-timeout.

One module, though long: pytest meets it through one plugin class and its hooks; the helpers
beside them serve only those hooks.
"""

import gc
import re
from pathlib import Path

import pytest

from autograder.engine.checks import messages
from autograder.engine.checks.check import Fail
from autograder.engine.course import config as grading_config
from autograder.engine.judge import results, table
from autograder.engine.judge.in_process import Hangs, clone, facts_of, observe
from autograder.engine.judge.observation import Observation, read_report
from autograder.engine.judge.plan import (
    check_inputs,
    check_seed,
    device_mode,
    every_forbidden,
    forbidden_in_source,
    mode_note,
    warm_up_grader,
)
from autograder.engine.judge.score import score_step
from autograder.engine.judge.verdict import charged_forbidden, judge, not_checked
from autograder.engine.mistakes.diagnosis import Record, diagnose
from autograder.engine.scan.forbidden import SourceScan
from autograder.engine.scan.source_reader import lookup_rule
from autograder.harness import observe as harness
from autograder.harness.lookups import LookupRule
from autograder.harness.package import Package
from autograder.harness.summary import summarise_text


def pytest_addoption(parser):
    parser.addoption(
        "--cuda",
        action="store_true",
        default=False,
        help="without a GPU, also run the cuda step on a simulated CUDA device "
        "(a few seconds: it loads PyTorch's fake-tensor machinery)",
    )
    parser.addoption(
        "--step",
        action="append",
        default=[],
        metavar="ID",
        help="run only this step's checks (may repeat); exact, unlike -k",
    )
    parser.addoption(
        "--plots",
        nargs="?",
        const="plots",
        default=None,
        metavar="DIR",
        help="where attention or masking fails, save pictures of your attention weights next to "
        "the expected ones (in DIR, default plots/)",
    )
    parser.addoption(
        "--assignment", action="append", default=[], metavar="ID", help="run only this assignment's checks (may repeat)"
    )
    parser.addoption(
        "--lang",
        choices=messages.LANGUAGES,
        default=None,
        help="language of the messages and the score table: en or ko (default: MHA_LAB_LANG, else the locale, else en)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """--step ID, --assignment ID: keep only those checks. -k: a step id in the expression means
    that step's checks, exactly (pytest alone would match every check whose name contains it:
    `-k attention` would pick multi_head_attention's and masking's attention_padding too); any
    other word keeps pytest's meaning (a part of a test's name)."""
    select_steps(config, items)
    steps, assignments = set(config.getoption("step") or ()), set(config.getoption("assignment") or ())
    if not steps and not assignments:
        return
    keep, drop = [], []
    for item in items:
        check = check_of(item)
        wanted = (
            check is not None
            and (not steps or check.step in steps)
            and (not assignments or check.assignment in assignments)
        )
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def check_of(item):
    """The check a collected test runs (None: a test that is not one of ours)."""
    return getattr(item, "callspec", None) and item.callspec.params.get("check")


def select_steps(config, items):
    """-k with a step id in it: evaluate the expression with the step ids matched exactly, and take
    the -k over from pytest (which would match them as substrings). Notes what was selected for
    pytest_report_collectionfinish."""
    expression = (config.option.keyword or "").strip()
    if not expression:
        return
    try:
        from _pytest.mark import KeywordMatcher
        from _pytest.mark.expression import Expression

        compiled = Expression.compile(expression)
    except Exception:  # noqa: BLE001 - another pytest, or a malformed -k: pytest's own -k says why
        return
    step_ids = {check.step.lower() for check in map(check_of, items) if check is not None}
    words = {word.lower() for word in re.findall(r"[\w.:/\[\]-]+", expression)} - {"and", "or", "not"}
    named = sorted(step_ids & words)
    if not named:
        return

    def matcher(item):
        check, others = check_of(item), KeywordMatcher.from_item(item)

        def matches(word, **kwargs):
            if word.lower() in step_ids:
                return check is not None and check.step.lower() == word.lower()
            return others(word, **kwargs)

        return matches

    chosen = [compiled.evaluate(matcher(item)) for item in items]
    keep = [item for item, wanted in zip(items, chosen, strict=True) if wanted]
    drop = [item for item, wanted in zip(items, chosen, strict=True) if not wanted]
    config.option.keyword = ""  # done here: pytest's -k would match the step ids as substrings again
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    config.stash[SELECTED] = (expression, named, len(keep))


def pytest_report_collectionfinish(config, start_path, items):
    """What a -k naming a step selected, said under pytest's "collected N items"."""
    if SELECTED not in config.stash:
        return []
    expression, named, count = config.stash[SELECTED]
    return [messages.render("pytest.selected", expression=expression, steps=", ".join(named), count=count)]


SELECTED = pytest.StashKey()


def find_config(start):
    """The nearest grading.yml at or above `start`, else the kit's own."""
    for directory in [Path(start).resolve(), *Path(start).resolve().parents]:
        if (directory / "grading.yml").is_file():
            return directory / "grading.yml"
    return grading_config.default_path()


def present_assignments(directory):
    """The Assignments of the nearest grading.yml whose package is in `directory`; a malformed
    grading.yml stops pytest with its message (file, line and what is wrong, no traceback) and
    exit status 2, as every other command of the kit (pytest's own usage error would be 4)."""
    directory = Path(directory)
    try:
        graded = _read(find_config(directory))
    except grading_config.ConfigError as error:
        pytest.exit(str(error), returncode=2)
    return [config for config in graded if (directory / config.package).is_dir()]


_last_read = {}  # (grading.yml's path, its text) -> its Assignments: the last file read


def _read(path):
    """grading_config.load_all(path), read once per text: a run reads it when the plugin starts
    and again to collect the checks (a YAML parse and a build each time)."""
    try:
        key = (str(path), Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeError):
        return grading_config.load_all(path)  # it says what is wrong with the file
    if key not in _last_read:
        graded = grading_config.load_all(path)
        _last_read.clear()
        _last_read[key] = graded
    return _last_read[key]


def public_checks(test_file):
    """pytest params, one per public check of the steps in grading.yml, in step order, each
    with the step's time limit, for each assignment whose package is beside `test_file`."""
    present = present_assignments(Path(test_file).parent)
    params = []
    for config in present:
        prefix = f"{config.id}-" if len(present) > 1 else ""
        for step in config.steps:
            for check in config.step_modules()[step.id].CHECKS:
                if check.visibility == "public":
                    params.append(
                        pytest.param(
                            check, id=f"{prefix}{step.id}-{check.id}", marks=[pytest.mark.timeout(step.timeout)]
                        )
                    )
    return params


def run_public_check(check, lab):
    """Run one check in this process; fail the test with the check's message if it fails.
    `lab`: the StudentPlugin of the run (the `lab` fixture).

    Exceptions from student code propagate, so pytest shows the traceback into their file;
    only the expected kinds (the TODO still there, a broken file, a missing layer, a forbidden
    call) become a one-line message."""
    __tracebackhide__ = True
    config, student = lab.config(check.assignment), lab.package(check.assignment)
    step = config.step(check.step)
    mode = None
    if check.requires == "cuda":
        mode, reason = device_mode(step, simulate=lab.simulate_cuda)
        if mode is None:
            pytest.skip(messages.render("not_checked", reason=messages.render(reason)))
        lab.modes[(check.assignment, check.step)] = mode
    skipped = lab.hangs.skipped(check)
    if skipped is not None:  # the step's code has hung once where nobody can say: not run again
        lab.verdicts[check] = skipped.error
        pytest.fail(messages.render(skipped.error.message_id, **skipped.error.params), pytrace=False)
    fail = lab.forbidden_source(check, step)
    inputs = check_inputs(check, check_seed(check))
    if mode is not None:
        inputs["mode"] = mode
    observation, expected = None, None
    if fail is None:
        report = harness.observe(check.observe, student, clone(inputs), None, step.forbidden, keep_exception=True)
        exception = report.pop("exception", None)
        observation = read_report(report, facts_of(student, check, step.timeout, step.forbidden, lab.hangs.by_function))
        if exception is not None:
            # recorded as the grader records it, for the diagnosis; pytest shows the traceback
            lab.records[check] = Record(
                check, inputs, observation, observation.error, expected=check.expected(**clone(inputs))
            )
            raise exception
        fail = observation.error
    else:
        observation = Observation(error=fail)
    if not charged_forbidden(observation, check):  # also for an error: the diagnosis judges the known mistakes on it
        expected = check.expected(**clone(inputs))
    if fail is None:
        fail = judge(check, inputs, observation, expected, step.tolerance)
    lab.records[check] = Record(check, inputs, observation, fail, expected=expected)
    if not_checked(fail):
        lab.verdicts[check] = fail  # scored as not checked (score.score_step), not left out as a partial run
        pytest.skip(messages.render(fail.message_id, **fail.params))
    if fail:
        lab.verdicts[check] = fail
        pytest.fail(brief(fail) if not lab.verbose else messages.render(fail.message_id, **fail.params), pytrace=False)


def brief(fail) -> str:
    """A failing check's message as pytest shows it under the test's name without -v: wrong values
    said by their names and largest error only (indices, tolerances and dtypes with -v; the step's
    verdict in the table at the end says why)."""
    if fail.message_id == "values":
        return messages.render(
            "feedback.values_brief", names=fail.params.get("name", "?"), largest=f"{fail.params['max_abs']:.3g}"
        )
    return messages.render(fail.message_id, **fail.params)


def student_traceback(excinfo, student) -> None:
    """Cut the traceback pytest shows to the frames of the student's own files, ending at the
    innermost of them (the grader's frames, and torch's below the student's line, are noise to
    a student), and summarise tensors in the exception's text. Left whole when no frame is theirs."""
    directory = str(getattr(student, "_directory", "") or "")
    if not directory:
        return
    entries = list(excinfo.traceback)
    theirs = [i for i, entry in enumerate(entries) if str(entry.path).startswith(directory + "/")]
    if not theirs:
        return
    test_frame = entries[:1] if "test_" in Path(str(entries[0].path)).name else []
    excinfo.traceback = _pytest_traceback([*test_frame, *(entries[i] for i in theirs)])
    text = str(excinfo.value)
    short = summarise_text(text)
    if short != text:
        try:
            excinfo.value.args = (short,)
        except (AttributeError, TypeError):  # an exception type whose args cannot be set
            pass


def in_student_code(excinfo, student) -> bool:
    """True if a frame of the traceback is in the student's files."""
    directory = str(getattr(student, "_directory", "") or "")
    return bool(directory) and any(str(entry.path).startswith(directory + "/") for entry in excinfo.traceback)


def _pytest_traceback(entries):
    from _pytest._code.code import Traceback

    return Traceback(entries)


@pytest.fixture(scope="session")
def lab(request):
    """The run's StudentPlugin: the assignments, the student's packages, what each check gave."""
    return request.config.pluginmanager.get_plugin(PLUGIN_NAME)


PLUGIN_NAME = "mha-lab"


class StudentPlugin:
    """Records every check's outcome and prints the per-step score table at the end."""

    def __init__(self, submission_dir, simulate_cuda=True, lang=None):
        self._previous_lang = messages.use_language(lang)  # undone in pytest_unconfigure
        self.submission_dir = Path(submission_dir)
        self.simulate_cuda = simulate_cuda
        self.configs = {config.id: config for config in present_assignments(self.submission_dir)}
        for config in self.configs.values():
            config.simulate_cuda = simulate_cuda
        self.outcomes = {}  # check -> (passed, Fail or None)
        self.verdicts = {}  # check -> the Fail that run_public_check reported for it
        self.records = {}  # check -> its Record (inputs, observation, verdict), for the diagnosis
        self.modes = {}  # (assignment, step) -> the device mode its checks ran in
        self.source_scans = {}  # (assignment, step) -> plan.forbidden_in_source's verdict
        self.sources = {}  # assignment -> its package's forbidden.SourceScan
        self.packages = {}  # assignment -> the student's package
        self.hangs = Hangs()  # where code hung: the checks that reach it stop at once
        self.plots = None  # --plots DIR
        self.verbose = False  # pytest -v: every check's full message, in the tests and the table

    def config(self, assignment_id):
        return self.configs[assignment_id]

    def reference(self, config):
        """The reference solutions beside grading.yml, if this copy of the kit has them
        (an instructor's checkout does; a student release does not: then only probes run)."""
        directory = find_config(self.submission_dir).parent / "solutions"
        return directory if (directory / config.package).is_dir() else None

    def package(self, assignment_id):
        """The student's package of an assignment, loaded file by file on first use."""
        if assignment_id not in self.packages:
            self.packages[assignment_id] = Package.load(
                self.submission_dir, self.configs[assignment_id].package, rule=LookupRule.from_data(lookup_rule())
            )
        return self.packages[assignment_id]

    def forbidden_source(self, check, step):
        """plan.forbidden_in_source, once per step and run."""
        key = check.assignment, check.step
        if key not in self.source_scans:
            module = self.configs[check.assignment].step_modules()[check.step]
            if check.assignment not in self.sources:
                package = self.package(check.assignment)._directory
                forbidden = every_forbidden(self.configs[check.assignment])
                self.sources[check.assignment] = SourceScan(package, forbidden=forbidden)  # each file parsed once
            self.source_scans[key] = forbidden_in_source(module, step, self.sources[check.assignment])
        return self.source_scans[key]

    def pytest_report_header(self, config):
        """A torch other than the grading's, said before anything runs (torch_pin)."""
        from autograder.engine.course.torch_pin import torch_note  # late: not at the start of `pytest assignments/`

        note = torch_note()
        return [note] if note else []

    def pytest_sessionstart(self, session):
        """Short tracebacks unless the student asks for others (--tb=long): one line per frame of
        their code, no dumps of the arguments (tensors) of each frame."""
        if session.config.option.tbstyle == "auto":
            session.config.option.tbstyle = "short"
        self.plots = session.config.getoption("plots", None)
        self.verbose = session.config.option.verbose > 0
        warm_up_grader(self.configs.values(), self.simulate_cuda)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        check = getattr(item, "callspec", None) and item.callspec.params.get("check")
        if check is not None and call.excinfo is not None and check.assignment in self.packages:
            student_traceback(call.excinfo, self.packages[check.assignment])
        outcome = yield
        report_ = outcome.get_result()
        check = getattr(item, "callspec", None) and item.callspec.params.get("check")
        if check is None or (report_.when != "call" and not report_.failed):
            return
        if report_.skipped and check in self.verdicts:
            self.outcomes[check] = (None, self.verdicts.pop(check))
        elif report_.skipped and check.requires == "cuda":
            prefix = "Skipped: " + messages.render("not_checked", reason="")
            self.outcomes[check] = (
                None,
                Fail("not_checked", {"reason": str(report_.longrepr[-1]).removeprefix(prefix)}),
            )
        elif report_.passed:
            self.outcomes[check] = (True, None)
        elif report_.failed:
            self.outcomes[check] = (False, self.failure(check, call.excinfo))

    def failure(self, check, excinfo):
        if check in self.verdicts:
            return self.verdicts.pop(check)
        if excinfo is None:
            return Fail("raised", {"type": "Error", "message": "(setup failed)", "where": "pytest"})
        if excinfo.errisinstance(pytest.fail.Exception) and "Timeout" in str(excinfo.value):
            # pytest-timeout's message; its traceback above shows where the code was stuck
            step = self.configs[check.assignment].step(check.step)
            fail = Fail("timeout", {"seconds": step.timeout, "where": messages.render("traceback_above")})
            student = self.packages.get(check.assignment)
            place = harness.where(excinfo.value, student) if in_student_code(excinfo, student) else None
            if place is not None:  # not the grader's own slowness: later checks that reach it stop at once
                stuck = Fail("timeout", {**fail.params, "where": harness.where_text(excinfo.value, student)})
                hung = self.hangs.note(check, step.timeout, Observation(error=stuck, hung=(place[0], place[2])))
                if hung is not None:
                    harness.trap(student, *hung)
            return fail
        student = self.packages.get(check.assignment)
        return read_report(harness.raised(excinfo.value, student), facts_of(student, check)).error

    def pytest_unconfigure(self, config):
        """Print the tables last, after pytest's own summary, where students look."""
        try:
            self.print_tables(config)
        finally:
            messages.restore_language(self._previous_lang)
            # The run is over: spare the interpreter's last garbage collection the objects of torch
            # and of the checks (0.2 to 0.4 s of a student's run). Frozen objects are still freed
            # by reference counting; only cycles among them are left to the process's end.
            gc.freeze()

    def print_tables(self, config):
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        if terminal is None:
            return
        for assignment in self.configs.values():
            result = self.result(assignment)
            if result.steps:
                terminal.write_sep("=", messages.render("pytest.section"))
                title = messages.render(
                    "table.public_title",
                    assignment=messages.title(f"assignment_title.{assignment.id}", assignment.title),
                )
                terminal.write_line(table.table(result, title=title, verbose=self.verbose))

    def example(self, step, records, student):
        """The step's smallest failing input (example.first_example), its candidates run here as
        the checks are, without the forbidden-call watch (the check shrunk made no forbidden call,
        and the watch costs more than the small runs it would watch)."""
        from autograder.engine.judge.example import first_example  # late: not at the start of `pytest assignments/`

        return first_example(
            records,
            lambda check, inputs: observe(check, student, inputs, step.timeout),
            step.tolerance,
            skip=lambda check: self.hangs.skipped(check) is not None,
        )

    def result(self, assignment):
        """The GradeResult of the checks that ran for `assignment`, with diagnoses."""
        steps = []
        for step in assignment.steps:
            module = assignment.step_modules()[step.id]
            outcomes = [(check, *self.outcomes[check]) for check in module.CHECKS if check in self.outcomes]
            if not outcomes:
                continue
            result = score_step(step, outcomes)
            for check_result, (_, _, fail) in zip(result.checks, outcomes, strict=True):
                check_result.params = None if fail is None else dict(fail.params)  # for the verdict's evidence
            public = [check for check in module.CHECKS if check.visibility == "public"]
            if len(outcomes) < len(public):  # -k, -x, --lf, --sw: a step score would not be the truth
                result.status, result.checks_run, result.checks_total = "partial", len(outcomes), len(public)
            if (assignment.id, step.id) in self.modes:
                result.mode = mode_note(self.modes[(assignment.id, step.id)])
            records = [self.records[check] for check, passed, _ in outcomes if check in self.records]
            student = self.packages.get(assignment.id)
            if any(passed is False for _, passed, _ in outcomes) and student is not None:
                result.diagnoses = diagnose(
                    module,
                    records,
                    lambda c, package, i, timeout=step.timeout, student=student: (
                        (package is student and self.hangs.skipped(c))
                        or observe(c, package, i, timeout, hangs=self.hangs.by_function)
                    ),
                    student,
                    step.tolerance,
                    reference=self.reference(assignment),
                )
                if self.plots is not None:
                    from autograder.publish.plots import (
                        save_pictures,
                    )  # late: not at the start of `pytest assignments/`

                    result.pictures = save_pictures(Path(self.plots), step.id, records)
                result.example = self.example(step, records, student)
            steps.append(result)
        return results.GradeResult(
            assignment=assignment.title,
            submission=str(self.submission_dir),
            steps=steps,
            steps_total=len(assignment.steps),
        )
