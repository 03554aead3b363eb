"""Grade a submission: plan -> observe -> judge -> score -> explain, one small stage each.

    result = grade(Path("assignments"), config)                 # public checks only
    result = grade(path, config, reference=Path("solutions"))   # public + hidden checks

Student code runs in the harness (autograder/harness/): in a sandboxed worker (`isolate`,
remote.py) or in this process (in_process.py: a student's own run). Either way what it reports
is read against the judge's own facts (observation.py) before anything is judged: the two halves
only exchange plain data, the inputs and the observations. The stages, in the order they run:

    plan.plan_step        what each step runs; outcomes known without a run (plan.py)
    observe               every step's tasks, in one stream from the executor
    judge                 each observation against its expectation, as it arrives (verdict.py)
    score                 each step's points (score.py)
    explain               the likely mistake, pictures, the smallest failing input
"""

import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder.engine.checks import messages
from autograder.engine.checks.check import Fail
from autograder.engine.checks.text import printable
from autograder.engine.judge import example, kept_code
from autograder.engine.judge.budget import Budget
from autograder.engine.judge.in_process import InProcess, observe
from autograder.engine.judge.plan import (
    check_seed,
    default_seed,
    every_forbidden,
    mode_note,
    plan_step,
    runs_real,
    warm_up_assignment,
    warm_up_grader,
)
from autograder.engine.judge.results import GradeResult
from autograder.engine.judge.score import refused, score_step
from autograder.engine.judge.verdict import (
    cached_expectation,
    charged_forbidden,
    judge,
    load_reference,
    not_checked,
)
from autograder.engine.mistakes import diagnosis
from autograder.engine.scan.forbidden import SourceScan, package_files
from autograder.engine.scan.submission import Staging, StagingError, refused_files, staging, submission_files
from autograder.harness import phases

__all__ = ["grade"]


def grade(
    submission,
    config,
    reference=None,
    seed=None,
    steps=None,
    isolate=False,
    memory_bytes=2 << 30,
    pictures=None,
    keep_code=False,
):
    """Grade the package of `submission` with the checks of `config` (an Assignment)'s steps.

    `submission`: a directory holding the package (e.g. mha/), a course notebook, or what
    submission.staging accepts. With `reference` (a directory holding the reference package),
    hidden checks run too, seeded with `seed` (plan.default_seed when None). With `isolate`,
    student code runs only in a sandboxed worker process (autograder/sandbox/worker_process.py);
    otherwise in this one. `pictures(step_id, records) -> [path]` (publish/plots.py) draws what a
    failing step's checks can show. With `keep_code`, the result's `code` is what grading took of
    the package (kept_code.keep: for the class report, which never reads the submission again).
    Never raises for student faults."""
    started = time.monotonic()
    phases.begin()  # CPU per phase, where a benchmark asks for it (harness/phases.py)
    try:
        with staging(submission, config.package) as staged_files:
            package_files(Path(staged_files.root) / config.package)  # within staging's limits, or StagingError
            with phases.phase("other"):
                result = grade_package(
                    staged_files.root, config, reference, seed, steps, isolate, memory_bytes, pictures
                )
            if keep_code:
                with phases.phase("scoring and results"):
                    result.code = kept_code.keep(submission_files(staged_files.root, config.package))
    except StagingError as error:  # this submission alone: every step says why, the batch goes on
        result = refused(config, Fail(error.message_id, error.params), steps, seed)
        staged_files = Staging(Path(submission))
        result.code = kept_code.keep({}) if keep_code else None  # nothing was taken
    # What was handed in, where in it the package was, and which files: names a student chose
    # (a folder, a file, a notebook), so written out printable wherever they are shown.
    result.submission = printable(str(submission))
    result.package_root = None if staged_files.package_root is None else printable(staged_files.package_root)
    result.graded_files = [printable(name) for name in staged_files.graded_files]
    result.duration = time.monotonic() - started
    phases.end()
    return result


