"""Run checks: observe (runs student code), judge (never does), and score each step.

    result = grade(Path("assignments"), config)                 # public checks only
    result = grade(path, config, reference=Path("solutions"))   # public + hidden checks

`observe` and `judge` only exchange plain data (the inputs and the observations), so they can
live in different processes; here, in-process, they run one after the other.
"""

import copy
import difflib
import random
import re
import signal
import threading
import time
import traceback
import types
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from autograder.engine import diagnosis, messages
from autograder.engine.check import Check, ContractError, Fail, judged
from autograder.engine.forbidden import package_files, reached_files, scan_source, scan_tampering, watching
from autograder.engine.results import CheckResult, GradeResult, StepResult
from autograder.engine.summary import summarise_text
from autograder.engine.submission import Package, SubmissionError, refused_files, staging


@dataclass
class Observation:
    """What running one check's student half produced: values, or the failure that stopped it."""

    values: dict = None
    error: Fail = None
    forbidden: tuple = ()  # forbidden calls the student code made while observing


class CheckTimeout(BaseException):
    """Raised inside student code when a check overruns its time limit (BaseException so that
    a bare `except Exception` in student code cannot swallow it)."""


@contextmanager
def time_limit(seconds):
    """Interrupt the block after `seconds` with CheckTimeout (main thread, POSIX; else no limit)."""
    usable = seconds and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise CheckTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_inputs(check, seed):
    """The check's inputs, made from a generator seeded for this check."""
    return check.inputs(torch.Generator().manual_seed(seed))


def check_seed(check, grading_seed=None):
    """Public checks: a fixed seed per check. Hidden checks: mixed with the grading seed."""
    base = zlib.crc32(f"{check.step}::{check.id}".encode())
    if check.visibility == "hidden" and grading_seed is not None:
        return (base * 1_000_003 + grading_seed) % (2**63)
    return base


def clone(inputs):
    """A private copy of the inputs, so student code that writes into them changes nothing else."""
    return copy.deepcopy(inputs)


def observe(check, student, inputs, timeout=None, forbidden=(), private=False):
    """Run the student half of `check` on a copy of `inputs` (on `inputs` itself if `private`:
    nobody else will use them); never raises for student faults.

    Calls listed in `forbidden` are recorded (see autograder/forbidden.py), not prevented."""
    seen = []
    try:
        with time_limit(timeout):
            copied = inputs if private else clone(inputs)  # outside the watch: grader work, not student code
            with watching(forbidden) as seen:
                values = check.observe(student, **copied)
        return Observation(values=values, forbidden=tuple(seen))
    except CheckTimeout as error:
        fail = Fail("timeout", {"seconds": timeout, "where": where(error, student)})
    except (Exception, SystemExit, KeyboardInterrupt) as error:  # noqa: BLE001 - student code
        fail = known_failure(error, student) or raised(error, student)
    return Observation(error=fail, forbidden=tuple(seen))


