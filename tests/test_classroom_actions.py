"""The Classroom workflow run through the real GitHub Classroom actions: the released JavaScript of
classroom-resources/autograding-command-grader@v1 and autograding-grading-reporter@v1, under node,
with the inputs, environment and output file a runner gives them.

Where they come from: they are published on GitHub only (no npm, PyPI or Debian package carries
them), so CI, which reaches those three registries and not GitHub, cannot have them, and these
tests skip there, saying so; CI runs tests/test_classroom.py and test_classroom_record.py instead,
which run the workflow's own commands and read their results as the reporter's source reads them.
On a machine that has them, put each action's `dist/main.js` (from its `v1` tag) in
MHA_LAB_CLASSROOM_ACTIONS/<action>/dist/main.js (default: MHA_LAB_CACHE/classroom-actions;
docs/development.md says how). Nothing of them is in this repository.

What they show: the per-push score comes from the student's repository and a student can raise it
(a widened tolerance in grading.yml turns a mistake into full points through the real actions),
the steps say in the log that it is feedback, and the instructor's grading of the same repository
gives the honest grade and names the edit.
"""

import base64
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autograder import cache_base
from autograder.engine.checks import messages
from autograder.publish.release import release
from autograder.routes import classroom
from test_classroom_record import student_repository, widen_tolerances
from workflow_expressions import expand, runner_contexts, runner_environment

pytestmark = pytest.mark.slow  # each workflow grades in the sandbox: tens of seconds

ACTIONS = {
    "classroom-resources/autograding-command-grader@v1": "autograding-command-grader",
    "classroom-resources/autograding-grading-reporter@v1": "autograding-grading-reporter",
}


def actions_folder() -> Path:
    return Path(os.environ.get("MHA_LAB_CLASSROOM_ACTIONS") or cache_base() / "classroom-actions")


def action_script(uses: str) -> Path:
    return actions_folder() / ACTIONS[uses] / "dist" / "main.js"


def missing() -> str:
    absent = [str(action_script(uses)) for uses in ACTIONS if not action_script(uses).is_file()]
    if absent:
        return (
            f"the Classroom actions' released JavaScript is not here ({', '.join(absent)}): it is on GitHub only, "
            "which CI cannot reach (docs/development.md); test_classroom.py runs the workflow's commands instead"
        )
    if shutil.which("node") is None:
        return "no node here to run the Classroom actions"
    return ""


@pytest.fixture(scope="module", autouse=True)
def actions_here():
    if missing():
        pytest.skip(missing())


def outputs_of(path: Path) -> dict:
    """The step outputs a runner reads from $GITHUB_OUTPUT: `name=value` lines and the
    `name<<DELIMITER ... DELIMITER` blocks @actions/core writes."""
    found, lines = {}, path.read_text().splitlines() if path.exists() else []
    index = 0
    while index < len(lines):
        line = lines[index]
        block = re.fullmatch(r"([\w-]+)<<(.+)", line)
        if block:
            end = lines.index(block.group(2), index + 1)
            found[block.group(1)] = "\n".join(lines[index + 1 : end])
            index = end + 1
            continue
        if "=" in line:
            name, value = line.split("=", 1)
            found[name] = value
        index += 1
    return found


def run_workflow(repo: Path, work: Path) -> dict:
    """Run the repository's own Classroom workflow as a runner would: the checkout, Python and
    install steps are this environment; each command-grader step and the reporter run their real
    JavaScript under node, `run` steps in bash, with the workflow's `env`; `with` and `env`
    values have their expressions expanded by GitHub's evaluator. {"log", "points": (earned,
    max), "steps"}."""
    document = yaml.safe_load((repo / ".github" / "workflows" / "classroom.yml").read_text())
    bin_dir = work / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    if not (bin_dir / "python").exists():  # what setup-python puts first on PATH (a link would lose the venv)
        (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        (bin_dir / "python").chmod(0o755)
    base = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HOME": str(work / "home"),  # the command grader passes PATH and HOME to its command
        **runner_environment(runner_contexts(work / "runner-temp", repo)),
    }
    (work / "home").mkdir(exist_ok=True)
    (work / "runner-temp").mkdir(exist_ok=True)
    outputs, log, ran = {}, [], []
    for number, step in enumerate(document["jobs"]["autograding"]["steps"]):
        uses = step.get("uses", "")
        if uses.startswith(("actions/checkout", "actions/setup-python")) or "pip install" in step.get("run", ""):
            continue  # this environment is that checkout, that Python, those packages
        output = work / f"output-{number}"
        output.write_text("")
        env = {**base, "GITHUB_OUTPUT": str(output)}
        contexts = runner_contexts(work / "runner-temp", repo, document.get("env"), outputs)
        env.update(contexts["env"])
        step_env = step.get("env", {})
        env.update(zip(step_env, expand(list(step_env.values()), contexts), strict=True))
        if uses:
            inputs = step.get("with", {})
            env.update(
                {
                    f"INPUT_{name.upper()}": value
                    for name, value in zip(inputs, expand(inputs.values(), contexts), strict=True)
                }
            )
            command = ["node", str(action_script(uses))]
        else:
            command = ["bash", "-e", "-c", step["run"]]
        completed = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
        log.append(completed.stdout + completed.stderr)
        ran.append((step.get("name"), completed.returncode))
        if step.get("id"):
            outputs[step["id"]] = outputs_of(output)
    text = "\n".join(log)
    points = re.search(r"::notice title=Autograding complete::Points ([\d.]+)/([\d.]+)", text)
    assert points, text[-3000:]
    return {"log": text, "points": (float(points.group(1)), float(points.group(2))), "steps": ran}


