"""Run checks: observe (runs student code), judge (never does), and score each step.

    result = grade(Path("assignments"), config)                 # public checks only
    result = grade(path, config, reference=Path("solutions"))   # public + hidden checks

Student code runs in the harness (autograder/harness/): in a sandboxed worker (`isolate`,
engine/remote.py) or in this process (a student's own run). Either way what it reports is read
against the judge's own facts (engine/observation.py) before anything is judged: the two halves
only exchange plain data, the inputs and the observations.
"""

import copy
import functools
import threading
import time
import zlib
from pathlib import Path

import torch

from autograder.engine import diagnosis, feedback, messages
from autograder.engine.check import Check, Fail, judged
from autograder.engine.forbidden import package_files, reached_files, scan_source, scan_tampering
from autograder.engine.observation import Facts, Hang, Observation, read_report
from autograder.engine.results import GradeResult, StepResult, CheckResult
from autograder.engine.submission import Staging, StagingError, refused_files, staging
from autograder.engine.text import printable
from autograder.harness import observe as harness
from autograder.harness.package import Package, SubmissionError

__all__ = ["Observation", "grade", "observe"]  # Observation: engine/observation.py, re-exported for callers


def check_inputs(check, seed):
    """The check's inputs, made from a generator seeded for this check."""
    return check.inputs(torch.Generator().manual_seed(seed))


def default_seed(config) -> int:
    """The hidden checks' seed when a grading gives none: grading.yml's `defaults.seed`, else one
    made from the assignment id. Fixed, so every run and every route draws the same hidden inputs
    (a random one made a grade depend on chance: a mistake that shows only at some sizes)."""
    if config.seed is not None:
        return config.seed
    return zlib.crc32(f"mha-lab/{config.id}".encode()) % (2**31)


def check_seed(check, grading_seed=None):
    """Public checks: a fixed seed per check. Hidden checks: mixed with the grading seed."""
    base = zlib.crc32(f"{check.step}::{check.id}".encode())
    if check.visibility == "hidden" and grading_seed is not None:
        return (base * 1_000_003 + grading_seed) % (2**63)
    return base


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


def grader_frame(lang: str | None = None) -> str:
    """The `where` of an error that no line of the submission raised, in the language spoken."""
    return messages.render("grader_frame", lang)


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


def runs_simulated(config, simulate: bool = True) -> bool:
    """Whether some step of `config` (an Assignment) runs CUDA checks on the simulated device."""
    modules = config.step_modules()
    return any(
        device_mode(step, simulate)[0] == "simulated" and any(c.requires == "cuda" for c in modules[step.id].CHECKS)
        for step in config.steps
    )


def runs_real(config, steps=None) -> bool:
    """Whether some step of `config` (of `steps`, if given) runs CUDA checks on a real GPU here."""
    modules = config.step_modules()
    return any(
        device_mode(step)[0] == "real" and any(c.requires == "cuda" for c in modules[step.id].CHECKS)
        for step in config.steps
        if not steps or step.id in steps
    )


def warm_up_grader(configs, simulate: bool = True) -> None:
    """Set up, outside any time limit, what a check would otherwise pay for under a student's time
    limit: the simulated CUDA device, whose FakeTensorMode imports torch._dynamo (about 0.7 s,
    seconds on a loaded machine; interrupted, it leaves a half-imported module behind). Only where
    a step of `configs` runs there: a quick local run without --cuda does not pay for it."""
    if any(runs_simulated(config, simulate) for config in configs):
        try:
            from autograder.harness.fake_cuda import Simulation  # torch._dynamo: only where it is used

            Simulation.shared()
        except Exception:  # noqa: BLE001 - the cuda checks set it up themselves and report the reason
            pass


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
    """True for the judge's "not checked on this machine": a check that needs what the grading
    machine lacks (a GPU, or the simulated device a quick local run leaves out). It is the only
    outcome without a verdict, and it is the same for every submission graded there."""
    return fail is not None and fail.message_id == "not_checked"


BLOCKED_BY = "blocked_by"  # a Fail parameter: the id of the step whose mistake keeps this check from a verdict


def blocked(fail) -> bool:
    """True for a failure that says "this cannot be judged while step X's code is wrong" (a Fail
    with the parameter BLOCKED_BY = X). It scores nothing and stays in the step's maximum: a
    check never leaves the maximum because of what the student's code does."""
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
        from autograder.harness.fake_cuda import simulated_device  # torch._dynamo: only where it is used

        return "mode_simulated" if simulated_device() == "cuda" else "mode_meta"
    return "mode_real"


class InProcess:
    """Runs student code in this process (a student's own run, the kit's tests, --in-process),
    within the submission's time budget, stopping at once in a function that hung before."""

    def __init__(self, submission, package, budget: float = None):
        self.student, self.error = None, None
        try:
            self.student = Package.load(submission, package)
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