class HangGuard:
    """Remembers where student code has hung (a check overran its time limit), so that the later
    checks and probes that would run that code again are not run: one endless loop costs one
    time limit, not one per check, nor one per step that uses it. Shared by the executors
    (in-process and sandboxed) and the pytest route.

    The rule, for any step: a later check is skipped when the file it hung in (the timeout's
    `where`, the innermost student frame) is among the files the check runs: the files it
    declares (`files` on the check, else its step module's FILES), and every file of the
    submission they import. A check that does not reach that file still runs. Where the file is
    unknown (the worker overran its own alarm, or the file is not among what the hung check
    declares), the rest of the hung check's step is skipped, and nothing else. A step module
    with no FILES declares nothing: only a hang in its own step skips its checks.
    `root`: the directory holding the package(s), to follow the submission's imports."""

    def __init__(self, root=None):
        self.root = root
        self.hung = []  # [(the check that hung, its timeout Fail, the hung file or None, where)]
        self._files = {}  # package -> its sources (forbidden.package_files)
        self._runs = {}  # (check class, assignment, step, package) -> runs()

    def skipped(self, check) -> "Observation | None":
        """The Observation that stands for running `check` when code it runs has hung, else None."""
        for first, fail, file, location in self.hung:
            if first.assignment != check.assignment:
                continue
            reaches = file is not None and file in self.runs(check, file.split("/", 1)[0])
            if first.step == check.step and (file is None or reaches):
                return Observation(
                    error=Fail("skipped_after_hang", {**fail.params, "check": first.id or first.diagnosis})
                )
            if reaches:
                return Observation(
                    error=Fail(
                        "skipped_after_hang_elsewhere",
                        {
                            "seconds": fail.params.get("seconds"),
                            "where": location,
                            "check": first.id or first.diagnosis,
                            "step": first.step,
                        },
                    )
                )
        return None

    def note(self, check, observation: "Observation", location: "str | None" = None) -> bool:
        """Record `observation` of `check`; True if it is a new hang. A time limit that ran out
        in the grader's own code (no student frame) is not the student's hang. `location`: where
        the code was stuck ('mha/x.py, line 3, in f'), when the Fail's own `where` does not say."""
        error = observation.error
        location = location or (error.params.get("where") if error is not None else None)
        in_grader = location in {grader_frame(lang) for lang in messages.LANGUAGES}
        if error is None or error.message_id != "timeout" or in_grader:
            return False
        if self.skipped(check) is not None:
            return False
        match = re.match(r"(\S+\.py), line \d+, in ", str(location or ""))
        file = match.group(1) if match else None
        if file is not None and file not in self.runs(check, file.split("/", 1)[0]):
            file = None  # the check's declarations miss it (code reached some other way): its step only
        self.hung.append((check, error, file, location))
        return True

    def runs(self, check, package: str) -> set:
        """'<package>/<file name>' of every file `check` runs: what it declares, and what those
        import in the submission (subfolders flattened to the file's name, as `where` names it)."""
        key = (type(check), check.assignment, check.step, package)
        if key in self._runs:
            return self._runs[key]
        declared = getattr(check, "files", None)
        if declared is None:
            from autograder.engine.assignment import step_modules  # the checks import the runner

            declared = getattr(step_modules(check.assignment).get(check.step), "FILES", ())
        start = [f"{package}/{name}" for name in declared]
        if self.root is not None and package not in self._files:
            self._files[package] = package_files(Path(self.root) / package)
        files = self._files.get(package) or {}
        reached = reached_files(files, start) if files else start
        self._runs[key] = {f"{package}/{Path(name).name}" for name in [*start, *reached]}
        return self._runs[key]


def known_failure(error, student):
    """The Fail for the failures the grader expects from student code (the TODO still there, a
    broken file, code that misses the contract), or None for any other exception."""
    if isinstance(error, SubmissionError):
        return Fail(error.message_id, error.params)
    if isinstance(error, ContractError):
        return error.fail
    near = near_miss(error, student)
    if near is not None:
        return near
    if isinstance(error, NotImplementedError):
        return Fail("not_implemented", {"where": where(error, student)})
    return None


def near_miss(error, student):
    """Fail("near_miss") when the code lacks a name the grader calls and the student's class or
    module has a close spelling of it (`def foward(` for forward): said as such, not as "not
    implemented yet" or a bare AttributeError. None otherwise."""
    module = getattr(student, "_module", None)
    if module is None:
        return None
    package = module.__name__
    if isinstance(error, (NotImplementedError, TypeError)):
        # nn.Module's stand-in for a missing forward: it raises NotImplementedError, or, called
        # with keywords, a TypeError raised in the module's __call__ before it starts
        frame = innermost_frame(error)
        stand_in = "_forward_unimplemented"
        if frame is None or not (
            frame.f_code.co_name == stand_in
            or (isinstance(error, TypeError) and str(error).startswith(stand_in + "()"))
        ):
            return None
        owner, name = frame.f_locals.get("self"), "forward"
    elif isinstance(error, AttributeError) and isinstance(getattr(error, "name", None), str):
        owner, name = getattr(error, "obj", None), error.name
    else:
        return None
    if isinstance(owner, types.ModuleType):
        if not owner.__name__.startswith(package + "."):
            return None
        label = f"{Path(student._directory).name}/{owner.__name__.rsplit('.', 1)[-1]}.py"
        candidates = list(vars(owner))
    elif owner is not None:
        cls = owner if isinstance(owner, type) else type(owner)
        mine = [c for c in cls.__mro__ if c.__module__.startswith(package + ".")]
        if not mine:
            return None
        label = cls.__name__
        candidates = [attr for c in mine for attr in vars(c)] + list(getattr(owner, "__dict__", {}))
    else:
        return None
    close = difflib.get_close_matches(name, [c for c in candidates if not c.startswith("__")], n=1, cutoff=0.8)
    if not close or close[0] == name:
        return None
    return Fail("near_miss", {"owner": label, "name": name, "near": close[0], "where": where(error, student)})


