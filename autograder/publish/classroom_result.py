"""What a Classroom workflow's step reports of one graded step: the grading reporter's result
object (reporter_result, error_result), the place a failure names in the student's file
(step_location, annotations) and the step's Actions log (print_log). routes/classroom/ runs the
step; publish/classroom_workflow.py writes the workflow that calls it."""

import dataclasses
from pathlib import Path

from autograder.engine.checks import messages
from autograder.engine.judge import table
from autograder.engine.judge.score import whole_points
from autograder.publish.classroom_workflow import reporter_number


def reporter_result(step, location=None):
    """The result object the grading reporter reads, for a StepResult.

    What the reporter does with it (classroom-resources/autograding-grading-reporter@v1): it adds
    the tests' `score`s and the runners' `max_score`s into "Points X/Y", which Classroom reads as
    whole numbers (7.5 would become 7): scores are whole points, rounded once per step (half up)
    and spread over the checks so that they add up exactly. It prints a failed test's name, its
    `line_no` (an integer, 0: none) and its `test_code`, but `message` only for an error: the
    step's explanation (feedback.explanation of its public checks: the cause first) goes in the first
    failing test's `test_code`, each other failing test's own message in its own. `line_no`: the
    line a failure names, else the step's code (`location`: (file, line) from step_location).
    An empty test list would be NaN: a step with no check run here has one test that says why,
    scores 0 and keeps its maximum (0 only where grading.yml switched it off)."""
    from autograder.engine.judge import feedback  # late: not at the start of a Classroom step

    counted = [check for check in step.checks if check.passed is not None]
    if not counted:
        reason = next((c.message for c in step.checks if c.message), "not checked here")
        status = "fail" if step.max_score else "pass"
        return {
            "version": 1,
            "status": status,
            "max_score": reporter_number(step.max_score),
            "tests": [
                {
                    "name": f"{step.id}: not checked",
                    "status": status,
                    "message": reason,
                    "test_code": reason,
                    "line_no": 0,
                    "score": 0,
                }
            ],
        }
    scores = whole_points([check.points for check in counted], step.score)
    public = dataclasses.replace(step, checks=[check for check in step.checks if check.visibility == "public"])
    block = "\n".join(feedback.lines(feedback.explanation(public)))
    tests, hidden = [], 0
    for check, score in zip(counted, scores, strict=True):
        name, text = f"{step.id}: {check.id}", check.message or ""
        if check.visibility != "public":  # nothing about what a hidden check looks at
            hidden += 1
            name, text = f"{step.id}: hidden check {hidden}", ""
        test = {
            "name": name,
            "status": "pass" if check.passed else "fail",
            "message": text or None,
            "line_no": line_of(text) or (location[1] if location and not check.passed else 0),
            "score": score,
        }
        if not check.passed:
            test["test_code"] = block or text or "failed"
            block = ""  # the verdict once per step
        tests.append(test)
    passed = all(t["status"] == "pass" for t in tests)
    return {
        "version": 1,
        "status": "pass" if passed else "fail",
        "max_score": reporter_number(step.max_score),
        "tests": tests,
    }


def line_of(message):
    """The line number a message points at in the student's file (0: none), for the reporter."""
    found = place_of(message)
    return found[1] if found else 0


def place_of(message):
    """(file, line) that a message names ("mha/heads.py, line 12, in ..."; "mha/heads.py 의 12번째
    줄"), or None; the file as the message names it (package/file)."""
    import re

    found = re.search(r"([\w/.-]+\.py)(?:, line |의 )(\d+)", message or "")
    if found:
        return found.group(1), int(found.group(2))
    found = re.search(r"\bline (\d+)", message or "")
    return (None, int(found.group(1))) if found else None


def step_location(directory, package, files, step_id):
    """(file, line) of the step's code in the student's package (`directory`/`package`): the
    first `TODO (<step>)` comment of the step's `files` (the skeleton's marks, which stay in a
    student's file), else the first `def` or `class` of its first file, else its line 1; the file
    as package/file. None where the step names no file that exists."""
    import re

    for mark in (re.compile(rf"#\s*TODO \({re.escape(step_id)}\)"), re.compile(r"^\s*(def|class) ")):
        for name in files:
            path = Path(directory) / package / name
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for number, line in enumerate(text.splitlines(), start=1):
                if mark.search(line):
                    return f"{package}/{name}", number
    for name in files:
        if (Path(directory) / package / name).is_file():
            return f"{package}/{name}", 1
    return None


def annotations(step, location, title):
    """GitHub Actions workflow commands that put the step's verdict on the student's file, at the
    line a failure names or else at the step's code (`location`, from step_location): one
    `::error` for a step that lost points, one `::warning` for checks that could not be judged.
    The file is given as the student's repository holds it (assignments/<package>/<file>)."""
    from autograder.engine.judge import feedback  # late: not at the start of a Classroom step

    public = dataclasses.replace(step, checks=[check for check in step.checks if check.visibility == "public"])
    found = feedback.explanation(public)
    if found is None:
        return []
    named = next((place_of(c.message) for c in public.checks if c.passed is False and place_of(c.message)), None)
    file, line = (named if named and named[0] else location) or (None, 0)
    if named and not named[0] and location:
        file, line = location[0], named[1]
    level = "error" if found.evidence else "warning"
    text = "\n".join(item.strip() for item in feedback.lines(found))
    where = f"file=assignments/{escape(file, True)},line={line}," if file else ""
    return [f"::{level} {where}title={escape(title, True)}::{escape(text)}"]


def escape(text, property_=False):
    """A workflow command's data (or, `property_`, a property value) with its special characters escaped."""
    text = str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_ else text


def error_result(step_id, max_score, detail):
    """A result that says the grader itself failed (status error): never a silent empty grade."""
    return {
        "version": 1,
        "status": "error",
        "max_score": reporter_number(max_score),
        "tests": [{"name": f"{step_id}: grader error", "status": "error", "message": detail, "line_no": 0, "score": 0}],
    }


def print_log(graded, step_id: str, location=None, title=None) -> None:
    """The Actions log of one graded step; the grade goes to --output, never via stdout. First,
    that this score is feedback, computed in the student's repository (classroom_feedback);
    under GitHub Actions, the step's verdict also goes on the student's file as an annotation
    (annotations; `location`: the step's code)."""
    import os

    print(messages.render("classroom_feedback") + "\n")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in annotations(graded.step(step_id), location, title or step_id):
            print(line)
    print(table.table(graded))
    if graded.output:
        print("\n" + messages.render("printed_output") + "\n" + graded.output)
