"""Run checks: observe (runs student code), judge (never does), and score each step.

    result = grade(Path("assignments"), config)                 # public checks only
    result = grade(path, config, reference=Path("solutions"))   # public + hidden checks

`observe` and `judge` only exchange plain data (the inputs and the observations), so they can
live in different processes; here, in-process, they run one after the other.
"""
import copy
import random
import signal
import threading
import traceback
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from . import diagnosis, messages
from .check import Check, ContractError, Fail, judged
from .checks import step_modules
from .forbidden import package_files, reached_files, scan_source, scan_tampering, watching
from .results import CheckResult, GradeResult, StepResult
from .submission import Package, SubmissionError, refused_files, staged


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


def observe(check, mha, inputs, timeout=None, forbidden=(), private=False):
    """Run the student half of `check` on a copy of `inputs` (on `inputs` itself if `private`:
    nobody else will use them); never raises for student faults.

    Calls listed in `forbidden` are recorded (see autograder/forbidden.py), not prevented."""
    seen = []
    try:
        with time_limit(timeout), watching(forbidden) as seen:
            values = check.observe(mha, **(inputs if private else clone(inputs)))
        return Observation(values=values, forbidden=tuple(seen))
    except CheckTimeout as error:
        fail = Fail("timeout", {"seconds": timeout, "where": where(error, mha)})
    except (Exception, SystemExit, KeyboardInterrupt) as error:  # noqa: BLE001 - student code
        fail = known_failure(error, mha) or raised(error, mha)
    return Observation(error=fail, forbidden=tuple(seen))


def known_failure(error, mha):
    """The Fail for the failures the grader expects from student code (the TODO still there, a
    broken file, code that misses the contract), or None for any other exception."""
    if isinstance(error, SubmissionError):
        return Fail(error.message_id, error.params)
    if isinstance(error, ContractError):
        return error.fail
    if isinstance(error, NotImplementedError):
        return Fail("not_implemented", {"where": where(error, mha)})
    return None


def raised(error, mha):
    message = str(error).strip().splitlines()[0][:300] if str(error).strip() else "(no message)"
    return Fail("raised", {"type": type(error).__name__, "message": message, "where": where(error, mha)})


def where(error, mha):
    """'mha/heads.py, line 12, in split_heads' for the innermost frame in the submission."""
    directory = str(getattr(mha, "_directory", ""))
    frames = traceback.extract_tb(error.__traceback__)
    inside = [f for f in frames if directory and f.filename.startswith(directory)]
    if not inside:
        return "called from the grader"
    frame = inside[-1]
    return f"mha/{Path(frame.filename).name}, line {frame.lineno}, in {frame.name}"


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


def not_checked(fail):
    """True for a judge's "no verdict" (a check that could not run to the end here): it carries no
    points either way, as a check that needs a missing GPU."""
    return fail is not None and fail.message_id == "not_checked"


def forbidden_in_source(module, step, mha):
    """The first tampering in the files the step's code runs (its FILES and every file of the
    submission they import, subfolders included), as a Fail (or None). Forbidden calls are not
    decided here but at run time (see judge); source_evidence finds their lines."""
    directory = getattr(mha, "_directory", None)
    if directory is None:
        return None
    files = package_files(directory)
    for file in reached_files(files, [f"mha/{name}" for name in module.FILES]):
        tampering = scan_tampering(files[file])
        if tampering:
            what, line = tampering[0]
            return Fail("tampering", {"what": what, "file": file, "line": line})
    return None


def source_evidence(module, step, mha):
    """{forbidden dotted name: (file, line)}: where the files the step runs name each forbidden
    call (the first place), to point the run-time report at a line."""
    directory = getattr(mha, "_directory", None)
    if directory is None or not step.forbidden:
        return {}
    files = package_files(directory)
    evidence = {}
    for file in reached_files(files, [f"mha/{name}" for name in module.FILES]):
        for call, line in scan_source(files[file], step.forbidden):
            evidence.setdefault(call, (file, line))
    return evidence


def refused_step_file(module, refused):
    """The Fail for the first of the step's files that staging refused (a link, say), or None."""
    for name in module.FILES:
        if f"mha/{name}" in refused:
            reason_id, params = refused[f"mha/{name}"]
            return Fail("refused_file", {"file": f"mha/{name}", "reason": messages.render(reason_id, **params)})
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
        from .fake_cuda import simulated_device
        return "mode_simulated" if simulated_device() == "cuda" else "mode_meta"
    return "mode_real"


class InProcess:
    """Runs student code in this process (a student's own run, the kit's tests, --in-process)."""

    def __init__(self, submission):
        self.mha, self.error = None, None
        try:
            self.mha = Package.load(submission)
        except SubmissionError as error:
            self.error = Fail(error.message_id, error.params)
        self.layers = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def observe(self, tasks):
        """An iterator of one Observation per task, as Worker.observe."""
        return (observe(check, self.mha, inputs, timeout, forbidden) for check, inputs, timeout, forbidden in tasks)

    def output(self):
        return ""


