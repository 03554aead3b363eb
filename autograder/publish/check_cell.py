"""What a notebook's check cell shows and scores of a graded step, the same whether the cell
grades in the student's kernel (routes/nbgrader_cell.py) or the sandboxed judge's verdict is
written into it (publish/nbgrader_gradebook.py).

    print(step_report(result, config, "padding"))   # the step's public view, as a table
    score, note = frozen_score(step, config, 10)    # its points as a cell worth 10 scores them
"""

from autograder.engine.checks import messages
from autograder.engine.judge.table import table
from autograder.engine.mistakes.diagnosis import public_message_ids
from autograder.publish.public_view import public_view


def step_report(result, config, step_id: str, verbose: bool = False, pictures: bool = True) -> str:
    """What a student may read of step `step_id` of `result`: its title, the table of its public
    checks (public_view: hidden checks as a count and points, only the diagnoses a student
    release could give) and, where `pictures`, the pictures' paths."""
    view, summary = public_view(result, step_id, public_message_ids(config))
    if not pictures:  # shown below the table (a notebook), not named in it
        view.steps[0].pictures = []
    title = messages.title(f"step_title.{config.id}.{step_id}", config.step(step_id).title)
    text = table(view, title=f"{step_id}: {title}", verbose=verbose)
    return text + ("\n" + summary if summary else "")


def frozen_score(step, config, points: float = None) -> tuple:
    """(the points of `step`, a StepResult, as a check cell worth `points` scores them, a note or
    ""). nbgrader rejects a cell scoring above its points: a step whose points grading.yml has
    changed since the course was made is scored out of the cell's `points`, with a note."""
    score = min(max(step.score, 0.0), step.max_score)
    live = config.step(step.id).points
    if points is None or points == live:
        return round(score, 4), ""
    note = messages.render("course_points_changed", step=step.id, live=live, frozen=points)
    return round(score / step.max_score * points if step.max_score else 0.0, 4), note
