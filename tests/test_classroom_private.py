"""The private-kit Classroom workflow: the token and the kit only in the job that receives the
submission's files alone, student code never beside them outside the sandbox."""

import base64
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from autograder.engine.course import config as grading_config
from autograder.routes.classroom import KIT_TOKEN, graded_steps, private_workflow, runner_id
from actionlint import actionlint
from conftest import KIT, SOLUTIONS
from planted import PLANTED

KIT_REPO = "teacher/mha-lab-private"


@pytest.fixture(scope="module")
def document():
    config = grading_config.load()
    return yaml.safe_load(private_workflow(config, KIT_REPO)), config


def test_the_token_and_the_kit_reach_one_step_of_the_grading_job_only(document):
    document, _ = document
    jobs = document["jobs"]
    assert list(jobs) == ["submission", "grade", "report"]
    for name, job in jobs.items():
        for step in job["steps"]:
            text = json.dumps(step)
            is_kit_checkout = name == "grade" and step.get("with", {}).get("repository") == KIT_REPO
            assert ("secrets." in text) == is_kit_checkout, (name, step)
            assert (KIT_REPO in text) == is_kit_checkout, (name, step)
            if step.get("uses", "").startswith("actions/checkout"):
                assert step["with"]["persist-credentials"] is False  # the token is written nowhere
    assert document["permissions"] == {} and jobs["grade"]["permissions"] == {}


def test_the_grading_job_gets_the_submission_files_only(document):
    document, _ = document
    jobs = document["jobs"]
    assert not any("run" in step for step in jobs["submission"]["steps"])  # no student code runs there
    upload = jobs["submission"]["steps"][-1]
    assert upload["uses"].startswith("actions/upload-artifact") and upload["with"]["path"] == "assignments/mha/*.py"
    grade = jobs["grade"]
    assert grade["needs"] == "submission"
    checkouts = [s for s in grade["steps"] if s.get("uses", "").startswith("actions/checkout")]
    assert [s["with"]["repository"] for s in checkouts] == [KIT_REPO]  # never the student's repository
    assert any(s.get("uses", "").startswith("actions/download-artifact") for s in grade["steps"])


def test_the_report_reads_every_graded_step_from_the_grading_job(document):
    document, config = document
    ids = [runner_id(step.id) for step in graded_steps(config)]
    report = document["jobs"]["report"]
    assert report["needs"] == "grade" and "token" not in json.dumps(report)
    reporter = report["steps"][0]
    assert reporter["with"]["runners"].split(",") == ids
    for runner in ids:
        assert reporter["env"][f"{runner.upper()}_RESULTS"] == f"${{{{ needs.grade.outputs.{runner} }}}}"
        assert document["jobs"]["grade"]["outputs"][runner] == f"${{{{ steps.{runner}.outputs.result }}}}"
    assert KIT_TOKEN == "MHA_LAB_KIT_TOKEN"


