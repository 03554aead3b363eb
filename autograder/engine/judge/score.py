"""The score stage: a step's points from its checks' outcomes, against a maximum that is the
same for every submission.

    result = score_step(step, [(check, passed, fail), ...])   # a StepResult
"""

import math

from autograder.engine.checks import messages
from autograder.engine.checks.text import printable
from autograder.engine.judge.results import CheckResult, GradeResult, StepResult


def score_step(step, outcomes):
    """Turn (check, passed, fail) triples into a StepResult using the step's points and weights.

    The step's maximum is its points, for every submission and in every route: a failed check,
    one blocked by another step's mistake, one that ran out of time or budget, all stay in it and
    score nothing. A check that cannot run here (passed is None: no GPU, a pytest run without
    --cuda) carries no points either way; a step whose checks all could not run is reported as
    not checked, scores nothing and keeps its maximum (the table says what the total leaves
    out), unless grading.yml switched it off (`options: {mode: off}`): then it is out of the
    maximum, as it is in every route of that course."""
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
        max_score=step.points if counted or (outcomes and not switched_off(step)) else 0.0,
        checks=checks,
        status=status,
    )


def switched_off(step) -> bool:
    """Whether grading.yml takes the step out of the course (its checks never run, anywhere)."""
    return step.options.get("mode") == "off"


def refused(config, fail, steps=None, seed=None) -> GradeResult:
    """The result of a submission staging would not take: every check of every step fails with
    `fail` (scored against the full maximum)."""
    modules = config.step_modules()
    results = [
        score_step(step, [(check, False, fail) for check in modules[step.id].CHECKS if check.visibility == "public"])
        for step in config.steps
        if not steps or step.id in steps
    ]
    for result in results:  # in the language grading speaks, as runner.grade's
        result.title = messages.title(f"step_title.{config.id}.{result.id}", result.title)
    title = messages.title(f"assignment_title.{config.id}", config.title)
    return GradeResult(assignment=title, submission="", steps=results, seed=seed)


def whole_points(parts, total):
    """`parts` as whole numbers adding up to `total` rounded half up: each part's floor, and the
    points left over to the parts with the largest fractions (largest remainder)."""
    epsilon = 1e-9  # 7.4999999999 is 7.5
    target = math.floor(total + 0.5 + epsilon)
    floors = [math.floor(part + epsilon) for part in parts]
    order = sorted(range(len(parts)), key=lambda i: floors[i] - parts[i])
    for i in order[: max(0, target - sum(floors))]:
        floors[i] += 1
    return floors
