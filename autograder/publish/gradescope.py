"""The Gradescope route: the autograder zip, and a graded run's results.json.

    gradescope_zip(Path("autograder.zip"))          # `python -m autograder release --gradescope`
    json.dumps(gradescope_results(result, seconds))   # `grade ... --gradescope results.json`

The zip holds setup.sh, run_autograder and the whole kit (reference and hidden checks included:
it stays on Gradescope's side), with the course secret (.mha-lab/course-secret), so that the
hidden checks draw there the inputs they draw here. run_autograder grades /autograder/submission in the sandbox and
writes /autograder/results/results.json (docs/gradescope.md).
"""

import os
import tempfile
import zipfile
from pathlib import Path

from autograder import KIT
from autograder.engine.checks import messages
from autograder.engine.course import config as grading_config
from autograder.engine.course.secret import FILE_NAME as SECRET_FILE
from autograder.engine.course.secret import read_secret
from autograder.engine.course.torch_pin import CPU_INDEX, GRADING_TORCH
from autograder.engine.judge import feedback, table
from autograder.engine.judge.score import whole_points
from autograder.engine.mistakes.diagnosis import public_message_ids
from autograder.publish.public_view import public_step

SETUP_SH = """#!/usr/bin/env bash
# Gradescope: install the grader's dependencies (a CPU build of torch: no CUDA packages).
set -euo pipefail
apt-get update -qq && apt-get install -y -qq python3 python3-pip python3-venv g++ bubblewrap libseccomp2 > /dev/null
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q torch=={torch} --index-url {cpu_index}
/autograder/venv/bin/pip install -q numpy pytest pytest-timeout PyYAML jsonschema tqdm pyseccomp
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope: grade /autograder/submission, write /autograder/results/results.json.
# To try it locally (the kit's docs/gradescope.md): MHA_LAB_GRADESCOPE_ROOT replaces
# /autograder, MHA_LAB_PYTHON the Python that setup.sh installs ($ROOT/venv/bin/python).
set -uo pipefail
ROOT="${MHA_LAB_GRADESCOPE_ROOT:-/autograder}"
PYTHON="${MHA_LAB_PYTHON:-$ROOT/venv/bin/python}"
cd "$ROOT/source"
# The course secret is root's alone, whatever the unzipping made of its modes (grading refuses one
# that others could have written; a worker without Landlock reads what others may read).
if [ -d .mha-lab ]; then chmod -R go-rwx .mha-lab; fi
mkdir -p "$ROOT/results"
"$PYTHON" -m autograder grade "$ROOT/submission" --assignment {assignment} --gradescope "$ROOT/results/results.json"
"""