@pytest.fixture(scope="module", params=["command", "fractional"])
def released(request, tmp_path_factory):
    root = release(tmp_path_factory.mktemp(request.param) / "mha-lab", classroom=request.param, assignment="mha")
    return request.param, root


def test_the_reference_earns_full_points_through_the_real_actions(released, tmp_path):
    mode, root = released
    repo = student_repository(root, tmp_path, "alice")
    ran = run_workflow(repo, tmp_path / "runner")
    assert ran["points"] == (100.0, 100.0), ran["log"][-3000:]
    # each grading step said first that this score is feedback, computed in the repository
    assert ran["log"].count(messages.render("classroom_feedback")) >= 9


def test_a_widened_tolerance_forges_the_feedback_but_not_the_instructors_grade(released, tmp_path):
    mode, root = released
    repo = student_repository(root, tmp_path, "bob", mistake=True, edit=widen_tolerances)
    forged = run_workflow(repo, tmp_path / "runner")
    assert forged["points"] == (100.0, 100.0), forged["log"][-3000:]  # what the student's repository computes
    # the instructor's copy, as `gh classroom clone student-repos` makes it: what was pushed
    collected = tmp_path / "mha-lab-submissions-collected" / repo.name
    subprocess.run(["git", "clone", "-q", str(repo), str(collected)], check=True)
    out = tmp_path / "grades"
    completed = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(collected), "--assignment", "mha", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    with open(out / "grades.csv", newline="") as f:
        row = next(csv.DictReader(f))
    assert float(row["total"]) < 100 and float(row["attention"]) < 15  # the grade of record
    assert row["tampering"] == "changed: grading.yml"


def in_korean(repo):
    """The workflow's language set to Korean, as a release made with MHA_LAB_LANG=ko writes it."""
    workflow = repo / ".github" / "workflows" / "classroom.yml"
    workflow.write_text(workflow.read_text().replace("MHA_LAB_LANG: en", "MHA_LAB_LANG: ko", 1))


def test_a_step_reads_the_runner_it_runs_on_through_the_real_actions(released, tmp_path):
    """The command grader runs its command with PATH and HOME only: in command mode the grader
    saw no GITHUB_ACTIONS, RUNNER_TEMP, run or MHA_LAB_LANG. Now, in both modes: the log is in
    the workflow's language, the verdict is on the student's file, and the per-push cache is in
    the runner's temporary folder."""
    mode, root = released
    repo = student_repository(root, tmp_path, "erin", mistake=True, edit=in_korean)
    ran = run_workflow(repo, tmp_path / "runner")
    assert ran["points"][0] < 100
    assert ran["log"].count(messages.render("classroom_feedback", lang="ko")) >= 9, ran["log"][-3000:]
    assert re.search(r"^::error file=assignments/mha/attention\.py,line=\d+,", ran["log"], re.M), ran["log"][-3000:]
    if classroom.cache_trusted_here():
        assert list((tmp_path / "runner" / "runner-temp" / "mha-lab-classroom").glob("*.json"))
    assert not (tmp_path / "runner" / "home" / ".cache" / "mha-lab" / "classroom").exists()


def test_the_result_we_write_is_one_the_real_reporter_reads(tmp_path):
    """fractional mode's own results, read by the real reporter: whole points, and a step with
    nothing to check (0 of 0) neither divides by zero nor counts."""
    results = {
        "padding": {
            "version": 1,
            "status": "pass",
            "max_score": 10,
            "tests": [{"name": "p", "status": "pass", "score": 10, "line_no": 0}],
        },
        "cuda": {
            "version": 1,
            "status": "pass",
            "max_score": 0,
            "tests": [{"name": "c", "status": "pass", "score": 0, "line_no": 0, "message": "not checked"}],
        },
    }
    env = {
        "PATH": os.environ["PATH"],
        "INPUT_RUNNERS": "padding,cuda",
        **{f"{name.upper()}_RESULTS": base64.b64encode(json.dumps(r).encode()).decode() for name, r in results.items()},
    }
    uses = "classroom-resources/autograding-grading-reporter@v1"
    completed = subprocess.run(["node", str(action_script(uses))], env=env, capture_output=True, text=True, timeout=60)
    assert "::notice title=Autograding complete::Points 10/10" in completed.stdout, completed.stdout
    assert "NaN" not in completed.stdout