def innermost_frame(error):
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return None if tb is None else tb.tb_frame


def raised(error, student):
    text = summarise_text(str(error)).strip()
    message = text.splitlines()[0][:300] if text else "(no message)"
    return Fail("raised", {"type": type(error).__name__, "message": message, "where": where(error, student)})


def grader_frame(lang: str | None = None) -> str:
    """The `where` of an error that no line of the submission raised, in the language spoken."""
    return messages.render("grader_frame", lang)


GRADER_FRAME = grader_frame("en")


def runs_simulated(config, simulate: bool = True) -> bool:
    """Whether some step of `config` (an Assignment) runs CUDA checks on the simulated device."""
    modules = config.step_modules()
    return any(
        device_mode(step, simulate)[0] == "simulated" and any(c.requires == "cuda" for c in modules[step.id].CHECKS)
        for step in config.steps
    )


def warm_up_grader(configs, simulate: bool = True) -> None:
    """Set up, outside any time limit, what a check would otherwise pay for under a student's time
    limit: the simulated CUDA device, whose FakeTensorMode imports torch._dynamo (about 0.7 s,
    seconds on a loaded machine; interrupted, it leaves a half-imported module behind). Only where
    a step of `configs` runs there: a quick local run without --cuda does not pay for it."""
    if any(runs_simulated(config, simulate) for config in configs):
        try:
            from autograder.engine.fake_cuda import Simulation

            Simulation.shared()
        except Exception:  # noqa: BLE001 - the cuda checks set it up themselves and report the reason
            pass


def where(error, student):
    """'mha/heads.py, line 12, in split_heads' for the innermost frame in the submission."""
    package_dir = getattr(student, "_directory", None)
    directory = str(package_dir or "")
    frames = traceback.extract_tb(error.__traceback__)
    inside = [f for f in frames if directory and f.filename.startswith(directory)]
    if not inside:
        return grader_frame()
    frame = inside[-1]
    return f"{Path(package_dir).name}/{Path(frame.filename).name}, line {frame.lineno}, in {frame.name}"


def expectation(check, inputs, reference):
    """What a correct solution observes: the check's oracle, or for a hidden check without one,
    the reference's observation."""
    if check.visibility == "hidden" and type(check).expected is Check.expected:
        return check.observe(reference, **clone(inputs))
    return check.expected(**clone(inputs))


def judge(check, inputs, observation, expected, tol, evidence=None):
    """None if the observation passes, else the Fail to report. Runs no student code.
    `evidence`: source_evidence(), to name the line of a forbidden call."""
    if observation.forbidden:
        call = observation.forbidden[0]
        if evidence and call in evidence:
            file, line = evidence[call]
            return Fail("forbidden_call_at", {"call": call, "step": check.step, "file": file, "line": line})
        return Fail("forbidden_call", {"call": call, "step": check.step})
    if observation.error is not None:
        return observation.error
    return judged(check, inputs, observation.values, expected, tol)


BLOCKED_BY = "blocked_by"  # a Fail parameter: the id of the step whose mistake keeps this check from a verdict