def gradescope_zip(out, assignment=None):
    """Write the Gradescope autograder zip to `out`, grading `assignment` (default: the first in
    grading.yml; a Gradescope assignment grades one). grading.yml is validated first (a zip with
    a broken one would fail on every submission), and the zip is written aside, then renamed.
    It holds the reference, the hidden checks and the course secret: it is the instructor's
    alone (0600, as the secret's own file), written to a new file of a random name (O_EXCL: no
    link or file another user put beside `out` is written through)."""

    config = grading_config.load(assignment=assignment)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)  # `gradescope zips/mha.zip`: the folder is made
    fd, partial = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)  # 0600
    partial = Path(partial)
    try:
        with os.fdopen(fd, "w+b") as file:
            _write_gradescope_zip(file, config)
        partial.replace(out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return out


def _write_gradescope_zip(out, config):
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (
            ("setup.sh", SETUP_SH.replace("{cpu_index}", CPU_INDEX).replace("{torch}", GRADING_TORCH)),
            ("run_autograder", RUN_AUTOGRADER.replace("{assignment}", config.id)),
        ):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            archive.writestr(info, text)
        for top in ("autograder", "solutions", "assignments"):
            for path in sorted((KIT / top).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    archive.write(path, path.relative_to(KIT).as_posix())
        archive.write(KIT / "grading.yml", "grading.yml")
        secret = read_secret()
        if secret is not None:  # the hidden checks' inputs there are the ones here (course/secret.py)
            info = zipfile.ZipInfo(f".mha-lab/{SECRET_FILE}")
            info.external_attr = 0o600 << 16
            archive.writestr(info, secret.hex() + "\n")


def gradescope_results(result, execution_time, hidden_visibility="after_published", public_ids=None):
    """Gradescope's results.json for a GradeResult: one test per public check, and no top-level
    score (the tests' scores add up to the result's; see the comment at the end).

    What students see before grades are published is made only of what a student may read
    (public_view.public_step: the public checks, the diagnoses of the public checks alone whose
    message a student release ships, `public_ids`, default: public_message_ids of every
    assignment in grading.yml), and of nothing a hidden input reached. The first failing visible
    test of a step carries the step's explanation (feedback.explanation, as the score table shows it: the
    cause first).

    Where hidden checks ran, no visible test carries points: a visible test's maximum would tell
    what the hidden checks of its step weigh (the step's points are in the student's grading.yml,
    a public check's weight in its release). Gradescope's own rule for hidden tests is that
    students see no total while some are hidden; so each step's points go to one test of its own
    at the hidden checks' visibility, and every public check's test says passed or failed for 0
    points. Once published, that test is all a student learns of the hidden checks: the step's
    points, not which hidden check failed nor why, nor what the code printed once hidden inputs
    reached it (the log has that, never shown to students). One check's pass or fail, chosen by
    the code from a hidden input, would be one bit of it per check (the hidden inputs repeat
    between runs of a course); the step's points are the grade and cannot be left out.
    Without hidden checks every test carries its own points."""
    import dataclasses

    if public_ids is None:
        public_ids = set().union(*(public_message_ids(config) for config in grading_config.load_all()))
    hidden_ran = any(check.visibility != "public" for step in result.steps for check in step.checks)
    tests, points = [], []  # points: (test, its score, its max) where a test carries points
    for step in result.steps:
        shown = public_step(step, public_ids)
        verdict = "\n".join(
            feedback.lines(
                feedback.explanation(
                    dataclasses.replace(shown, checks=[c for c in shown.checks if c.visibility == "public"])
                )
            )
        )
        counted = [check for check in step.checks if check.passed is not None]
        for check in counted:
            if check.visibility != "public":
                continue  # its points are in the step's test; its result and message are the instructor's
            output = check.message
            if check.passed is False and verdict:  # once per step
                output = (output + "\n\n" if output else "") + verdict
                verdict = ""
            test = {
                "name": f"{step.id}: {check.id}",
                "score": 0,
                "max_score": 0,
                "status": "passed" if check.passed else "failed",
                "output": output,
                "visibility": "visible",
            }
            tests.append(test)
            if not hidden_ran:
                points.append((test, check.points, check.max_points))
        if hidden_ran and counted:
            test = {
                "name": messages.render("gradescope_step_points", step=step.id),
                "score": 0,
                "max_score": 0,
                "output": messages.render(
                    "gradescope_step_points_output",
                    points=table.points(step.score),
                    max_points=table.points(step.max_score),
                ),
                "visibility": hidden_visibility,
            }
            tests.append(test)
            points.append((test, step.score, step.max_score))
    # Gradescope adds the tests' scores up: rounded one by one, 7 checks of 15/7 would make 14.9999;
    # each is rounded as its share of the exact total instead (largest remainder, units of 0.0001).
    for index, key in ((1, "score"), (2, "max_score")):
        for (test, *_), share in zip(points, exact_shares([entry[index] for entry in points]), strict=True):
            test[key] = share
    for step in result.steps:  # not checked here, yet in the maximum (score.score_step): said, worth 0
        if step.status == "not_checked" and step.max_score:
            tests.append(
                {
                    "name": f"{step.id}: not checked",
                    "score": 0,
                    "max_score": round(step.max_score, 4),
                    "status": "failed",
                    "output": next((c.message for c in step.checks if c.message and c.visibility == "public"), ""),
                    "visibility": "visible",
                }
            )
    printed = f"\n\n{messages.render('your_output')}\n{result.output}" if result.output else ""
    # No top-level "score": Gradescope then adds up the tests' scores, and while any test is not
    # yet visible (the hidden ones: after_published) it shows students no total ("If test cases
    # are hidden, students will not be able to see their total score", its results.json
    # specification); a top-level score would override that sum and be the total they see.
    # No execution time where hidden checks ran: the hidden phase's code could draw it out.
    return {
        **({} if hidden_ran else {"execution_time": round(execution_time, 2)}),
        "output": gradescope_summary(result)
        + (f"\n{messages.render('graded_files', files=', '.join(result.graded_files))}" if result.graded_files else "")
        + printed,
        "stdout_visibility": "hidden",  # the log's table has the hidden checks' points
        "tests": tests,
        **graded_files_data(result),
    }


HIDDEN_QUANTUM = 10.0  # seconds: a run with hidden checks ends on a multiple of it (pad_run)


def pad_run(started: float, quantum: float = HIDDEN_QUANTUM, clock=None, sleep=None) -> float:
    """Wait until the run that began at `started` (time.monotonic) has lasted a whole number of
    `quantum`s; returns the seconds waited. A student sees when Gradescope's results arrive: the
    hidden phase's code could otherwise tell a hidden input by how long it takes. Padded, a run
    tells only how many quanta it took (a few values over the budget), not the time within."""
    import math
    import time

    clock, sleep = clock or time.monotonic, sleep or time.sleep
    elapsed = clock() - started
    wait = math.ceil(elapsed / quantum) * quantum - elapsed if elapsed > 0 else quantum
    if wait > 0:
        sleep(wait)
    return wait


def exact_shares(values: list) -> list:
    """`values` rounded to 4 decimals so that they add up to their sum rounded to 4 decimals."""

    units = whole_points([value * 10_000 for value in values], sum(values) * 10_000)
    return [round(unit / 10_000, 4) for unit in units]


def graded_files_data(result) -> dict:
    """Which of the uploaded files were graded (GradeResult.graded_files, relative to the upload),
    as results.json's extra_data: the package's files, none of a whole repository's others."""
    if result.graded_files is None:
        return {}
    return {"extra_data": {"graded_files": list(result.graded_files), "package_root": result.package_root}}


def gradescope_summary(result):
    """The top-level text students see at once. Without hidden checks: the points. With them:
    how many public checks passed, never their points (their maxima would tell what the hidden
    checks weigh), and how many hidden checks count too; Gradescope shows the score itself by
    its own visibility rules."""
    public = [c for step in result.steps for c in step.checks if c.visibility == "public" and c.passed is not None]
    hidden = sum(1 for step in result.steps for c in step.checks if c.visibility != "public" and c.passed is not None)
    if not hidden:
        return messages.render(
            "gradescope_public_points",
            assignment=result.assignment,
            points=table.points(sum(c.points for c in public)),
            max_points=table.points(sum(c.max_points for c in public)),
        )
    return messages.render(
        "gradescope_public_passed",
        assignment=result.assignment,
        passed=sum(1 for c in public if c.passed),
        total=len(public),
        hidden=hidden,
    )