@dataclass
class Grading:
    """What every stage of one submission's grading reads."""

    config: object
    """The Assignment (course/config.py) being graded."""
    submission: Path
    """The staged directory that holds the package."""
    package: str
    """The package's name: the folder the submission holds."""
    hidden: bool
    """Whether hidden checks run (a reference was given)."""
    seed: int | None
    """The hidden checks' seed (None without them)."""
    isolate: bool
    """Whether student code runs in the sandbox."""
    executor: object
    """Where tasks are observed: in_process.InProcess or remote.RemoteExecutor."""
    reference: object = None
    """The loaded reference package (hidden checks without an oracle observe it)."""
    reference_path: Path | None = None
    """The directory holding the reference package (the diagnosis runs its probes there)."""
    package_error: Fail | None = None
    """Why no step can run at all (no package, one that does not import), or None."""
    scan: object = None
    """The submission's files for the source scan (forbidden.SourceScan: each parsed once)."""
    refused: dict = field(default_factory=dict)
    """{file: (reason id, params)}: what staging refused."""


def grade_package(submission, config, reference, seed, steps, isolate, memory_bytes, pictures=None):
    """grade() of a directory holding the package: the stages over every step asked for."""
    hidden = reference is not None
    if hidden and seed is None:
        seed = default_seed(config)
    package = config.package
    budget = Budget(config.budget)  # from here: the judge's scan spends it too
    if isolate:
        from autograder.engine.judge.remote import RemoteExecutor  # the sandbox: not in a student's own run

        with phases.phase("fork and confinement"):
            executor = RemoteExecutor(
                submission, config.id, package, memory_bytes, budget, gpu=runs_real(config, steps)
            )
    else:
        warm_up_grader([config])
        if hidden:
            warm_up_assignment(config)
        executor = InProcess(submission, package, budget)
    grading = Grading(config, Path(submission), package, hidden, seed, isolate, executor)
    if hidden:
        grading.reference, grading.reference_path = load_reference(reference, package), reference
    if not (Path(submission) / package).is_dir():
        grading.package_error = Fail("missing_package", {"package": package, "path": str(submission)})
    elif not isolate:
        grading.package_error = executor.error
    with phases.phase("scan"):
        grading.scan = SourceScan(Path(submission) / package, budget, every_forbidden(config))
        grading.refused = refused_files(submission, package)
    modules = config.step_modules()
    with executor:
        with phases.phase("planning"):
            runs = [
                plan_step(step, modules[step.id], grading) for step in config.steps if not steps or step.id in steps
            ]
        # The information flow (docs/threat-model.md): everything a student may read is made in
        # the public phase, before any hidden input reaches student code; what the hidden phase
        # observes reaches only the hidden checks' own results and the instructor's diagnoses.
        # Explaining spends none of the budget (budget.py): it never leaves a check less time.
        with phases.phase("judging"):
            observe_and_judge(runs, grading, hidden=False)
        with executor.budget.paused():
            for run in runs:
                explain_public(run, grading, pictures)  # the worker is free for probes and the smallest example
        if any(task.check.visibility != "public" for run in runs for task in run.tasks):
            with phases.phase("fork and confinement"):
                executor.hide()  # a fresh worker (in-process: the printing held back)
            with phases.phase("judging"):
                observe_and_judge(runs, grading, hidden=True)
        with executor.budget.paused(), phases.phase("scoring and results"):
            results = [explain(run, score(run), grading, pictures) for run in runs]
        output, hidden_output = executor.output(), executor.hidden_output()
    for result in results:  # in the language grading speaks (--lang ko: the JSON's titles too)
        result.title = messages.title(f"step_title.{config.id}.{result.id}", result.title)
    return GradeResult(
        assignment=messages.title(f"assignment_title.{config.id}", config.title),
        submission=str(submission),
        steps=results,
        seed=seed,
        output=output,
        hidden_output=hidden_output,
        sandbox=list(executor.layers),
    )