def test_release_needs_the_kit_repository_for_the_private_workflow(tmp_path):
    from autograder.routes.cli import main

    assert main(["release", str(tmp_path / "out"), "--classroom", "private"]) == 2
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # a worker server boots (about 10 s)
def test_a_grading_step_runs_from_the_kit_with_the_hidden_checks(document, tmp_path):
    document, _ = document
    step = next(s for s in document["jobs"]["grade"]["steps"] if s.get("id") == "padding")
    shutil.copytree(SOLUTIONS / "mha", tmp_path / "submission" / "mha")
    output = tmp_path / "github_output"
    command = (
        step["run"].replace("../submission", str(tmp_path / "submission")).replace("python ", f"{sys.executable} ", 1)
    )
    env = {**os.environ, "GITHUB_OUTPUT": str(output)}
    completed = subprocess.run(["bash", "-c", command], cwd=KIT, env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    result = json.loads(base64.b64decode(output.read_text().strip().removeprefix("result=")))
    assert any("hidden check" in t["name"] for t in result["tests"])
    assert sum(t["score"] for t in result["tests"]) == result["max_score"] == 10


def test_the_private_workflow_passes_actionlint(document, tmp_path):
    config = document[1]
    path = tmp_path / "classroom.yml"
    path.write_text(private_workflow(config, KIT_REPO))
    completed = actionlint(path)
    assert completed.returncode == 0 and not completed.stdout, completed.stdout


@pytest.mark.parametrize(
    "break_it,finding",
    [
        (lambda jobs: jobs["grade"].update({"run-on": jobs["grade"].pop("runs-on")}), "run-on"),  # a misspelt key
        (lambda jobs: jobs["report"].update({"needs": "grades"}), "grades"),  # a job that does not exist
        (lambda jobs: jobs["report"].update({"if": "!cancelled() && needs.grading.result != 'skipped'"}), "grading"),
    ],
    ids=["misspelt-runs-on", "unknown-needs", "unknown-job-in-if"],
)
def test_actionlint_reports_a_broken_private_workflow(document, tmp_path, break_it, finding):
    config = document[1]
    broken = yaml.safe_load(private_workflow(config, KIT_REPO))
    break_it(broken["jobs"])
    path = tmp_path / "classroom.yml"
    path.write_text(yaml.safe_dump(broken, sort_keys=False, width=120))
    completed = actionlint(path)
    assert completed.returncode == 1 and finding in completed.stdout, completed.stdout


def test_the_sandbox_tools_install_after_an_apt_update(document):
    document, _ = document
    install = next(s["run"] for s in document["jobs"]["grade"]["steps"] if "bubblewrap" in s.get("run", ""))
    commands = [c.strip() for c in install.split("&&")]
    assert commands[0] == "sudo apt-get update -qq", install  # a runner's package lists can be stale
    assert commands[1].startswith("sudo apt-get install -y")


def test_a_failing_grading_step_still_gets_a_report(document):
    """A grading step that errors (exit 1, with an error result) fails the grade job: the later
    steps and the report still run. Not after a cancel, not when grading was skipped (the
    Classroom bot's push)."""
    document, config = document
    assert document["on"] == {
        "push": {"paths": ["assignments/mha/**", ".github/workflows/classroom.yml"]},  # what the repository is for
        "workflow_dispatch": None,
        "repository_dispatch": None,
    }
    grading = [s for s in document["jobs"]["grade"]["steps"] if s.get("id")]
    assert len(grading) == len(graded_steps(config)) and all(s["if"] == "!cancelled()" for s in grading)
    report = document["jobs"]["report"]
    assert report["needs"] == "grade" and report["if"] == "!cancelled() && needs.grade.result != 'skipped'"


def masking_submission(tmp_path):
    """The reference with a mistake only a hidden check sees (causal_mask ignores `device`), and
    a print of what causal_mask is given: the hidden checks' inputs among them."""
    mistake = next(p for p in PLANTED if p.name == "causal_ignores_device")
    shutil.copytree(SOLUTIONS / "mha", tmp_path / "submission" / "mha")
    target = tmp_path / "submission" / "mha" / mistake.file
    source = mistake.apply(target.read_text())
    ret = "    return torch.triu(ones, diagonal=1)"
    assert source.count(ret) == 1
    target.write_text(source.replace(ret, "    print('student printed', seq_len)\n" + ret))
    return tmp_path / "submission"


def run_masking(command, tmp_path):
    output = tmp_path / "github_output"
    output.unlink(missing_ok=True)
    env = {**os.environ, "GITHUB_OUTPUT": str(output)}
    completed = subprocess.run(
        ["bash", "-c", command.replace("python ", f"{sys.executable} ", 1)],
        cwd=KIT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(base64.b64decode(output.read_text().strip().removeprefix("result=")))
    return completed.stdout + completed.stderr, result


@pytest.mark.slow  # two worker servers boot (about 10 s each)
def test_the_log_and_the_result_tell_nothing_of_the_hidden_checks(document, tmp_path):
    document, _ = document
    submission = masking_submission(tmp_path)
    step = next(s for s in document["jobs"]["grade"]["steps"] if s.get("id") == "masking")
    log, result = run_masking(step["run"].replace("../submission", str(submission)), tmp_path)
    failed = [t for t in result["tests"] if t["status"] == "fail"]
    assert [t["name"] for t in failed] == ["masking: hidden check 1"]  # the mistake costs points
    for text in (log, json.dumps(result)):
        assert "device" not in text  # the hidden check's id, its message, the hidden-only diagnosis
    assert "student printed" not in log  # it could print the hidden checks' inputs
    assert "hidden checks: 3" in log  # a count and points
    # The public checks alone (a student's own run): what the submission printed is shown, once:
    # in the first step's log (every step is graded in one run, the output is the whole run's).
    public = (
        f"python -m autograder.routes.classroom padding --assignment mha --path {submission} --config grading.yml "
        '--output "$GITHUB_OUTPUT"'
    )
    log, result = run_masking(public, tmp_path)
    assert "student printed" in log and all(t["status"] == "pass" for t in result["tests"])