def grade(
    submission, config, reference=None, seed=None, steps=None, isolate=False, memory_bytes=2 << 30, pictures=None
):
    """Grade the package of `submission` with the checks of `config` (an Assignment)'s steps.

    `submission`: a directory holding the package (e.g. mha/), a course notebook, or what
    submission.staged accepts. With `reference` (a directory holding the reference package),
    hidden checks run too, seeded
    with `seed` (random when None). With `isolate`, student code runs only in a sandboxed worker
    process (autograder/sandbox/worker_process.py); otherwise in this one. `pictures(step_id, records) -> [path]`
    (routes/plots.py) draws what a failing step's checks can show. Never raises for student faults."""
    started = time.monotonic()
    try:
        with staging(submission, config.package) as staged_files:
            package_files(Path(staged_files.root) / config.package)  # within staging's limits, or StagingError
            result = grade_package(staged_files.root, config, reference, seed, steps, isolate, memory_bytes, pictures)
    except StagingError as error:  # this submission alone: every step says why, the batch goes on
        result = refused(config, Fail(error.message_id, error.params), steps, seed)
        staged_files = Staging(Path(submission))
    # What was handed in, where in it the package was, and which files: names a student chose
    # (a folder, a file, a notebook), so written out printable wherever they are shown.
    result.submission = printable(str(submission))
    found = staged_files.found
    result.package_root = None if found is None else printable(found.relative_to(submission).as_posix())
    result.graded_files = [printable(name) for name in staged_files.graded_files]
    result.duration = time.monotonic() - started
    return result


def refused(config, fail, steps=None, seed=None) -> GradeResult:
    """The result of a submission staging would not take: every check of every step fails with
    `fail` (scored against the full maximum)."""
    modules = config.step_modules()
    results = [
        score_step(step, [(check, False, fail) for check in modules[step.id].CHECKS if check.visibility == "public"])
        for step in config.steps
        if not steps or step.id in steps
    ]
    title = messages.title(f"assignment_title.{config.id}", config.title)
    return GradeResult(assignment=title, submission="", steps=results, seed=seed)


def grade_package(submission, config, reference, seed, steps, isolate, memory_bytes, pictures=None):
    """grade() of a directory holding the package."""
    modules = config.step_modules()
    package = config.package
    hidden = reference is not None
    if hidden and seed is None:
        seed = default_seed(config)
    reference_package = load_reference(reference, package) if hidden else None
    package_error = None
    if not (Path(submission) / package).is_dir():
        package_error = Fail("missing_package", {"package": package, "path": str(submission)})
    real_gpu = runs_real(config, steps)
    if isolate:
        from autograder.engine.remote import RemoteExecutor  # the sandbox: not in a student's own run

        executor = RemoteExecutor(submission, config.id, package, memory_bytes, config.budget, gpu=real_gpu)
    else:
        warm_up_grader([config])
        executor = InProcess(submission, package, config.budget)
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
                    if plan["mode"] == "real" and isolate and not executor.has_gpu():
                        plan["mode"], reason = None, "worker_no_cuda"  # the machine's, not the student's
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
            if package_error is None and result.score < result.max_score:  # a public check's smallest failing input
                result.example = feedback.first_example(
                    records,
                    lambda check, inputs, timeout=step.timeout: next(executor.observe([(check, inputs, timeout, ())])),
                    step.tolerance,
                )
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

    The step's maximum is its points, for every submission: a failed check, one blocked by
    another step's mistake, one that ran out of time or budget, all stay in it and score
    nothing. Only a check the grading machine cannot run (passed is None: no GPU) carries no
    points either way; a step whose checks all could not run is reported as not checked (its
    maximum is 0 for every submission graded on that machine)."""
    counted = [(c, p, f) for c, p, f in outcomes if p is not None]
    total_weight = sum(step.weights.get(c.id, c.weight) for c, _, _ in counted)
    all_passed = all(p for _, p, _ in counted)
    checks = []
    for check, passed, fail in outcomes:
        share = 0.0
        if passed is not None and total_weight > 0:
            share = step.points * step.weights.get(check.id, check.weight) / total_weight
        earned = share if passed and (all_passed or not step.all_or_nothing) else 0.0
        message = "" if fail is None else printable(messages.render(fail.message_id, **fail.params))
        checks.append(
            CheckResult(
                id=check.id,
                passed=passed,
                points=earned,
                max_points=share,
                visibility=check.visibility,
                message=message,
                message_id=None if fail is None else fail.message_id,
                params=None if fail is None else dict(fail.params),
            )
        )
    status = "graded"
    if not counted and outcomes:
        status = "not_checked"
    elif counted and all(f is not None and f.message_id == "not_implemented" for _, _, f in counted):
        status = "not_implemented"
    return StepResult(
        id=step.id,
        title=step.title,
        score=round(sum(c.points for c in checks), 9),
        max_score=step.points if counted else 0.0,
        checks=checks,
        status=status,
    )
