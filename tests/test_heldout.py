"""The held-out mistakes (tests/heldout.py), graded end to end with the reference: each loses
points in its own step, and its diagnosis names it right (the first one a student reads); none
is named wrong. Prints the figures (`pytest tests/test_heldout.py -m "" -s`)."""

import shutil

import pytest

from autograder.engine.course import config as grading_config
from autograder.engine.judge.runner import grade
from conftest import SOLUTIONS
from heldout import CASES

pytestmark = pytest.mark.slow  # some twenty end-to-end gradings: CI runs them (pytest -m "")


def first_name(step):
    """The diagnosis a student reads first (feedback.explanation's cause), or None."""
    shown = {d["id"] for d in step.diagnoses}
    for d in step.diagnoses:
        if d["id"] != "no_known_mistake" and not set(d.get("refined_by") or ()) & shown:
            return d["id"]
    return None


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    configs = {c.id: c for c in grading_config.load_all()}
    found = {}
    for case in CASES:
        root = tmp_path_factory.mktemp(case.name)
        shutil.copytree(SOLUTIONS / case.assignment, root / case.assignment)
        for name, source in case.files.items():
            (root / case.assignment / name).write_text(source)
        result = grade(root, configs[case.assignment], reference=SOLUTIONS, seed=1234, steps=[case.step])
        found[case.name] = result.step(case.step)
    named = sum(first_name(found[c.name]) in c.names for c in CASES)
    print(f"\nheld-out: {named} of {len(CASES)} named right")
    return found


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_held_out_mistake_is_named_right(outcomes, case):
    step = outcomes[case.name]
    assert step.score < step.max_score, f"{case.name} lost nothing in {case.step}"
    assert first_name(step) in case.names, [(d["id"], d["message"]) for d in step.diagnoses]