def not_checked(fail):
    """True for a judge's "no verdict": a check that could not run to the end here (as a check
    that needs a missing GPU), or one that cannot be judged until another step's code is fixed
    (blocked()). It carries no points either way."""
    return fail is not None and (fail.message_id == "not_checked" or blocked(fail))


def blocked(fail) -> bool:
    """True for a verdict that says "this cannot be judged while step X's code is wrong" (a Fail
    with the parameter BLOCKED_BY = X): the check waits on that step's fix. It counts as not
    checked: its share of the step's points is neither earned nor lost, but left out of the
    step's maximum (score_step), so the step and the total say how much is still to be judged."""
    return fail is not None and bool(fail.params.get(BLOCKED_BY))


def forbidden_in_source(module, step, student):
    """The first tampering in the files the step's code runs (its FILES and every file of the
    submission they import, subfolders included), as a Fail (or None). Forbidden calls are not
    decided here but at run time (see judge); source_evidence finds their lines."""
    directory = getattr(student, "_directory", None)
    if directory is None:
        return None
    files = package_files(directory)
    for file in reached_files(files, [f"{Path(directory).name}/{name}" for name in module.FILES]):
        tampering = scan_tampering(files[file])
        if tampering:
            what, line = tampering[0]
            return Fail("tampering", {"what": what, "file": file, "line": line})
    return None


def source_evidence(module, step, student):
    """{forbidden dotted name: (file, line)}: where the files the step runs name each forbidden
    call (the first place), to point the run-time report at a line."""
    directory = getattr(student, "_directory", None)
    if directory is None or not step.forbidden:
        return {}
    files = package_files(directory)
    evidence = {}
    for file in reached_files(files, [f"{Path(directory).name}/{name}" for name in module.FILES]):
        for call, line in scan_source(files[file], step.forbidden):
            evidence.setdefault(call, (file, line))
    return evidence


def refused_step_file(module, refused, package):
    """The Fail for the first of the step's files that staging refused (a link, say), or None."""
    for name in module.FILES:
        if f"{package}/{name}" in refused:
            reason_id, params = refused[f"{package}/{name}"]
            return Fail("refused_file", {"file": f"{package}/{name}", "reason": messages.render(reason_id, **params)})
    return None


def cuda_available():
    return torch.cuda.is_available()


def device_mode(step, simulate=True):
    """How a step's CUDA checks run here: ('real' | 'simulated', None), or (None, message id of
    the reason they are not checked). grading.yml: options.mode = auto | real | simulated | off.
    simulate=False leaves out the simulated device (a student's quick local run)."""
    mode = step.options.get("mode", "auto")
    if mode == "off":
        return None, "cuda_off"
    if mode == "real" or (mode == "auto" and cuda_available()):
        return ("real", None) if cuda_available() else (None, "no_cuda")
    return ("simulated", None) if simulate else (None, "cuda_on_request")


def mode_note(mode):
    """The message id that says which device graded a step."""
    if mode == "simulated":
        from autograder.engine.fake_cuda import simulated_device

        return "mode_simulated" if simulated_device() == "cuda" else "mode_meta"
    return "mode_real"


class InProcess:
    """Runs student code in this process (a student's own run, the kit's tests, --in-process)."""

    def __init__(self, submission, package):
        self.student, self.error = None, None
        try:
            self.student = Package.load(submission, package)
        except SubmissionError as error:
            self.error = Fail(error.message_id, error.params)
        self.layers = []
        self.hangs = HangGuard(submission)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def observe(self, tasks):
        """An iterator of one Observation per task, as RemoteExecutor.observe; the checks (and
        probes) of a step whose code has hung are not run again (HangGuard)."""
        for check, inputs, timeout, forbidden in tasks:
            observation = self.hangs.skipped(check)
            if observation is None:
                observation = observe(check, self.student, inputs, timeout, forbidden)
                self.hangs.note(check, observation)
            yield observation

    def output(self):
        return ""


