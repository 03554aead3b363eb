"""Gradescope's results.json shows students nothing of the hidden checks before publication, and
once published only each step's points."""

import json

import pytest

from autograder.engine.judge.results import CheckResult, GradeResult, StepResult
from autograder.publish.gradescope import gradescope_results


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
    # the public checks' tests, then the step's points: no test of a hidden check of its own
    assert [t["visibility"] for t in data["tests"]] == ["visible", "visible", "after_published"]
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
        for check, weight in zip(public, weights, strict=False):
            share = 10 * weight / total
            checks.append(
                CheckResult(check.id, check.passed, share if check.passed else 0.0, share, "public", check.message)
            )
        for index, (weight, passed) in enumerate(zip(hidden_weights, hidden_passed, strict=True)):
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
    once hidden inputs had reached it (the hidden phase's worker) is never in results.json (the
    log, which students never see, has it); what it printed before is the student's at once."""
    public = [CheckResult("a", True, 4.0, 4.0, "public")]
    hidden = public + [CheckResult("c", True, 3.0, 3.0, "hidden")]
    printed, secret = "public input: tensor([1., 2.])", "hidden input: tensor([0.1234, 0.5678])"
    with_hidden = gradescope_results(
        GradeResult(
            "MHA", "upload", [StepResult("attention", "A", 7.0, 7.0, hidden)], output=printed, hidden_output=secret
        ),
        1.0,
    )
    assert printed in with_hidden["output"]
    assert secret not in json.dumps(with_hidden)  # not even once published: the log has it
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


def hidden_outcome_variants():
    """One step graded several ways with the same points: the same public checks and outcomes,
    hidden checks that pass and fail other ways (which one, how many, their messages, what the
    code printed) for the same step score: what the code can choose from a hidden input."""
    public = [CheckResult("a", True, 2.0, 2.0, "public"), CheckResult("b", False, 0.0, 2.0, "public", "wrong")]
    for hidden, printed in (
        ([CheckResult("h0", True, 3.0, 3.0, "hidden"), CheckResult("h1", False, 0.0, 3.0, "hidden", "off at 0")], ""),
        ([CheckResult("h0", False, 0.0, 3.0, "hidden", "off at 7"), CheckResult("h1", True, 3.0, 3.0, "hidden")], ""),
        ([CheckResult("h0", False, 0.0, 3.0, "hidden", "NaN"), CheckResult("h1", True, 3.0, 3.0, "hidden")], "0.1234"),
    ):
        checks = public + hidden
        score = sum(check.points for check in checks)
        step = StepResult("attention", "A", score, 10.0, checks)
        yield GradeResult("MHA", "upload", [step], hidden_output=printed)


def test_once_published_the_hidden_checks_tell_only_the_steps_points():
    """The principle behind what Gradescope shows after publication: results.json as a whole
    (every test at every visibility, the top-level output) depends on the hidden checks only
    through each step's points. Which hidden check failed, its message, and what the code printed
    while they ran would each let the code tell a hidden input, a bit per check per run."""
    shown = {json.dumps(gradescope_results(result, 1.0), sort_keys=True) for result in hidden_outcome_variants()}
    assert len(shown) == 1, shown


def test_a_run_with_hidden_checks_ends_on_a_whole_quantum():
    """When Gradescope's results arrive is seen by the student: pad_run waits so that a run's
    length tells only its number of quanta. Counted with a clock of our own, never timed."""
    from autograder.publish.gradescope import pad_run

    waited = []
    for elapsed in (0.4, 3.7, 9.99, 10.0, 12.5):
        pad_run(100.0, 10.0, clock=lambda elapsed=elapsed: 100.0 + elapsed, sleep=waited.append)
        assert elapsed + (waited.pop() if waited else 0.0) == pytest.approx(10.0 * -(-elapsed // 10.0))


def test_the_gradescope_route_pads_only_when_hidden_checks_ran(monkeypatch, tmp_path):
    """run_gradescope pads a run with hidden checks (a reference), never a public-only one, and
    puts what the code printed in the hidden phase in the log only."""
    from autograder.engine.judge import runner
    from autograder.publish import gradescope
    from autograder.routes.cli import grade as grade_command

    result = next(hidden_outcome_variants())
    result.hidden_output = "printed in the hidden phase"
    monkeypatch.setattr(runner, "grade", lambda *args, **kwargs: result)
    padded = []
    monkeypatch.setattr(gradescope, "pad_run", lambda started: padded.append(started))
    for reference, pads in ((tmp_path, 1), (None, 0)):
        padded.clear()
        assert grade_command.run_gradescope(tmp_path, None, reference, 1, False, tmp_path / "results.json") == 0
        assert len(padded) == pads
        assert "printed in the hidden phase" not in (tmp_path / "results.json").read_text()
