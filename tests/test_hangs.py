"""Issues 14 and 22: a hang costs one time limit. Once student code has hung in a function, every
later check that calls that function stops at once (it is trapped), in any step and through every
route; checks that do not reach it still run. Where the place is unknown, the rest of the hung
check's step is skipped."""

import re

import pytest

from autograder.assignments.mha.warmup import warm_up
from autograder.engine.course import config as grading_config
from autograder.engine.judge.runner import grade
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
    """The module step is judged with the hung attention written out (one hang, one charge)."""
    attention = endless_attention((SOLUTIONS / "mha" / "attention.py").read_text())
    if not isolate:  # what the worker server does before any check: the meta device's first triu
        warm_up()  # imports torch._dynamo (about a second): not the student's time
    result = grade(
        submission(files={"attention.py": attention}),
        short_timeout_config(1.5),  # the module's run twice (with attention written out), on a loaded machine
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


def test_a_hang_at_an_unknown_place_skips_only_the_rest_of_its_step():
    from autograder.engine.checks.check import Fail
    from autograder.engine.course.assignment import step_modules
    from autograder.engine.judge.in_process import Hangs
    from autograder.engine.judge.observation import Observation

    modules = step_modules("mha")
    attention, masking = modules["attention"].CHECKS, modules["masking"].CHECKS
    hangs = Hangs()
    stopped = Observation(error=Fail("timeout", {"seconds": 1, "where": "step attention"}), overran=True)
    assert hangs.note(attention[0], 1, stopped) is None  # nothing to trap: the place is unknown
    assert hangs.skipped(attention[1]).error.message_id == "skipped_after_hang"
    assert hangs.skipped(masking[0]) is None and hangs.skipped(masking[-1]) is None


def test_a_trapped_function_stops_every_caller_at_once_and_no_other_code(tmp_path):
    """Per function, not per file: after `stuck` hung once, a caller in another file stops at
    once (however it imported it); a function of the same file that does not call it runs."""
    from autograder.harness.observe import observe, trap
    from autograder.harness.package import Package

    package = tmp_path / "mha"
    package.mkdir()
    (package / "heads.py").write_text(
        "def stuck(x):\n    while True:\n        pass\n\n\ndef fine(x):\n    return x + 1\n"
    )
    (package / "mha.py").write_text("from .heads import stuck\n\n\ndef uses_it(x):\n    return stuck(x)\n")
    student = Package.load(tmp_path, "mha")
    first = observe(lambda mha, x: {"y": mha.mha.uses_it(x)}, student, {"x": 1}, timeout=0.3)
    assert first["kind"] == "timeout" and first["where"][::2] == ["heads.py", "stuck"]
    assert trap(student, "heads.py", "stuck")
    again = observe(lambda mha, x: {"y": mha.mha.uses_it(x)}, student, {"x": 1}, timeout=5)
    assert again["kind"] == "trapped" and again["function"] == ["heads.py", "stuck"]
    assert observe(lambda mha, x: {"y": mha.heads.fine(x)}, student, {"x": 1}, timeout=5)["values"] == {"y": 2}


def test_the_judge_believes_a_stop_only_in_a_function_it_saw_hang():
    """A "trapped" report names a function: the judge turns it into a skip only when it saw that
    function hang itself; any other is a malformed report (which scores nothing)."""
    from autograder.engine.judge.observation import Facts, Hang, read_report

    hang = Hang("weights", "attention", 10.0, "mha/attention.py, line 3, in f")
    facts = Facts("mha", frozenset({"attention.py"}), "masking", 10.0, (), {("attention.py", "f"): hang})
    seen = read_report({"kind": "trapped", "function": ["attention.py", "f"], "forbidden": []}, facts)
    assert seen.error.message_id == "skipped_after_hang_elsewhere" and seen.error.params["step"] == "attention"
    forged = read_report({"kind": "trapped", "function": ["attention.py", "g"], "forbidden": []}, facts)
    assert forged.error.message_id == "bad_worker_message"


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
    masking = table[table.index("  masking ") : table.index("  total ")]
    # one verdict for the checks the hang stopped, then the names it holds
    assert re.search(r"^\s+x .*not run again: it hung in check \w+ of step attention", masking, flags=re.M), table
    assert "in scaled_dot_product_attention" in masking.splitlines()[1], table
    blocked = re.search(r"^\s+\d+ of \d+ checks fail this way: (.*)$", masking, flags=re.M)
    assert blocked and set(blocked.group(1).split(", ")) == {
        "attention_padding",
        "attention_causal",
        "all_blocked_row_finite",
        "float32_mask",
    }, table
    assert not any(check in masking for check in MASKS_ONLY), table  # the mask-only checks ran and passed
