"""The plan stage: what each step will run, decided before any student code runs.

    run = plan_step(step, module, grading)   # a StepRun: its tasks, and the outcomes known already

A step's checks are decided here when they need no run: its files refused by staging or
tampered with (a fail for every check), its CUDA checks where this machine has no device (not
checked). The rest become tasks, with inputs drawn from a seed per check (hidden checks: mixed
with the grading seed), made once per check and seed for a whole batch.
"""

import importlib
import threading
import zlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import NamedTuple

import torch

from autograder.engine.checks import messages
from autograder.engine.checks.check import Check, Fail
from autograder.engine.course.secret import hidden_seed, read_secret
from autograder.engine.scan.forbidden import OutOfTime


class Task(NamedTuple):
    """One check to observe, as an executor takes it (in_process.InProcess, remote.RemoteExecutor)."""

    check: Check
    inputs: dict
    timeout: float | None
    forbidden: tuple


@dataclass
class StepRun:
    """One step as it goes through the stages of runner.grade_package."""

    step: object
    """The step's configuration (config.Step): points, tolerance, timeout, forbidden names."""
    module: ModuleType
    """The step's check module (assignments/<id>/checks/<step>.py): CHECKS, FILES."""
    evidence: dict = field(default_factory=dict)
    """{forbidden dotted name: (file, line)}: where the step's files name a forbidden call."""
    mode: str | None = None
    """How its CUDA checks run here: 'real', 'simulated', or None (none run)."""
    outcomes: dict = field(default_factory=dict)
    """{check: (passed, Fail or None)}, passed None where the check is not checked here."""
    tasks: list = field(default_factory=list)
    """The Tasks to observe, in the order of the step's checks."""
    records: list = field(default_factory=list)
    """diagnosis.Record of each observed task: what the diagnosis and the examples read."""
    public_diagnoses: list = field(default_factory=list)
    """The diagnoses of the public records alone (runner.explain_public): what a student may read."""
    example: object = None
    """The smallest failing input of a public check (example.Example), or None."""
    pictures: list = field(default_factory=list)
    """The pictures of its failing public checks, drawn in the public phase (runner.explain_public)."""
    probed: dict = field(default_factory=dict)
    """{probe check: its Observation}: each probe of the submission runs once per step."""


def check_inputs(check, seed):
    """The check's inputs, made from a generator seeded for this check."""
    return check.inputs(torch.Generator().manual_seed(seed))


def default_seed(config) -> int:
    """The hidden checks' seed when a grading gives none (seed_source)."""
    return seed_source(config)[0]


def seed_source(config) -> tuple:
    """(the hidden checks' seed when a grading gives none, where it comes from): grading.yml's
    `defaults.seed` ("grading.yml"), else the course secret's keyed hash of the assignment id
    ("secret": course/secret.py), else a checksum of the assignment id ("public": the same in
    every course that uses the kit; `grade` warns). Fixed, so every run and every route of one
    course draws the same hidden inputs (a random one made a grade depend on chance: a mistake
    that shows only at some sizes)."""
    if config.seed is not None:
        return config.seed, "grading.yml"
    secret = read_secret()
    if secret is not None:
        return hidden_seed(secret, config.id), "secret"
    return zlib.crc32(f"mha-lab/{config.id}".encode()) % (2**31), "public"


def check_seed(check, grading_seed=None):
    """Public checks: a fixed seed per check. Hidden checks: mixed with the grading seed."""
    base = zlib.crc32(f"{check.step}::{check.id}".encode())
    if check.visibility == "hidden" and grading_seed is not None:
        return (base * 1_000_003 + grading_seed) % (2**63)
    return base