def observe_and_judge(runs, grading, hidden: bool) -> None:
    """Observe every step's public tasks (`hidden`: its hidden ones) in one stream and judge each
    observation as it arrives (the worker goes on running while the judge reads), into each
    StepRun's outcomes and records."""
    phase = [(run, [task for task in run.tasks if (task.check.visibility != "public") == hidden]) for run in runs]
    observations = grading.executor.observe([task for _, tasks in phase for task in tasks])
    for run, tasks in phase:
        for task in tasks:
            check, inputs = task.check, task.inputs
            with phases.phase("observing hidden" if hidden else "observing public", asks=True):
                observation = next(observations)  # the rest of the loop: judging
            # also for an error: the diagnosis judges the known mistakes on this check
            expected = (
                None
                if charged_forbidden(observation, check)
                else cached_expectation(check, inputs, grading.reference, grading.seed)
            )
            fail = judge(check, inputs, observation, expected, run.step.tolerance, run.evidence)
            run.outcomes[check] = (None if not_checked(fail) else fail is None, fail)
            run.records.append(
                diagnosis.Record(check, inputs, observation, fail, check_seed(check, grading.seed), expected)
            )


def score(run):
    """The step's StepResult, its checks in the module's order."""
    ordered = [check for check in run.module.CHECKS if check in run.outcomes]
    result = score_step(run.step, [(check, *run.outcomes[check]) for check in ordered])
    if run.mode is not None:
        result.mode = mode_note(run.mode)
    return result


def explain_public(run, grading, pictures=None):
    """What a student may read of why the step lost points, made from its public checks alone, in
    the public phase: the likely mistake (diagnosis of the public records, probes of public
    inputs), the smallest failing input of a public check and the pictures of the failing ones
    (into run.public_diagnoses, run.example and run.pictures). Made before any hidden input
    reaches the code: in the grader's own process the code may still hold what it returned, and
    write over it later."""
    records = [record for record in run.records if record.check.visibility == "public"]
    if pictures is not None and any(record.fail is not None for record in records):
        with phases.phase("pictures"):
            run.pictures = pictures(run.step.id, records)
    if grading.package_error is not None:
        return
    run.public_diagnoses = diagnose(run, grading, records)
    if any(record.fail is not None for record in records):
        with phases.phase("examples", asks=True):
            run.example = example.first_example(
                records,
                lambda check, inputs, timeout=run.step.timeout: next(
                    grading.executor.observe([(check, inputs, timeout, ())])
                ),
                run.step.tolerance,
            )


def explain(run, result, grading, pictures=None):
    """`result` with why the step lost points: what explain_public made for students, the
    instructor's diagnosis of every record (hidden ones included), and the pictures (the hidden
    checks' after the public ones')."""
    lost = result.score < result.max_score and result.status != "not_checked"
    if grading.package_error is None:
        result.public_diagnoses = run.public_diagnoses
        hidden_ran = any(record.check.visibility != "public" for record in run.records)
        result.diagnoses = diagnose(run, grading, run.records) if hidden_ran else list(run.public_diagnoses)
    hidden = [record for record in run.records if record.check.visibility != "public"]
    if pictures is not None and lost and any(record.fail is not None for record in hidden):
        with phases.phase("pictures"):
            result.pictures = run.pictures + pictures(run.step.id, hidden)
    else:
        result.pictures = list(run.pictures)
    result.example = run.example
    return result


def diagnose(run, grading, records):
    """diagnosis.diagnose of `records`; probes of the submission run on the executor, each once
    per step: a probe the public phase ran is not run again (its inputs are public; run in the
    hidden phase, what it finds reaches only the instructor's diagnoses)."""
    step = run.step

    def probe(check, package, inputs, timeout=step.timeout):
        if package is not None:
            return observe(check, package, inputs, timeout)
        if check not in run.probed:
            run.probed[check] = next(grading.executor.observe([(check, inputs, timeout, ())]))
        return run.probed[check]

    with phases.phase("diagnosis", asks=True):
        return diagnosis.diagnose(run.module, records, probe, None, step.tolerance, reference=grading.reference_path)
