"""GitHub Classroom: what the grading reporter receives. Whole points that add up exactly, no
empty test list, line numbers and diagnoses where the reporter prints them, a step switched off
left out of the total; and a grade that the student's output and exits cannot change."""

import base64
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from autograder.engine.course import config as grading_config
from autograder.engine.judge.results import CheckResult, StepResult
from autograder.engine.judge.score import whole_points
from autograder.publish.classroom_result import reporter_result
from autograder.publish.classroom_workflow import workflow
from autograder.publish.public_view import public_step
from conftest import KIT, SOLUTIONS
from workflow_expressions import expand, runner_contexts


def check(id_, passed, points, max_points, message="", visibility="public"):
    return CheckResult(
        id=id_, passed=passed, points=points, max_points=max_points, visibility=visibility, message=message
    )


@pytest.mark.parametrize(
    "parts,total,expected",
    [
        ([10 / 3, 10 / 3, 0.0], 20 / 3, 7),  # 6.67 -> 7, never 6.66 + 0.01 shown as 6.67 / 6.66
        ([2.5, 2.5, 2.5, 0.0], 7.5, 8),  # 7.5 is not truncated to 7 by the reader
        ([2.73, 0.91, 1.82], 5.46, 5),
        ([0.0, 0.0], 0.0, 0),
    ],
)
def test_whole_points_add_up_to_the_rounded_total(parts, total, expected):
    points = whole_points(parts, total)
    assert all(isinstance(p, int) for p in points)
    assert sum(points) == expected
    assert all(abs(p - part) < 1 for p, part in zip(points, parts, strict=True))


def test_the_reporter_gets_whole_points_lines_and_diagnoses():
    step = StepResult(
        id="attention",
        title="Attention",
        score=10.0,
        max_score=15.0,
        checks=[
            check("a", True, 5.0, 5.0),
            check("b", True, 5.0, 5.0),
            check("c", False, 0.0, 5.0, "wrong values (mha/attention.py, line 12, in attention)"),
            check("d", False, 0.0, 0.0, "secret input of size 7", visibility="hidden"),
        ],
        diagnoses=[{"id": "no_scale", "message": "? you probably did not divide by sqrt(d_k)"}],
    )
    result = reporter_result(step)
    assert result["max_score"] == 15 and sum(t["score"] for t in result["tests"]) == 10
    failed = result["tests"][2]
    assert failed["line_no"] == 12 and "wrong values" in failed["test_code"] and "sqrt(d_k)" in failed["test_code"]
    assert all(isinstance(t["line_no"], int) for t in result["tests"])  # never "line undefined"
    hidden = result["tests"][3]
    assert "secret" not in json.dumps(hidden) and hidden["name"] == "attention: hidden check 1"


def test_a_step_with_no_check_run_is_off_the_total_and_never_empty():
    step = StepResult(
        id="cuda",
        title="Cuda",
        score=0.0,
        max_score=0.0,
        status="not_checked",
        checks=[check("runs", None, 0.0, 0.0, "not checked: no GPU")],
    )
    result = reporter_result(step)
    assert result["max_score"] == 0 and result["tests"]  # the reporter divides by len(tests): NaN
    assert result["status"] == "pass"


@pytest.mark.parametrize("mode", ["command", "fractional"])
def test_a_step_switched_off_is_left_out_of_the_workflow(mode):
    text = (KIT / "grading.yml").read_text().replace("mode: auto", "mode: off")
    config = grading_config.parse(text)
    document = yaml.safe_load(workflow(config, mode))
    runners = document["jobs"]["autograding"]["steps"][-1]["with"]["runners"].split(",")
    assert "cuda" not in runners and len(runners) == 8