def grade(
    submission, config, reference=None, seed=None, steps=None, isolate=False, memory_bytes=2 << 30, pictures=None
):
    """Grade the package of `submission` with the checks of `config` (an Assignment)'s steps.

    `submission`: a directory holding the package (e.g. mha/), a course notebook, or what
    submission.staged accepts. With `reference` (a directory holding the reference package),
    hidden checks run too, seeded
    with `seed` (random when None). With `isolate`, student code runs only in a sandboxed worker
    process (autograder/worker.py); otherwise in this one. `pictures(step_id, records) -> [path]`
    (routes/plots.py) draws what a failing step's checks can show. Never raises for student faults."""
    started = time.monotonic()
    with staging(submission, config.package) as staged_files:
        result = grade_package(staged_files.root, config, reference, seed, steps, isolate, memory_bytes, pictures)
    result.submission = str(submission)  # what was handed in; where in it the package was, and which files:
    result.package_root = None if staged_files.found is None else staged_files.found.relative_to(submission).as_posix()
    result.graded_files = staged_files.graded_files
    result.duration = time.monotonic() - started
    return result


def grade_package(submission, config, reference, seed, steps, isolate, memory_bytes, pictures=None):
    """grade() of a directory holding the package."""
    modules = config.step_modules()
    package = config.package
    hidden = reference is not None
    if hidden and seed is None:
        seed = random.SystemRandom().randrange(2**31)
    reference_package = load_reference(reference, package) if hidden else None
    package_error = None
    if not (Path(submission) / package).is_dir():
        package_error = Fail("missing_package", {"package": package, "path": str(submission)})
    if isolate:
        from autograder.engine.remote import RemoteExecutor

        executor = RemoteExecutor(submission, package, memory_bytes)
    else:
        warm_up_grader([config])
        executor = InProcess(submission, package)
        package_error = package_error or executor.error
    source = Package.unloaded(submission, package)
    refused = refused_files(submission, package)
    plans = []
    with executor:
        for step in config.steps:
            if steps and step.id not in steps:
                continue
            module = modules[step.id]
            checks = [c for c in module.CHECKS if hidden or c.visibility == "public"]
            in_source = (
                None
                if package_error
                else (refused_step_file(module, refused, package) or forbidden_in_source(module, step, source))
            )
            plan = {
                "step": step,
                "module": module,
                "outcomes": {},
                "tasks": [],
                "mode": None,
                "evidence": {} if package_error or in_source else source_evidence(module, step, source),
            }
            for check in checks:
                if check.requires == "cuda":
                    plan["mode"], reason = device_mode(step)
                    if plan["mode"] is None:
                        plan["outcomes"][check] = (None, Fail("not_checked", {"reason": messages.render(reason)}))
                        continue
                if package_error is not None or in_source is not None:
                    plan["outcomes"][check] = (False, package_error or in_source)
                    continue
                inputs = cached_inputs(
                    check, check_seed(check, seed), plan["mode"] if check.requires == "cuda" else None
                )
                plan["tasks"].append((check, inputs, step.timeout, step.forbidden))
            plans.append(plan)
        all_tasks = [task for plan in plans for task in plan["tasks"]]
        observations = executor.observe(all_tasks)  # judged one by one as the worker sends them
        for plan in plans:
            step, plan["records"] = plan["step"], []
            for check, inputs, _, _ in plan["tasks"]:
                observation = next(observations)
                # also for an error: the diagnosis judges the known mistakes on this check
                expected = None if observation.forbidden else cached_expectation(check, inputs, reference_package, seed)
                fail = judge(check, inputs, observation, expected, step.tolerance, plan["evidence"])
                plan["outcomes"][check] = (None if not_checked(fail) else fail is None, fail)
                plan["records"].append(
                    diagnosis.Record(check, inputs, observation, fail, check_seed(check, seed), expected)
                )
        results = []
        for plan in plans:  # every observation is in: the worker is free for the probes
            step, records = plan["step"], plan["records"]
            ordered = [c for c in plan["module"].CHECKS if c in plan["outcomes"]]
            result = score_step(step, [(c, *plan["outcomes"][c]) for c in ordered])
            if plan["mode"] is not None:
                result.mode = mode_note(plan["mode"])
            if package_error is None:
                result.diagnoses = diagnosis.diagnose(
                    plan["module"],
                    records,
                    lambda check, package, inputs, timeout=step.timeout: (
                        next(executor.observe([(check, inputs, timeout, ())]))
                        if package is None
                        else observe(check, package, inputs, timeout)
                    ),
                    None,
                    step.tolerance,
                    reference=reference if hidden else None,
                )
            if pictures is not None and result.score < result.max_score:
                result.pictures = pictures(step.id, records)
            results.append(result)
        output = executor.output()
    return GradeResult(
        assignment=messages.title(f"assignment_title.{config.id}", config.title),
        submission=str(submission),
        steps=results,
        seed=seed,
        output=output,
        sandbox=list(executor.layers),
    )


