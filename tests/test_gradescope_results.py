"""Gradescope's results.json shows students nothing of the hidden checks before publication."""

from autograder.routes.gradescope import gradescope_results
from autograder.engine.judge.results import CheckResult, GradeResult, StepResult


def test_the_top_level_output_leaves_the_hidden_checks_out():
    checks = [
        CheckResult("a", True, 4.0, 4.0, "public"),
        CheckResult("b", False, 0.0, 2.0, "public", "wrong"),
        CheckResult("c", True, 3.0, 3.0, "hidden"),
        CheckResult("d", False, 0.0, 1.0, "hidden", "wrong"),
    ]
    result = GradeResult("MHA", "upload", [StepResult("attention", "Attention", 7.0, 10.0, checks)])
    data = gradescope_results(result, 1.0)
    assert "4.00 / 6.00" in data["output"]
    assert "7.00" not in data["output"] and "/ 10" not in data["output"]  # the total with the hidden checks
    assert data["stdout_visibility"] == "hidden"  # the log prints the whole table
    assert [t["visibility"] for t in data["tests"]] == ["visible", "visible", "after_published", "after_published"]
    # no top-level score: Gradescope adds up the tests' (7.0) and shows no total while the hidden
    # ones wait for publication; a top-level score would be a total students see at once
    assert "score" not in data
    assert sum(test["score"] for test in data["tests"]) == 7.0


def test_what_the_code_printed_is_shown_as_the_hidden_checks_are():
    """Student code can print the inputs it is given, the hidden checks' too: where hidden checks
    ran, its printed output waits for their visibility instead of the top-level output."""
    public = [CheckResult("a", True, 4.0, 4.0, "public")]
    hidden = public + [CheckResult("c", True, 3.0, 3.0, "hidden")]
    printed = "hidden input: tensor([0.1234, 0.5678])"
    with_hidden = gradescope_results(
        GradeResult("MHA", "upload", [StepResult("attention", "A", 7.0, 7.0, hidden)], output=printed), 1.0
    )
    assert printed not in with_hidden["output"]
    held = [test for test in with_hidden["tests"] if test.get("output") == printed]
    assert [test["visibility"] for test in held] == ["after_published"]
    assert [(test["score"], test["max_score"]) for test in held] == [(0, 0)]  # every test has a score
    public_only = gradescope_results(
        GradeResult("MHA", "upload", [StepResult("attention", "A", 4.0, 4.0, public)], output=printed), 1.0
    )
    assert printed in public_only["output"]  # a public-only run (what the student sees locally) keeps it


def test_a_failing_test_points_to_the_paragraph_that_teaches_it():
    """As the score table does: Gradescope's failing test says where the skeleton explains it."""
    from autograder.engine.checks import messages

    checks = [
        CheckResult("weights", False, 0.0, 4.0, "public", "wrong"),
        CheckResult("output", True, 4.0, 4.0, "public"),
    ]
    data = gradescope_results(GradeResult("MHA", "upload", [StepResult("attention", "A", 4.0, 8.0, checks)]), 1.0)
    where = messages.concept("attention", "weights")
    assert where and "mha/attention.py" in where
    failing, passing = data["tests"]
    assert messages.render("table.see_concept", where=where) in failing["output"]
    assert "→" not in passing["output"]


def test_the_tests_add_up_to_the_total_exactly():
    """Without a top-level score Gradescope adds up the tests: seven checks of 15/7 points each
    must make 15, not 14.9999."""
    checks = [CheckResult(f"c{i}", True, 15 / 7, 15 / 7, "public") for i in range(7)]
    data = gradescope_results(GradeResult("MHA", "upload", [StepResult("attention", "A", 15.0, 15.0, checks)]), 1.0)
    assert round(sum(test["score"] for test in data["tests"]), 6) == 15.0
    assert round(sum(test["max_score"] for test in data["tests"]), 6) == 15.0
    assert all(abs(test["score"] - 15 / 7) < 2e-4 for test in data["tests"])
