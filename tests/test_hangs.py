"""Issue 14: a hang costs one time limit. Once student code has hung in a file, every later check
that runs that file (its declared files, and what they import) is skipped with no second wait,
in any step and through every route; checks that do not reach it still run."""

import re

import pytest

from autograder.engine import config as grading_config
from autograder.engine.runner import grade
from conftest import KIT, SOLUTIONS
from test_pytest_assignments import pytest_in, student_copy

ENDLESS_ATTENTION = ("    ### BEGIN SOLUTION\n", "    ### BEGIN SOLUTION\n    while True:\n        pass\n")
MASKS_ONLY = {"padding_mask_values", "padding_mask_pad_id", "causal_mask_values", "causal_mask_device", "random_masks"}


def endless_attention(source):
    assert ENDLESS_ATTENTION[0] in source
    return source.replace(*ENDLESS_ATTENTION, 1)  # the first part of scaled_dot_product_attention


def short_timeout_config(seconds):
    return grading_config.parse(grading_config.default_path().read_text().replace("timeout: 10", f"timeout: {seconds}"))


@pytest.mark.slow
@pytest.mark.parametrize("isolate", [False, True], ids=["in_process", "sandboxed"])
def test_a_hang_in_attention_is_waited_for_once_and_skips_what_runs_it_in_other_steps(submission, isolate):
    attention = endless_attention((SOLUTIONS / "mha" / "attention.py").read_text())
    result = grade(
        submission(files={"attention.py": attention}),
        short_timeout_config(0.5),
        reference=SOLUTIONS,
        steps=["attention", "masking", "multi_head_attention"],
        isolate=isolate,
    )
    ids = {step.id: {c.id: c.message_id for c in step.checks} for step in result.steps}
    every = [i for step in ids.values() for i in step.values()]
    assert every.count("timeout") == 1 and ids["attention"]["weights"] == "timeout", ids
    assert set(ids["attention"].values()) == {"timeout", "skipped_after_hang"}
    masking = result.step("masking")
    skipped = [c for c in masking.checks if c.message_id == "skipped_after_hang_elsewhere"]
    assert {c.id for c in skipped} == {c.id for c in masking.checks} - MASKS_ONLY, ids["masking"]
    assert all(
        "mha/attention.py, line" in c.message
        and "in scaled_dot_product_attention" in c.message
        and "check weights of step attention" in c.message
        for c in skipped
    ), skipped[0].message
    assert all(c.passed for c in masking.checks if c.id in MASKS_ONLY)  # they call only masking.py: still run
    assert result.step("multi_head_attention").score == result.step("multi_head_attention").max_score


def test_a_hang_outside_the_files_a_check_declares_skips_only_its_own_step():
    from autograder.engine.assignment import step_modules
    from autograder.engine.check import Fail
    from autograder.engine.runner import HangGuard, Observation

    modules = step_modules("mha")
    attention, masking = modules["attention"].CHECKS, modules["masking"].CHECKS
    guard = HangGuard()
    stuck = Observation(error=Fail("timeout", {"seconds": 1, "where": "mha/elsewhere.py, line 3, in helper"}))
    assert guard.note(attention[0], stuck)
    assert guard.skipped(attention[1]).error.message_id == "skipped_after_hang"
    assert guard.skipped(masking[0]) is None and guard.skipped(masking[-1]) is None
    guard = HangGuard()
    assert guard.note(
        attention[0],
        Observation(error=Fail("timeout", {"seconds": 1, "where": "see above"})),
        location="mha/attention.py, line 9, in scaled_dot_product_attention",
    )
    by_id = {c.id: guard.skipped(c) for c in masking}
    assert by_id["attention_padding"].error.params["step"] == "attention"
    assert by_id["causal_mask_values"] is None


def test_a_hang_in_a_file_a_step_imports_skips_that_step(tmp_path):
    """The guard follows the submission's imports: mha.py importing attention.py runs it."""
    from autograder.engine.assignment import step_modules
    from autograder.engine.check import Fail
    from autograder.engine.runner import HangGuard, Observation

    package = tmp_path / "mha"
    package.mkdir()
    (package / "attention.py").write_text("def scaled_dot_product_attention(q, k, v):\n    pass\n")
    (package / "mha.py").write_text("from .attention import scaled_dot_product_attention\n")
    modules = step_modules("mha")
    guard = HangGuard(tmp_path)
    stuck = Observation(error=Fail("timeout", {"seconds": 1, "where": "mha/attention.py, line 2, in f"}))
    assert guard.note(modules["attention"].CHECKS[0], stuck)
    assert guard.skipped(modules["multi_head_attention"].CHECKS[0]).error.message_id == "skipped_after_hang_elsewhere"
    assert HangGuard().note(modules["attention"].CHECKS[0], stuck)  # without the sources: declared files only
    alone = HangGuard()
    alone.note(modules["attention"].CHECKS[0], stuck)
    assert alone.skipped(modules["multi_head_attention"].CHECKS[0]) is None


@pytest.mark.slow
def test_pytest_waits_once_for_a_hang_in_attention_and_runs_the_mask_only_checks(tmp_path):
    grading = (KIT / "grading.yml").read_text().replace("timeout: 10", "timeout: 1")
    root = student_copy(tmp_path, SOLUTIONS / "mha", grading)
    attention = root / "assignments" / "mha" / "attention.py"
    attention.write_text(endless_attention(attention.read_text()))
    out = pytest_in(root, "--step", "attention", "--step", "masking").stdout
    # the reports of the failing tests, not pytest's summary lines (cut to the terminal's width,
    # except where CI is set: then they repeat the reason)
    reports = out.split("short test summary info")[0]
    assert reports.count("Timeout (>1.0s)") == 1, out[-4000:]
    table = out[out.index("MHA Lab score") :]
    failures = dict(re.findall(r"^\s+x (\w+): (.*)$", table, flags=re.M))
    masked = {check: message for check, message in failures.items() if "of step attention" in message}
    assert set(masked) == {"attention_padding", "attention_causal", "all_blocked_row_finite", "float32_mask"}, table
    assert all("in scaled_dot_product_attention" in message for message in masked.values())
    assert not MASKS_ONLY & set(failures)
