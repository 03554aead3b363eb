"""What a student may see of a result where hidden checks ran: the public checks, a one-line
summary of the hidden ones, and only the diagnoses a student release could give. The notebook's
check cell, the Classroom log and reporter, and Gradescope's results all show this view.
"""

import dataclasses

from autograder.engine.checks import messages
from autograder.engine.judge import results


def public_diagnoses(step, public_ids: set) -> list:
    """The diagnoses of `step` that a student may read beside the hidden checks' results: those
    whose message id a student release ships (`public_ids`: diagnosis.public_message_ids), and
    none that quotes a failing hidden check's message (no_known_mistake's evidence can)."""
    hidden = [c.message for c in step.checks if c.visibility != "public" and c.passed is False and c.message]
    return [d for d in step.diagnoses if d["id"] in public_ids and not any(m in d["message"] for m in hidden)]


def public_step(step, public_ids: set):
    """`step` as the student may see it when hidden checks ran: its public diagnoses only (the
    reporter already names hidden checks "hidden check N" and leaves out their messages)."""
    return dataclasses.replace(step, diagnoses=public_diagnoses(step, public_ids))


def public_view(result, step_id, public_ids: set = None):
    """(the result of step `step_id` without its hidden checks' lines, a one-line summary of them:
    count and points). nbgrader's feedback shows the check cell's output: hidden checks' names
    and messages would tell what they look at, and so would the diagnoses that only the hidden
    checks can give: with `public_ids` (diagnosis.public_message_ids), only the diagnoses a
    student release could give are kept (public_diagnoses)."""
    step = result.step(step_id)
    hidden = [c for c in step.checks if c.visibility != "public" and c.passed is not None]
    shown = dataclasses.replace(step, checks=[c for c in step.checks if c.visibility == "public"])
    if public_ids is not None:
        shown.diagnoses = public_diagnoses(step, public_ids)
    view = dataclasses.replace(result, steps=[shown])
    if not hidden:
        return view, ""
    return view, messages.render(
        "hidden_checks_summary",
        count=len(hidden),
        points=results.points(sum(c.points for c in hidden)),
        max_points=results.points(sum(c.max_points for c in hidden)),
    )
