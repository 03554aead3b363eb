"""The GitHub Classroom workflow: generated from grading.yml, and its commands run for real."""

import base64
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from actionlint import actionlint
from autograder.engine.checks import messages
from autograder.engine.course import config as grading_config
from autograder.publish import classroom_workflow
from autograder.publish.classroom_workflow import runner_id
from autograder.publish.release import release
from autograder.routes import classroom
from conftest import SOLUTIONS
from planted import planted_of
from workflow_expressions import COMMAND_GRADER_KEEPS, expand, runner_contexts, runner_environment

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
    return run_on_a_runner(repo, step, tmp_path)[1:]


def run_on_a_runner(repo, step, tmp_path, language=None):
    """Run one graded step as a runner does: its expressions expanded by GitHub's evaluator in
    the contexts of a run (the runner's temporary folder, the run, the workflow's `env`, with
    MHA_LAB_LANG set to `language` where given, as an instructor edits it); the command
    grader's command with PATH and HOME only, as its released JavaScript runs it; a `run` step
    with the runner's environment and the workflow's. (completed, earned, max)."""
    document = yaml.safe_load((repo / ".github" / "workflows" / "classroom.yml").read_text())
    workflow_env = {**document.get("env", {}), **({"MHA_LAB_LANG": language} if language is not None else {})}
    contexts = runner_contexts(tmp_path / "runner-temp", repo, workflow_env)
    (tmp_path / "runner-temp").mkdir(exist_ok=True)
    (tmp_path / "home").mkdir(exist_ok=True)
    if "uses" in step:  # the all-or-nothing command grader: points if the command exits 0
        env = {name: os.environ[name] for name in COMMAND_GRADER_KEEPS} | {"HOME": str(tmp_path / "home")}
        [command] = expand([step["with"]["command"]], contexts)
        command = command.replace(" python ", f" {sys.executable} ", 1)
        completed = subprocess.run(  # /bin/sh, as node's execSync runs it
            ["sh", "-c", command], cwd=repo, env=env, capture_output=True, text=True, timeout=300
        )
        max_score = step["with"]["max-score"]
        return completed, (max_score if completed.returncode == 0 else 0), max_score
    output = tmp_path / f"{step['id']}.out"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | runner_environment(contexts)
    env |= contexts["env"] | {"GITHUB_OUTPUT": str(output), "HOME": str(tmp_path / "home")}
    command = step["run"].replace("$GITHUB_OUTPUT", str(output)).replace("python ", f"{sys.executable} ", 1)
    completed = subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode in (0, 1), completed.stderr[-3000:]
    line = next(text for text in output.read_text().splitlines() if text.startswith("result="))
    result = json.loads(base64.b64decode(line.removeprefix("result=")))
    assert set(result) >= {"status", "max_score", "tests"}
    return completed, sum(t["score"] for t in result["tests"]), result["max_score"]


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


def test_a_step_reads_the_runner_it_runs_on(classroom_release, tmp_path):
    """In command mode the command grader runs a step's command with PATH and HOME only: the
    grader saw no GITHUB_ACTIONS (no annotation on the student's file), no RUNNER_TEMP (the per-push
    cache outside the runner's temporary folder), no run (the cache's key) and not the workflow's
    MHA_LAB_LANG (English for a Korean course). Both modes read the same: each reaches the step."""
    mode, root = classroom_release
    mistake = next(m for m in planted_of("attention") if m.id == "output_upcast")
    repo = with_submission(root, tmp_path, mistake)
    attention = next(s for s in graded_steps(root) if s["id"] == "attention")
    completed, earned, max_score = run_on_a_runner(repo, attention, tmp_path, language="ko")
    assert earned < max_score
    assert completed.stdout.startswith(messages.render("classroom_feedback", lang="ko")), completed.stdout[:500]
    assert re.search(r"^::error file=assignments/mha/attention\.py,line=\d+,", completed.stdout, re.M), completed.stdout
    if classroom.cache_trusted_here():  # kept where the docs say: in the runner's temporary folder
        assert list((tmp_path / "runner-temp" / "mha-lab-classroom").glob("*.json")), completed.stdout[-2000:]
    assert not (tmp_path / "home" / ".cache" / "mha-lab" / "classroom").exists()  # not the default place


def test_the_workflow_speaks_the_language_it_was_released_in(monkeypatch):
    config = grading_config.load(assignment="mha")
    for lang in ("ko", "en"):
        monkeypatch.setenv("MHA_LAB_LANG", lang)
        assert yaml.safe_load(classroom_workflow.workflow(config))["env"] == {"MHA_LAB_LANG": lang}


def test_a_language_that_is_no_language_reaches_no_shell(classroom_release, tmp_path):
    """Whatever the workflow's MHA_LAB_LANG holds (an edit, a value from elsewhere), it reaches a
    command only where it is a language the grader speaks, never as shell text."""
    mode, root = classroom_release
    repo = with_submission(root, tmp_path)
    padding = next(s for s in graded_steps(root) if s["id"] == "padding")
    planted = f"ko'; touch {tmp_path / 'ran'}; echo '"
    completed, earned, max_score = run_on_a_runner(repo, padding, tmp_path, language=planted)
    assert earned == max_score and not (tmp_path / "ran").exists()
    if mode == "command":  # no language then; a `run` step reads the variable itself (anything else is English)
        assert completed.stdout.startswith(messages.render("classroom_feedback", lang="en"))


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
