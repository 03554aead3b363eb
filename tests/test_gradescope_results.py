"""Gradescope's results.json shows students nothing of the hidden checks before publication."""
from autograder.routes.release import gradescope_results
from autograder.engine.results import CheckResult, GradeResult, StepResult


def test_the_top_level_output_leaves_the_hidden_checks_out():
    checks = [CheckResult("a", True, 4.0, 4.0, "public"), CheckResult("b", False, 0.0, 2.0, "public", "wrong"),
              CheckResult("c", True, 3.0, 3.0, "hidden"), CheckResult("d", False, 0.0, 1.0, "hidden", "wrong")]
    result = GradeResult("MHA", "upload", [StepResult("attention", "Attention", 7.0, 10.0, checks)])
    data = gradescope_results(result, 1.0)
    assert "4.00 / 6.00" in data["output"]
    assert "7.00" not in data["output"] and "/ 10" not in data["output"]  # the total with the hidden checks
    assert data["stdout_visibility"] == "hidden"  # the log prints the whole table
    assert [t["visibility"] for t in data["tests"]] == ["visible", "visible", "after_published", "after_published"]
    assert data["score"] == 7.0