FORGED = (
    "result="
    + base64.b64encode(
        json.dumps(
            {"version": 1, "status": "pass", "max_score": 10, "tests": [{"name": "x", "status": "pass", "score": 10}]}
        ).encode()
    ).decode()
)
BODY = "    ### BEGIN SOLUTION\n"
STUDENTS = {  # name: (what goes into pad_batch, what the reference line becomes)
    # wrong (pad_id ignored) and printing: a forged full-marks line and a line that is no output
    "prints": (f"    print({FORGED!r})\n    print('hello')\n", ("pad_id, dtype=torch.long)", "0, dtype=torch.long)")),
    "exits": ("    import os\n    os._exit(0)\n", None),
}


def student_repo(tmp_path, name):
    """A Classroom repository: grading.yml and assignments/mha, the reference with one change."""
    repo = tmp_path / "repo"
    shutil.copytree(SOLUTIONS / "mha", repo / "assignments" / "mha")
    for kit_file in ("conftest.py", "test_checks.py"):
        shutil.copyfile(KIT / "assignments" / kit_file, repo / "assignments" / kit_file)
    shutil.copyfile(KIT / "grading.yml", repo / "grading.yml")
    target = repo / "assignments" / "mha" / "padding.py"
    inserted, replace = STUDENTS[name]
    text = target.read_text().replace(BODY, BODY + inserted, 1)
    if replace:
        text = text.replace(*replace)
    target.write_text(text)
    return repo


def workflow_step(mode, step_id):
    config = grading_config.load()
    steps = yaml.safe_load(workflow(config, mode))["jobs"]["autograding"]["steps"]
    return next(s for s in steps if s.get("id") == step_id)


