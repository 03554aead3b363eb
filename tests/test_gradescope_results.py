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
    assert "1 of 2 public checks passed" in data["output"]
    for number in ("4.00", "6.00", "7.00", "/ 10"):  # the public points would tell the hidden weight
        assert number not in data["output"]
    assert data["stdout_visibility"] == "hidden"  # the log prints the whole table
    assert [t["visibility"] for t in data["tests"]] == ["visible", "visible", *["after_published"] * 3]
    # no top-level score: Gradescope adds up the tests' (7.0) and shows no total while the hidden
    # ones wait for publication; a top-level score would be a total students see at once
    assert "score" not in data
    assert sum(test["score"] for test in data["tests"]) == 7.0
    assert "execution_time" not in data  # the hidden phase's code could draw it out


def hidden_weight_variants():
    """One step graded five ways: the same public checks and outcomes, hidden checks of other
    weights, numbers and outcomes (what a student must not learn before publication)."""
    public = [CheckResult("a", True, 0, 0, "public"), CheckResult("b", False, 0, 0, "public", "wrong")]
    for hidden_weights, hidden_passed in (
        ((1,), (True,)),
        ((3, 2), (False, True)),
        ((10,), (False,)),
        ((), ()),
        ((1, 1, 1), (True,) * 3),
    ):
        weights = [1, 2, *hidden_weights]
        total = sum(weights)
        checks = []
        for check, weight in zip(public, weights):
            share = 10 * weight / total
            checks.append(
                CheckResult(check.id, check.passed, share if check.passed else 0.0, share, "public", check.message)
            )
        for index, (weight, passed) in enumerate(zip(hidden_weights, hidden_passed)):
            share = 10 * weight / total
            checks.append(
                CheckResult(f"h{index}", passed, share if passed else 0.0, share, "hidden", "" if passed else "off")
            )
        score = sum(check.points for check in checks)
        yield hidden_weights, GradeResult("MHA", "upload", [StepResult("attention", "A", score, 10.0, checks)])


def test_what_students_see_before_publication_tells_nothing_of_the_hidden_checks_weights():
    """The principle behind Gradescope's visible maxima: the visible part of results.json (the
    top-level output and every `visible` test, maxima included) is the same whatever the hidden
    checks weigh and score; only their number shows (as the release's checks say it)."""
    seen = {}
    for hidden_weights, result in hidden_weight_variants():
        data = gradescope_results(result, 1.0)
        visible = [test for test in data["tests"] if test["visibility"] == "visible"]
        assert round(sum(test["score"] for test in data["tests"]), 4) == round(result.score, 4)
        if hidden_weights:
            assert all(test["max_score"] == 0 for test in visible)
            seen.setdefault(len(hidden_weights), set()).add(repr((visible, data["output"])))
    assert all(len(views) == 1 for views in seen.values()), seen


def test_what_the_code_printed_before_the_hidden_checks_is_shown_at_once():
    """Student code can print the inputs it is given, the hidden checks' too: what it printed
    once hidden inputs had reached it (the hidden phase's worker) waits for their visibility; what
    it printed before is the student's to see at once."""
    public = [CheckResult("a", True, 4.0, 4.0, "public")]
    hidden = public + [CheckResult("c", True, 3.0, 3.0, "hidden")]
    printed, secret = "public input: tensor([1., 2.])", "hidden input: tensor([0.1234, 0.5678])"
    with_hidden = gradescope_results(
        GradeResult(
            "MHA", "upload", [StepResult("attention", "A", 7.0, 7.0, hidden)], output=printed, hidden_output=secret
        ),
        1.0,
    )
    assert printed in with_hidden["output"] and secret not in with_hidden["output"]
    held = [test for test in with_hidden["tests"] if secret in test.get("output", "")]
    assert [test["visibility"] for test in held] == ["after_published"]
    assert [(test["score"], test["max_score"]) for test in held] == [(0, 0)]  # every test has a score
    assert not any(secret in test["output"] for test in with_hidden["tests"] if test["visibility"] == "visible")
    public_only = gradescope_results(
        GradeResult("MHA", "upload", [StepResult("attention", "A", 4.0, 4.0, public)], output=printed), 1.0
    )
    assert printed in public_only["output"]  # a public-only run (what the student sees locally) keeps it
    assert public_only["tests"][0]["max_score"] == 4.0  # no hidden weight to hide: the points are the check's


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