_inputs = {}
_expectations = {}
_cache_lock = threading.Lock()


def cached_inputs(check, seed, mode=None):
    """check_inputs() (plus the device `mode` of a cuda check), made once per check and seed:
    every submission of a batch shares them. Read-only: observe() copies them."""
    key = (check.assignment, check.step, check.id, seed, mode)
    with _cache_lock:
        if key not in _inputs:
            if len(_inputs) > 5_000:  # many seeds in one process (the kit's tests)
                _inputs.clear()
            inputs = check_inputs(check, seed)
            if mode is not None:
                inputs["mode"] = mode
            _inputs[key] = inputs
        return _inputs[key]


def cached_expectation(check, inputs, reference, seed):
    """expectation(), computed once per check and seed: every submission of a batch shares it."""
    key = (check.assignment, check.step, check.id, check_seed(check, seed), id(reference), inputs.get("mode"))
    with _cache_lock:
        if key not in _expectations:
            _expectations[key] = expectation(check, inputs, reference)
        return _expectations[key]


_references = {}


def load_reference(directory, package):
    """The reference package under the name `<package>_reference`, loaded once per process."""
    key = Path(directory).resolve(), package
    if key not in _references:
        _references.clear()
        _references[key] = Package.load(key[0], package, name=f"{package}_reference")
    return _references[key]


def score_step(step, outcomes):
    """Turn (check, passed, fail) triples into a StepResult using the step's points and weights.

    passed is None for a check that could not run here (e.g. no GPU): it carries no points
    either way, and a step whose checks all could not run is reported as not checked. A check
    blocked by another step's mistake (blocked()) also carries no points, and its share is left
    out of the step's maximum: the others keep the share they have when every check counts."""
    counted = [(c, p, f) for c, p, f in outcomes if p is not None]
    waiting = [(c, p, f) for c, p, f in outcomes if p is None and blocked(f)]
    total_weight = sum(step.weights.get(c.id, c.weight) for c, _, _ in counted + waiting)
    all_passed = all(p for _, p, _ in counted)
    checks = []
    for check, passed, fail in outcomes:
        share = 0.0
        if passed is not None and total_weight > 0:
            share = step.points * step.weights.get(check.id, check.weight) / total_weight
        earned = share if passed and (all_passed or not step.all_or_nothing) else 0.0
        message = "" if fail is None else messages.render(fail.message_id, **fail.params)
        checks.append(
            CheckResult(
                id=check.id,
                passed=passed,
                points=earned,
                max_points=share,
                visibility=check.visibility,
                message=message,
                message_id=None if fail is None else fail.message_id,
            )
        )
    status = "graded"
    if not counted and outcomes:
        status = "not_checked"
    elif counted and all(f is not None and f.message_id == "not_implemented" for _, _, f in counted):
        status = "not_implemented"
    max_score = round(sum(c.max_points for c in checks), 9) if counted and waiting else step.points if counted else 0.0
    return StepResult(
        id=step.id,
        title=step.title,
        score=round(sum(c.points for c in checks), 9),
        max_score=max_score,
        checks=checks,
        status=status,
    )
