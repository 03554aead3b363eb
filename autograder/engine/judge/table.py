"""A grading result as a student reads it in a terminal: the per-step score table, and the
numbers and widths every route's text shares (points, display_width)."""

import unicodedata

from autograder.engine.checks import messages


def points(value: float) -> str:
    """A score as a student reads it, everywhere: two decimals ("5.36", "15.00")."""
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def table(result, title=None, verbose=False):
    """The per-step score table, and under each step that lost points its explanation
    (feedback.explanation: the cause, the evidence once per kind of failure, where the skeleton teaches
    it, the smallest failing input), in the language of messages.render. `verbose`: every failing
    check's full message too."""
    from autograder.engine.judge import feedback  # late: not at the start of `pytest assignments/`

    lines = [title or f"{result.assignment}: {result.submission}", ""]
    total = messages.render("table.total")
    width = max([len(step.id) for step in result.steps] + [display_width(total)])
    for step in result.steps:
        note, score = "", points(step.score)
        if step.status == "not_implemented":
            note = messages.render("step_not_implemented")
        elif step.status == "not_checked":  # not 0 where it counts: the total says what it leaves out
            note, score = (step.checks[0].message if step.checks else ""), ("—" if step.max_score else score)
        elif step.status == "partial":
            note, score = messages.render("step_partial", run=step.checks_run, total=step.checks_total), "--"
        if step.mode and step.status != "not_checked":  # on the row: the first line under it is the explanation's
            note = f"{note} ({messages.render(step.mode)})".strip()
        lines.append(f"  {step.id:<{width}}  {score:>6} / {points(step.max_score):<6} {note}".rstrip())
        lines += feedback.lines(feedback.explanation(step), verbose=verbose, indent="    ")
    gap = " " * (width - display_width(total))
    line = f"  {total}{gap}  {points(result.score):>6} / {points(result.max_score)}"
    unjudged = sum(c.passed is None for step in result.complete_steps if step.status == "graded" for c in step.checks)
    if unjudged:
        line += "  " + messages.render("total_not_checked", count=unjudged)
    if left_out := [step for step in result.complete_steps if step.status == "not_checked" and step.max_score]:
        names, left = ", ".join(step.id for step in left_out), points(sum(step.max_score for step in left_out))
        line += "  " + messages.render("total_leaves_out", steps=names, points=left)
    if result.partial:
        steps_total = result.steps_total or len(result.steps)
        line += "  " + messages.render("total_partial", complete=len(result.complete_steps), total=steps_total)
    return "\n".join([*lines, line])


def display_width(text: str) -> int:
    """Columns `text` takes in a terminal: Korean (wide) characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