def grade(submission, config, reference=None, seed=None, steps=None, isolate=False, memory_bytes=2 << 30):
    """Grade the `mha` package of `submission` with the checks of `config`'s steps.

    `submission`: a directory holding mha/, a course notebook, or what submission.staged accepts.
    With `reference` (a directory holding the reference `mha`), hidden checks run too, seeded
    with `seed` (random when None). With `isolate`, student code runs only in a sandboxed worker
    process (autograder/worker.py); otherwise in this one. Never raises for student faults."""
    with staged(submission) as root:
        result = grade_package(root, config, reference, seed, steps, isolate, memory_bytes)
    result.submission = str(submission)
    return result


def grade_package(submission, config, reference, seed, steps, isolate, memory_bytes):
    """grade() of a directory holding mha/."""
    modules = step_modules()
    hidden = reference is not None
    if hidden and seed is None:
        seed = random.SystemRandom().randrange(2**31)
    reference_package = load_reference(reference) if hidden else None
    package_error = None
    if not (Path(submission) / "mha").is_dir():
        package_error = Fail("missing_package", {"path": str(submission)})
    if isolate:
        from .worker import Worker
        executor = Worker(submission, memory_bytes)
    else:
        executor = InProcess(submission)
        package_error = package_error or executor.error
    source = Package.unloaded(submission)
    refused = refused_files(submission)
    plans = []
    with executor:
        for step in config.steps:
            if steps and step.id not in steps:
                continue
            module = modules[step.id]
            checks = [c for c in module.CHECKS if hidden or c.visibility == "public"]
            in_source = None if package_error else (refused_step_file(module, refused)
                                                    or forbidden_in_source(module, step, source))
            plan = {"step": step, "module": module, "outcomes": {}, "tasks": [], "mode": None,
                    "evidence": {} if package_error or in_source else source_evidence(module, step, source)}
            for check in checks:
                if check.requires == "cuda":
                    plan["mode"], reason = device_mode(step)
                    if plan["mode"] is None:
                        plan["outcomes"][check] = (None, Fail("not_checked", {"reason": messages.render(reason)}))
                        continue
                if package_error is not None or in_source is not None:
                    plan["outcomes"][check] = (False, package_error or in_source)
                    continue
                inputs = cached_inputs(check, check_seed(check, seed), plan["mode"] if check.requires == "cuda" else None)
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
                plan["records"].append(diagnosis.Record(check, inputs, observation, fail, check_seed(check, seed),
                                                           expected))
        results = []
        for plan in plans:  # every observation is in: the worker is free for the probes
            step, records = plan["step"], plan["records"]
            ordered = [c for c in plan["module"].CHECKS if c in plan["outcomes"]]
            result = score_step(step, [(c, *plan["outcomes"][c]) for c in ordered])
            if plan["mode"] is not None:
                result.mode = mode_note(plan["mode"])
            if package_error is None:
                result.diagnoses = diagnosis.diagnose(
                    plan["module"], records,
                    lambda check, package, inputs, timeout=step.timeout: (
                        next(executor.observe([(check, inputs, timeout, ())])) if package is None
                        else observe(check, package, inputs, timeout)),
                    None, step.tolerance, reference=reference if hidden else None)
            results.append(result)
        output = executor.output()
    return GradeResult(assignment=config.assignment, submission=str(submission), steps=results,
                       seed=seed, output=output, sandbox=list(executor.layers))


_inputs = {}
_expectations = {}
_cache_lock = threading.Lock()


def cached_inputs(check, seed, mode=None):
    """check_inputs() (plus the device `mode` of a cuda check), made once per check and seed:
    every submission of a batch shares them. Read-only: observe() copies them."""
    key = (check.step, check.id, seed, mode)
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
    key = (check.step, check.id, check_seed(check, seed), id(reference), inputs.get("mode"))
    with _cache_lock:
        if key not in _expectations:
            _expectations[key] = expectation(check, inputs, reference)
        return _expectations[key]


_references = {}


def load_reference(directory):
    """The reference `mha` under the package name `mha_reference`, loaded once per process."""
    directory = Path(directory).resolve()
    if directory not in _references:
        _references.clear()
        _references[directory] = Package.load(directory, name="mha_reference")
    return _references[directory]


def score_step(step, outcomes):
    """Turn (check, passed, fail) triples into a StepResult using the step's points and weights.

    passed is None for a check that could not run here (e.g. no GPU): it carries no points
    either way, and a step whose checks all could not run is reported as not checked."""
    counted = [(c, p, f) for c, p, f in outcomes if p is not None]
    total_weight = sum(step.weights.get(c.id, c.weight) for c, _, _ in counted)
    all_passed = all(p for _, p, _ in counted)
    checks = []
    for check, passed, fail in outcomes:
        share = 0.0
        if passed is not None and total_weight > 0:
            share = step.points * step.weights.get(check.id, check.weight) / total_weight
        earned = share if passed and (all_passed or not step.all_or_nothing) else 0.0
        message = "" if fail is None else messages.render(fail.message_id, **fail.params)
        checks.append(CheckResult(id=check.id, passed=passed, points=earned, max_points=share,
                                  visibility=check.visibility, message=message,
                                  message_id=None if fail is None else fail.message_id))
    status = "graded"
    if not counted and outcomes:
        status = "not_checked"
    elif counted and all(f is not None and f.message_id == "not_implemented" for _, _, f in counted):
        status = "not_implemented"
    max_score = step.points if counted else 0.0
    return StepResult(id=step.id, title=step.title, score=round(sum(c.points for c in checks), 9),
                      max_score=max_score, checks=checks, status=status)
