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
from autograder.engine.mistakes.diagnosis import public_message_ids
from autograder.engine.course.torch_pin import CPU_INDEX, GRADING_TORCH
from autograder.routes.public_view import public_diagnoses
from autograder.engine.course import config as grading_config
from autograder.engine.course.secret import FILE_NAME as SECRET_FILE, read_secret
from autograder.engine.judge import feedback
from autograder.engine.checks import messages
from autograder.routes.classroom import whole_points


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
    """Gradescope's results.json for a GradeResult: one test per check, and no top-level score
    (the tests' scores add up to the result's; see the comment at the end). The first failing
    visible test of a step carries the step's verdict (feedback.verdict, as the score table shows
    it: the cause first) made of its public checks and of the diagnoses a student release could
    give (public_view.public_diagnoses of `public_ids`, default: public_message_ids of every
    assignment in grading.yml): the others tell what the hidden checks look for. The first
    failing hidden check's test, shown at its visibility, carries the verdict of them all."""
    import dataclasses

    if public_ids is None:
        public_ids = set().union(*(public_message_ids(config) for config in grading_config.load_all()))
    tests = []
    for step in result.steps:
        public = dataclasses.replace(
            step,
            checks=[check for check in step.checks if check.visibility == "public"],
            diagnoses=public_diagnoses(step, public_ids),
        )
        verdicts = {
            "public": "\n".join(feedback.lines(feedback.verdict(public))),
            "hidden": "\n".join(feedback.lines(feedback.verdict(step))),
        }
        for check in step.checks:
            if check.passed is None:
                continue
            output, audience = check.message, "public" if check.visibility == "public" else "hidden"
            if check.passed is False and verdicts[audience]:  # once per step and audience
                output = (output + "\n\n" if output else "") + verdicts[audience]
                verdicts[audience] = ""
            tests.append(
                {
                    "name": f"{step.id}: {check.id}",
                    "score": round(check.points, 4),
                    "max_score": round(check.max_points, 4),
                    "status": "passed" if check.passed else "failed",
                    "output": output,
                    "visibility": "visible" if check.visibility == "public" else hidden_visibility,
                }
            )
    # Gradescope adds the tests' scores up: rounded one by one, 7 checks of 15/7 would make 14.9999;
    # each is rounded as its share of the exact total instead (largest remainder, units of 0.0001).
    counted = [check for step in result.steps for check in step.checks if check.passed is not None]
    for key, values in (("score", [c.points for c in counted]), ("max_score", [c.max_points for c in counted])):
        for test, share in zip(tests, exact_shares(values)):
            test[key] = share
    for step in result.steps:  # not checked here, yet in the maximum (score.score_step): said, worth 0
        if step.status == "not_checked" and step.max_score:
            tests.append(
                {
                    "name": f"{step.id}: not checked",
                    "score": 0,
                    "max_score": round(step.max_score, 4),
                    "status": "failed",
                    "output": next((c.message for c in step.checks if c.message), ""),
                    "visibility": "visible",
                }
            )
    # What the student's code printed while hidden checks ran can show their inputs: where hidden
    # checks ran it is shown as the hidden checks are (a test of its own, at their visibility).
    hidden_ran = any(check.visibility != "public" for step in result.steps for check in step.checks)
    printed = f"\n\n{messages.render('your_output')}\n{result.output}" if result.output and not hidden_ran else ""
    if result.output and hidden_ran:  # worth nothing: every test needs a score where the top level has none
        tests.append(
            {
                "name": messages.render("your_output"),
                "score": 0,
                "max_score": 0,
                "output": result.output,
                "visibility": hidden_visibility,
            }
        )
    # No top-level "score": Gradescope then adds up the tests' scores, and while any test is not
    # yet visible (the hidden ones: after_published) it shows students no total ("If test cases
    # are hidden, students will not be able to see their total score", its results.json
    # specification); a top-level score would override that sum and be the total they see.
    return {
        "execution_time": round(execution_time, 2),
        "output": gradescope_summary(result)
        + (f"\n{messages.render('graded_files', files=', '.join(result.graded_files))}" if result.graded_files else "")
        + printed,
        "stdout_visibility": "hidden",  # the log's table has the hidden checks' points
        "tests": tests,
        **graded_files_data(result),
    }


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
    """The top-level text students see at once: the public checks' points only. The total with
    the hidden checks would tell what they scored before grades are published (their tests are
    `after_published`); Gradescope shows the score itself by its own visibility rules."""
    public = [c for step in result.steps for c in step.checks if c.visibility == "public" and c.passed is not None]
    hidden = sum(1 for step in result.steps for c in step.checks if c.visibility != "public" and c.passed is not None)
    text = (
        f"{result.assignment}: public checks {sum(c.points for c in public):.2f} / "
        f"{sum(c.max_points for c in public):.2f}"
    )
    if hidden:
        text += f"\n{hidden} hidden checks count too; their results show once grades are published."
    return text