class InputCache:
    """check_inputs() (plus the device `mode` of a cuda check), made once per check and seed:
    every submission of a batch shares them. Read-only: observing copies them."""

    def __init__(self, limit: int = 5_000):
        self.limit = limit  # many seeds in one process (the kit's tests)
        self.made = {}
        self.lock = threading.Lock()

    def __call__(self, check, seed, mode=None):
        key = (check.assignment, check.step, check.id, seed, mode)
        with self.lock:
            if key not in self.made:
                if len(self.made) > self.limit:
                    self.made.clear()
                inputs = check_inputs(check, seed)
                if mode is not None:
                    inputs["mode"] = mode
                self.made[key] = inputs
            return self.made[key]


cached_inputs = InputCache()


def every_forbidden(config) -> set:
    """The forbidden dotted names of every step of `config` (what a SourceScan is made for)."""
    return {name for step in config.steps for name in step.forbidden}


def forbidden_in_source(module, step, scan):
    """The first tampering in the files the step's code runs (its FILES and every file of the
    submission they import, subfolders included), as a Fail (or None), read from `scan` (the
    submission's forbidden.SourceScan: each file parsed once for all its steps). Where the
    submission's budget runs out while scanning, the Fail says so. Forbidden calls are not
    decided here but at run time (verdict.judge); source_evidence finds their lines."""
    if scan is None:
        return None
    try:
        for file in scan.reached(module.FILES):
            tampering = scan.tampering(file)
            if tampering:
                what, line = tampering[0]
                return Fail("tampering", {"what": what, "file": file, "line": line})
    except OutOfTime:
        return Fail("budget_spent", {"seconds": scan.budget.seconds})
    return None


def source_evidence(module, step, scan):
    """{forbidden dotted name: (file, line)}: where the files the step runs name each forbidden
    call (the first place), to point the run-time report at a line (what the budget left time
    to read)."""
    evidence = {}
    if scan is None or not step.forbidden:
        return evidence
    try:
        for file in scan.reached(module.FILES):
            for call, line in scan.calls(file, step.forbidden):
                evidence.setdefault(call, (file, line))
    except OutOfTime:
        pass
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


_WARMED = set()  # assignments whose own warm-up ran in this process


def warm_up_assignment(config) -> None:
    """Run the assignment's own warm-up (autograder/assignments/<id>/warmup.py) once in this
    process, outside any time limit, as the sandbox's worker server does (harness/serve.py). For
    in-process grading with the hidden checks: their first use of an op that loads a library (a
    triu on 'meta' loads PyTorch's decompositions: 8 s on a loaded machine) would otherwise be
    paid under a check's time limit, and charged. Not in a student's own run (it has no hidden
    checks), whose loop stays quick."""
    if config.id in _WARMED:
        return
    _WARMED.add(config.id)
    try:
        module = importlib.import_module(f"autograder.assignments.{config.id}.warmup")
        module.warm_up(None)
    except Exception:  # noqa: BLE001 - a warm-up only saves time
        pass


def plan_step(step, module, grading) -> StepRun:
    """The StepRun of `step` (its check module `module`) in `grading` (runner.Grading): the
    outcomes decided without a run, and a Task for each check that needs one."""
    package_error = grading.package_error
    in_source = None
    if package_error is None:
        in_source = refused_step_file(module, grading.refused, grading.package) or forbidden_in_source(
            module, step, grading.scan
        )
    run = StepRun(step, module)
    if package_error is None and in_source is None:
        run.evidence = source_evidence(module, step, grading.scan)
    for check in module.CHECKS:
        if not grading.hidden and check.visibility != "public":
            continue
        if check.requires == "cuda":
            run.mode, reason = device_mode(step)
            if run.mode == "real" and grading.isolate and not grading.executor.has_gpu():
                run.mode, reason = None, "worker_no_cuda"  # the machine's, not the student's
            if run.mode is None:
                run.outcomes[check] = (None, Fail("not_checked", {"reason": messages.render(reason)}))
                continue
        if package_error is not None or in_source is not None:
            run.outcomes[check] = (False, package_error or in_source)
            continue
        inputs = cached_inputs(check, check_seed(check, grading.seed), run.mode if check.requires == "cuda" else None)
        run.tasks.append(Task(check, inputs, step.timeout, step.forbidden))
    return run