def run_workflow_command(command, repo, tmp_path):
    """A step's command as a runner hands it over: its `${{ }}` expanded (workflow_expressions)."""
    output = tmp_path / "github_output"
    output.touch()
    env = {**os.environ, "GITHUB_OUTPUT": str(output), "PYTHONPATH": str(KIT)}
    [command] = expand([command], runner_contexts(tmp_path / "runner-temp", repo))
    completed = subprocess.run(
        ["bash", "-c", command.replace("python ", f"{sys.executable} ", 1)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return completed, output.read_text()


@pytest.mark.slow  # a worker server boots for each run (about 10 s)
@pytest.mark.parametrize("name", sorted(STUDENTS))
def test_fractional_grade_is_unchanged_by_prints_and_exits(tmp_path, name):
    step = workflow_step("fractional", "padding")
    completed, output = run_workflow_command(step["run"], student_repo(tmp_path, name), tmp_path)
    lines = output.splitlines()
    assert all(re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", line) for line in lines), output  # GITHUB_OUTPUT's format
    results = [line for line in lines if line.startswith("result=")]
    assert len(results) == 1, (output, completed.stdout, completed.stderr)
    result = json.loads(base64.b64decode(results[0].removeprefix("result=")))
    score = sum(t["score"] for t in result["tests"])
    assert result["max_score"] == 10 and result["status"] == "fail"
    assert score < 10  # the forged line claims 10; os._exit(0) stops every check


@pytest.mark.slow
def test_command_mode_gives_no_points_for_exiting_early(tmp_path):
    step = workflow_step("command", "padding")
    completed, _ = run_workflow_command(step["with"]["command"], student_repo(tmp_path, "exits"), tmp_path)
    assert completed.returncode != 0, completed.stdout  # exit status 0 earns the step's points


# --- what a student reads beside the hidden checks' results (private Classroom, Gradescope) ----

HIDDEN_ONLY = {"id": "causal_ignores_device", "message": "? causal_mask ignores its device argument"}
PUBLIC = {"id": "no_scale", "message": "? you probably did not divide by sqrt(d_k)"}


def step_with_hidden_failure(*diagnoses, public=None):
    """A step whose public and hidden checks fail; `diagnoses` of every check, `public` (default:
    the same) those the public checks alone gave (runner.explain_public)."""
    return StepResult(
        id="masking",
        title="Masking",
        score=5.0,
        max_score=10.0,
        checks=[
            check("causal_mask_values", False, 0.0, 5.0, "values differ"),
            check("causal_mask_device", False, 0.0, 5.0, "device: expected meta, got cpu", visibility="hidden"),
        ],
        diagnoses=list(diagnoses),
        public_diagnoses=list(diagnoses if public is None else public),
    )


def test_only_diagnoses_a_student_release_ships_are_public():
    from autograder.engine.course import config as grading_config
    from autograder.engine.mistakes.diagnosis import public_message_ids
    from autograder.publish.public_view import public_diagnoses

    ids = public_message_ids(grading_config.load(assignment="mha"))
    assert PUBLIC["id"] in ids and HIDDEN_ONLY["id"] not in ids
    quoting_hidden = {"id": "no_known_mistake", "message": "? closest evidence: device: expected meta, got cpu"}
    quoting_public = {"id": "no_known_mistake", "message": "? closest evidence: values differ"}
    # what every check gave (the instructor's) and what the public checks alone gave: of those,
    # the ones whose message a student release ships
    step = step_with_hidden_failure(
        PUBLIC, HIDDEN_ONLY, quoting_hidden, quoting_public, public=[PUBLIC, HIDDEN_ONLY, quoting_public]
    )
    assert public_diagnoses(step, ids) == [PUBLIC, quoting_public]
    result = json.dumps(reporter_result(public_step(step, ids)))
    assert "sqrt(d_k)" in result and "device" not in result
    # a result that does not tell them apart (an older JSON): none
    assert public_diagnoses(dataclasses.replace(step, public_diagnoses=None), ids) == []


def test_gradescope_shows_a_visible_test_the_public_diagnoses_only():
    from autograder.engine.judge.results import GradeResult
    from autograder.publish.gradescope import gradescope_results

    step = step_with_hidden_failure(PUBLIC, HIDDEN_ONLY)
    data = gradescope_results(GradeResult("MHA", "upload", [step]), 1.0)
    visible, points = data["tests"]  # no test of a hidden check of its own: the step's points only
    assert visible["visibility"] == "visible" and points["visibility"] == "after_published"
    assert "sqrt(d_k)" in visible["output"] and "device" not in visible["output"]
    assert "ignores its device" not in json.dumps(data)  # the instructor's, even once published


def test_a_failure_points_to_a_real_file_and_line_and_annotates_it(tmp_path):
    """Fractional results gave line_no 0 for every wrong value: now the line a failure names, else
    the step's code (its TODO in the student's file); under Actions the verdict also goes on that
    file and line as an annotation."""
    from autograder.engine.checks import messages
    from autograder.publish.classroom_result import annotations, step_location

    package = tmp_path / "mha"
    shutil.copytree(SOLUTIONS / "mha", package)
    file, line = step_location(tmp_path, "mha", ["attention.py"], "attention")
    assert (
        file == "mha/attention.py"
        and "TODO (attention)" in (package / "attention.py").read_text().splitlines()[line - 1]
    )
    cause = messages.render("diagnosis.no_scale")
    step = StepResult(
        id="attention",
        title="Attention",
        score=5.0,
        max_score=15.0,
        checks=[
            check("weights", False, 0.0, 5.0, "weights: wrong values"),
            check("output", True, 5.0, 5.0),
            check("random_sizes", False, 0.0, 5.0, "secret input of size 7", visibility="hidden"),
        ],
        diagnoses=[{"id": "no_scale", "message": cause}],
    )
    result = reporter_result(step, (file, line))
    failed = result["tests"][0]
    assert failed["line_no"] == line and failed["test_code"].splitlines()[0] == "x " + cause
    assert result["tests"][2]["line_no"] == line and "secret" not in json.dumps(result)
    (annotation,) = annotations(step, (file, line), "Attention")
    assert annotation.startswith(f"::error file=assignments/mha/attention.py,line={line},title=Attention::x {cause}")
    assert "%0A" in annotation and "\n" not in annotation and "random_sizes" not in annotation
    raised = dataclasses.replace(
        step, checks=[check("weights", False, 0.0, 5.0, "your code raised X (mha/heads.py, line 12, in f)")]
    )
    assert annotations(raised, (file, line), "Attention")[0].startswith(
        "::error file=assignments/mha/heads.py,line=12,"
    )
