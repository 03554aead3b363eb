"""What a student may see of a result where hidden checks ran: the one filter every route's
student-facing output goes through where hidden checks run (the notebook's check cell graded for
nbgrader, Gradescope's visible tests; Classroom and a student's own runs have public checks only).

The engine keeps apart what a hidden input reached (runner.grade_package: the public phase makes
everything a student reads before any hidden input reaches student code): the hidden checks'
own results, the instructor's diagnoses of every check (StepResult.diagnoses), what the code
printed in the hidden phase (GradeResult.hidden_output), the hidden seed and the run's duration.
This view keeps the public checks, the hidden ones as their points only (the grade, where a
route shows it), the diagnoses made from the public checks alone (StepResult.public_diagnoses)
and what the code printed before the hidden phase; docs/threat-model.md, "Information flow".
"""

import dataclasses
from pathlib import Path

from autograder.engine.checks import messages
from autograder.engine.judge import results, table
from autograder.engine.mistakes.evidence import is_localised


def hidden_ran(step) -> bool:
    """Whether some hidden check of `step` is in its result."""
    return any(check.visibility != "public" for check in step.checks)


def public_diagnoses(step, public_ids: set = None) -> list:
    """The diagnoses of `step` a student may read: where hidden checks ran, those made from its
    public checks alone (none where the result does not tell them apart: an older JSON); of
    those, with `public_ids` (diagnosis.public_message_ids), only the ones whose message a student
    release ships (the others describe what the hidden checks look for) and the localisation's
    findings (probes of public inputs, said by the engine's catalog)."""
    found = (step.public_diagnoses or []) if hidden_ran(step) else step.diagnoses
    return [d for d in found if public_ids is None or d["id"] in public_ids or is_localised(d["id"])]


def public_step(step, public_ids: set = None):
    """`step` as a student may see it where hidden checks ran: its public checks, each hidden
    check with its points only (no message: a route names it "hidden check N"), its public
    diagnoses, the pictures of its public checks (a hidden check's would draw its inputs), and
    its status as its public checks alone give it (a step whose public checks all meet a TODO
    is "not implemented", whatever its hidden checks met)."""
    shown = public_diagnoses(step, public_ids)
    checks = [
        check if check.visibility == "public" else dataclasses.replace(check, message="", message_id=None, params=None)
        for check in step.checks
    ]
    status, pictures = step.status, list(step.pictures)
    if hidden_ran(step):  # a hidden check's picture shows its inputs: the public checks' only
        shown_names = {results.picture_name(step.id, check.id) for check in step.checks if check.visibility == "public"}
        pictures = [path for path in pictures if Path(path).name in shown_names]
    if hidden_ran(step) and status in ("graded", "not_implemented"):
        public = [check for check in step.checks if check.visibility == "public" and check.passed is not None]
        todo = public and all(check.message_id == "not_implemented" for check in public)
        status = "not_implemented" if todo else "graded"
    return dataclasses.replace(
        step, checks=checks, diagnoses=shown, public_diagnoses=list(shown), status=status, pictures=pictures
    )


def public_result(result, public_ids: set = None):
    """`result` with every step as public_step shows it, without the hidden seed, the hidden
    phase's printing or the run's duration (which the hidden phase's code could draw out)."""
    return dataclasses.replace(
        result,
        steps=[public_step(step, public_ids) for step in result.steps],
        seed=None,
        hidden_output="",
        duration=None,
    )


def public_view(result, step_id, public_ids: set = None):
    """(the result of step `step_id` as a student may see it, without its hidden checks' lines;
    a one-line summary of those: count and points). nbgrader's feedback shows the check cell's
    output, which the student reads: hidden checks' names and messages would
    tell what they look at, and so would the diagnoses that only the hidden checks can give."""
    view = public_result(result, public_ids)
    step = view.step(step_id)
    hidden = [c for c in step.checks if c.visibility != "public" and c.passed is not None]
    shown = dataclasses.replace(step, checks=[c for c in step.checks if c.visibility == "public"])
    view = dataclasses.replace(view, steps=[shown])
    if not hidden:
        return view, ""
    return view, messages.render(
        "hidden_checks_summary",
        count=len(hidden),
        points=table.points(sum(c.points for c in hidden)),
        max_points=table.points(sum(c.max_points for c in hidden)),
    )
