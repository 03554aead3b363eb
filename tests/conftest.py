"""Shared helpers for the kit's own tests: the grading config, and submissions made from the
reference with one planted mistake or one file replaced."""

import ast
import os
import shutil
from pathlib import Path

import pytest

from autograder.engine.course import config as grading_config
from autograder.engine.course.assignment import step_modules
from autograder.engine.judge.plan import cuda_available
from autograder.engine.judge.runner import grade
from planted import all_planted

# The kit's tests read the English texts, whatever the developer's locale (test_i18n.py sets the
# language itself); the processes they start inherit it.
os.environ["MHA_LAB_LANG"] = "en"


def _test_course() -> str:
    """A course folder of the tests' own, with a fixed secret: the hidden inputs of a test run do
    not depend on whether the developer's kit has made a secret, and a `release` under test makes
    none in the kit (autograder/engine/course/secret.py). test_secret.py sets its own."""
    import atexit
    import hashlib
    import tempfile

    folder = tempfile.mkdtemp(prefix="mha-lab-test-course-")
    path = Path(folder) / "course-secret"
    path.write_text(hashlib.sha256(b"mha-lab's tests").hexdigest() + "\n")
    path.chmod(0o600)
    atexit.register(shutil.rmtree, folder, True)
    return folder


os.environ["MHA_LAB_COURSE_DIR"] = _test_course()
os.environ.pop("MHA_LAB_COURSE_SECRET", None)

KIT = Path(__file__).resolve().parent.parent
SOLUTIONS = KIT / "solutions"
ASSIGNMENTS = KIT / "assignments"
# Steps whose points may also drop for a mistake made elsewhere: the integration step runs the
# student's whole module by design, and the cuda step runs all of it on a GPU (their checks
# modules say INTEGRATES).
INTEGRATION_STEPS = {
    step for step, module in step_modules(grading_config.load().id).items() if getattr(module, "INTEGRATES", False)
}


def all_mistakes():
    """(step, planted mistake) pairs: tests/planted.py, the ones a check can catch."""
    return all_planted()


@pytest.fixture(scope="session")
def config():
    return grading_config.load()


@pytest.fixture
def submission(tmp_path):
    """make(mistake=None, files={name: source}, remove=()) -> a directory holding mha/,
    copied from the reference with the changes applied."""

    def make(mistake=None, files=None, remove=()):
        root = tmp_path / "submission"
        if root.exists():
            shutil.rmtree(root)
        shutil.copytree(SOLUTIONS / "mha", root / "mha")
        if mistake is not None:
            target = root / "mha" / mistake.file
            target.write_text(mistake.apply(target.read_text()))
        for name, source in (files or {}).items():
            (root / "mha" / name).write_text(source)
        for name in remove:
            (root / "mha" / name).unlink()
        return root

    return make


def full_marks(result):
    """Step ids that scored below their maximum."""
    return [step.id for step in result.steps if step.score < step.max_score - 1e-9]


def grade_with_hidden(path, config, seed=1234):
    return grade(path, config, reference=SOLUTIONS, seed=seed)


__all__ = [
    "KIT",
    "SOLUTIONS",
    "ASSIGNMENTS",
    "INTEGRATION_STEPS",
    "all_mistakes",
    "full_marks",
    "grade_with_hidden",
    "cuda_available",
    "replace_once",
]


def replace_once(text: str, old: str, new: str) -> str:
    """text with its one `old` replaced: a planted change that finds nothing to change (or too
    much) is an error, not a silent no-op."""
    count = text.count(old)
    if count != 1:
        raise ValueError(f"{old!r} occurs {count} times")
    return text.replace(old, new)


def code_only(source: str) -> str:
    """The source's syntax tree without its docstrings (comments are not in it)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)
