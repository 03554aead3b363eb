"""One fixed maximum, whatever the route, the machine or the options: grading.yml's points.

A step that cannot be checked here (no GPU, `pytest assignments/` without --cuda) scores nothing
and stays in the maximum, its row says "—" and why, and the total says what it leaves out; only a
step grading.yml switches off (`options: {mode: off}`) is out of the maximum, in every route.
Before, pytest showed `/95` where the final grade showed `/100`.
"""

import itertools
import subprocess
import sys

import pytest

from autograder.engine.checks.check import Fail
from autograder.engine.course import config as grading_config
from autograder.engine.judge import table
from autograder.engine.judge.plan import cuda_available
from autograder.engine.judge.runner import grade
from autograder.engine.judge.score import score_step
from autograder.publish.classroom_result import reporter_result
from autograder.publish.gradescope import gradescope_results
from conftest import KIT, SOLUTIONS
from test_pytest_assignments import pytest_in, student_copy, table_line


def with_mode(mode):
    text = grading_config.default_path().read_text().replace("mode: auto", f"mode: {mode}")
    return grading_config.parse(text)


def course_maximum(config) -> float:
    return sum(step.points for step in config.steps if step.options.get("mode") != "off")


NOT_CHECKED = Fail("not_checked", {"reason": "no GPU here"})
WRONG = Fail("not_implemented", {"where": "mha/attention.py, line 3"})


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_a_step_s_maximum_is_its_points_whatever_ran(mode):
    """Every combination of outcomes (passed, failed, not checked) of every step's checks: the
    step's maximum is its points, unless the course switched it off and nothing was checked."""
    config = with_mode(mode)
    for step in config.steps:
        checks = config.step_modules()[step.id].CHECKS[:3]
        for combination in itertools.product([True, False, None], repeat=len(checks)):
            outcomes = [
                (check, passed, None if passed else NOT_CHECKED if passed is None else WRONG)
                for check, passed in zip(checks, combination, strict=True)
            ]
            result = score_step(step, outcomes)
            nothing_ran = all(passed is None for passed in combination)
            off = step.options.get("mode") == "off"
            assert result.max_score == (0.0 if nothing_ran and off else step.points), (step.id, combination)
            assert 0.0 <= result.score <= result.max_score


def every_route_maximum(result) -> dict:
    """The maximum each route shows for one graded result."""
    gradescope = gradescope_results(result, 1.0)
    return {
        "json": result.to_json()["max_score"],
        "table": float(table_total(table.table(result)).split("/")[1].split()[0]),
        "gradescope": round(sum(test["max_score"] for test in gradescope["tests"]), 4),
        "classroom": sum(reporter_result(step)["max_score"] for step in result.steps),
    }


def table_total(table: str) -> str:
    return next(line for line in table.splitlines() if line.strip().startswith("total"))


@pytest.mark.parametrize("mode", ["real", "auto", "off"])
def test_every_route_shows_the_course_maximum(mode):
    """The reference graded where the cuda step cannot run (mode real, no GPU), where it runs
    (auto: simulated) and where the course switched it off: JSON, table, Gradescope and
    Classroom all show grading.yml's maximum."""
    if mode == "real" and cuda_available():
        pytest.skip("with a GPU the cuda step runs")
    config = with_mode(mode)
    result = grade(SOLUTIONS, config)
    maximum = course_maximum(config)
    assert every_route_maximum(result) == dict.fromkeys(("json", "table", "gradescope", "classroom"), maximum)
    cuda = result.step("cuda")
    total = table_total(table.table(result))
    if mode == "real":
        assert cuda.status == "not_checked" and cuda.max_score == 5 and result.score == maximum - 5
        assert "cuda" in total and "not checked" in total  # the total says what it leaves out
        row = next(line for line in table.table(result).splitlines() if line.strip().startswith("cuda "))
        assert "— / 5.00" in row and "no CUDA device" in row
    else:
        assert result.score == maximum and "not checked" not in total


