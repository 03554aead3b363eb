"""The GitHub Classroom workflow: generated from grading.yml, and its commands run for real."""

import base64
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from actionlint import actionlint
from autograder.engine.course import config as grading_config
from autograder.routes.classroom import runner_id
from planted import planted_of
from autograder.routes.release import release
from conftest import SOLUTIONS

pytestmark = pytest.mark.slow  # real nbgrader / Classroom runs: minutes; CI runs them (pytest -m "")


@pytest.fixture(scope="module", params=["command", "fractional"])
def classroom_release(request, tmp_path_factory):
    root = release(tmp_path_factory.mktemp(request.param) / "repo", classroom=request.param, assignment="mha")
    return request.param, root


def workflow_steps(root):
    document = yaml.safe_load((root / ".github" / "workflows" / "classroom.yml").read_text())
    return document["jobs"]["autograding"]["steps"]


def with_submission(root, tmp_path, mistake=None):
    """A copy of the student repository with the reference (and maybe one mistake) filled in."""
    repo = tmp_path / "student-repo"
    shutil.copytree(root, repo)
    shutil.rmtree(repo / "assignments" / "mha")
    shutil.copytree(SOLUTIONS / "mha", repo / "assignments" / "mha")
    if mistake:
        target = repo / "assignments" / "mha" / mistake.file
        target.write_text(mistake.apply(target.read_text()))
    return repo


def run_step(repo, step, tmp_path):
    """Run one graded step as the workflow would; (points earned, max points)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if "uses" in step:  # the all-or-nothing command grader: points if the command exits 0
        completed = subprocess.run(
            ["bash", "-c", step["with"]["command"].replace("python ", f"{sys.executable} ", 1)],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        max_score = step["with"]["max-score"]
        return (max_score if completed.returncode == 0 else 0), max_score
    output = tmp_path / f"{step['id']}.out"
    env["GITHUB_OUTPUT"] = str(output)
    command = step["run"].replace("$GITHUB_OUTPUT", str(output)).replace("python ", f"{sys.executable} ", 1)
    subprocess.run(["bash", "-c", command], cwd=repo, env=env, check=True, capture_output=True, timeout=300)
    line = next(text for text in output.read_text().splitlines() if text.startswith("result="))
    result = json.loads(base64.b64decode(line.removeprefix("result=")))
    assert set(result) >= {"status", "max_score", "tests"}
    return sum(t["score"] for t in result["tests"]), result["max_score"]


def graded_steps(root):
    return [s for s in workflow_steps(root) if s.get("id")]


def test_workflow_wires_every_step_into_the_reporter(classroom_release):
    mode, root = classroom_release
    steps = workflow_steps(root)
    graded = graded_steps(root)
    assert [s["id"] for s in graded] == [runner_id(step.id) for step in grading_config.load(assignment="mha").steps]
    reporter = steps[-1]
    assert reporter["uses"] == "classroom-resources/autograding-grading-reporter@v1"
    # a step that fails (a grader error, a time-out) leaves the later steps and the report running
    assert all(s["if"] == "!cancelled()" for s in [*graded, reporter])
    assert reporter["with"]["runners"].split(",") == [s["id"] for s in graded]
    for step in graded:
        assert reporter["env"][f"{step['id'].upper()}_RESULTS"] == f"${{{{ steps.{step['id']}.outputs.result }}}}"
    assert "download.pytorch.org/whl/cpu" in steps[2]["run"]  # no CUDA packages on the runner
    if mode == "command":
        assert all(s["uses"] == "classroom-resources/autograding-command-grader@v1" for s in graded)
        assert sum(s["with"]["max-score"] for s in graded) == 100
        assert all("--pass-fail" in s["with"]["command"] for s in graded)  # graded in a worker process


@pytest.mark.parametrize("step_id", ["padding", "attention", "cuda"])
def test_reference_earns_each_steps_points(classroom_release, tmp_path, step_id):
    _, root = classroom_release
    repo = with_submission(root, tmp_path)
    step = next(s for s in graded_steps(root) if s["id"] == runner_id(step_id))
    earned, max_score = run_step(repo, step, tmp_path)
    assert earned == pytest.approx(max_score) and max_score > 0


def test_a_mistake_costs_points_in_its_step(classroom_release, tmp_path):
    mode, root = classroom_release
    mistake = next(m for m in planted_of("attention") if m.id == "output_upcast")  # fails 1 of 5 checks
    repo = with_submission(root, tmp_path, mistake)
    attention = next(s for s in graded_steps(root) if s["id"] == "attention")
    earned, max_score = run_step(repo, attention, tmp_path)
    if mode == "command":
        assert earned == 0  # all or nothing
    else:
        assert 0 < earned < max_score  # fractional: the other checks still count
    padding = next(s for s in graded_steps(root) if s["id"] == "padding")
    assert run_step(repo, padding, tmp_path)[0] == pytest.approx(10)


def test_workflow_passes_actionlint(classroom_release):
    _, root = classroom_release
    completed = actionlint(root / ".github" / "workflows" / "classroom.yml")
    assert completed.returncode == 0 and not completed.stdout, completed.stdout


def test_actionlint_reports_a_reporter_reading_a_step_that_does_not_exist(classroom_release, tmp_path):
    _, root = classroom_release
    document = yaml.safe_load((root / ".github" / "workflows" / "classroom.yml").read_text())
    reporter = document["jobs"]["autograding"]["steps"][-1]
    reporter["env"]["PADDING_RESULTS"] = "${{ steps.pading.outputs.result }}"  # a misspelt step id
    path = tmp_path / "classroom.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=120))
    completed = actionlint(path)
    assert completed.returncode == 1 and "pading" in completed.stdout, completed.stdout


def test_a_grading_yml_that_fails_validation_posts_an_error_in_every_step(classroom_release, tmp_path):
    """Fractional mode: a grading.yml that fails validation posted no result at all, and the
    reporter died on an empty JSON; now every step posts an error result that says why."""
    mode, root = classroom_release
    if mode != "fractional":
        pytest.skip("the command grader reads the exit status only")
    repo = with_submission(root, tmp_path)
    grading = repo / "grading.yml"
    grading.write_text(grading.read_text().replace("points:", "pointz:", 1))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for step in graded_steps(root):
        output = tmp_path / f"{step['id']}.out"
        command = step["run"].replace("$GITHUB_OUTPUT", str(output)).replace("python ", f"{sys.executable} ", 1)
        completed = subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True, text=True)
        assert completed.returncode == 2 and "pointz" in completed.stderr, completed.stderr[-2000:]
        lines = [text for text in output.read_text().splitlines() if text.startswith("result=")]
        assert len(lines) == 1, f"{step['id']} posted {len(lines)} results"
        result = json.loads(base64.b64decode(lines[0].removeprefix("result=")))  # as the reporter reads it
        assert result["status"] == "error" and result["tests"], result
        assert "grading.yml" in result["tests"][0]["message"] and "pointz" in result["tests"][0]["message"]