@pytest.mark.slow  # a student's pytest run, twice
def test_pytest_shows_the_fixed_maximum_with_and_without_cuda(tmp_path):
    """Without a GPU, `pytest assignments/` leaves the cuda step to --cuda: its row reads
    "— / 5" with how to run it, and the total is out of 100 and says what it leaves out."""
    if cuda_available():
        pytest.skip("with a GPU the cuda step always runs")
    maximum = course_maximum(grading_config.load(assignment="mha"))
    root = student_copy(tmp_path, SOLUTIONS / "mha")
    quick = pytest_in(root)
    assert quick.returncode == 0, quick.stdout[-3000:]
    assert "—" in table_line(quick.stdout, "cuda") and "--cuda" in table_line(quick.stdout, "cuda")
    total = table_line(quick.stdout, "total")
    assert f"{maximum - 5:.2f} / {maximum:g}" in total and "cuda" in total, total
    full = pytest_in(root, "--cuda")
    assert f"{maximum:.2f} / {maximum:g}" in table_line(full.stdout, "total")


@pytest.mark.slow  # grades a submission with a mistake, in Korean
def test_the_korean_json_is_korean(tmp_path, submission):
    """`grade --lang ko --json`: every text for people in the JSON is Korean (its step titles
    kept English before); ids, paths and numbers are not translated."""
    import json

    from planted import PLANTED

    path = submission(next(planted for planted in PLANTED if planted.diagnosis == "scale_by_d_model"))
    out = tmp_path / "ko.json"
    completed = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(path), "--lang", "ko", "--json", str(out), "--in-process"],
        capture_output=True,
        text=True,
        cwd=KIT,
        timeout=600,
    )
    assert out.is_file(), completed.stderr[-3000:]
    data = json.loads(out.read_text())
    english = [text for text in texts_for_people(data) if not any("\uac00" <= c <= "\ud7a3" for c in text)]
    assert english == []


def texts_for_people(data: dict) -> list:
    """The JSON's sentences and titles (not its ids, paths, code or printed output)."""
    found = [data["assignment"]]
    for step in data["steps"]:
        found.append(step["title"])
        found += [step[key] for key in ("mode_note",) if step.get(key)]
        found += [check["message"] for check in step["checks"] if check["message"]]
        found += [diagnosis["message"] for diagnosis in step["diagnoses"] if diagnosis.get("message")]
    return found


@pytest.mark.parametrize("passed", [(True, True, False), (False, False, False), (True, True, True)])
def test_classroom_s_all_or_nothing_mode_says_why_a_step_shows_0(passed, monkeypatch, capsys):
    """The default (command) mode gives a step all its points or none, on the exit status: a
    step whose table reads 5.36 / 15 showed 0 with no word why. Its log now says so (and how
    the instructor gets points per check); a step with nothing or everything says nothing more."""
    from autograder.routes import classroom

    config = grading_config.load(assignment="mha")
    step = config.step("attention")
    checks = config.step_modules()["attention"].CHECKS[: len(passed)]
    outcomes = [(check, ok, None if ok else WRONG) for check, ok in zip(checks, passed, strict=True)]
    result = reporter_result(score_step(step, outcomes))
    monkeypatch.setattr(
        classroom, "grade_every_step", lambda args, shallow: ({"attention": {"log": "", "result": result}}, False)
    )
    code = classroom.main(["attention", "--assignment", "mha", "--pass-fail", "--in-process", "--path", str(SOLUTIONS)])
    said = capsys.readouterr().out
    earned = sum(test["score"] for test in result["tests"])
    assert code == (0 if all(passed) else 1)
    if 0 < earned < step.points:
        assert "shows 0 for attention" in said and f"{earned} of {step.points:g} points" in said
        assert "--classroom fractional" in said
    else:
        assert "shows 0" not in said
