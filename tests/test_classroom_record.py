"""GitHub Classroom, honestly: the per-push score is feedback, the grade of record is the instructor's.

The workflow in a student's repository runs that repository's own files (the workflow, grading.yml,
the shipped grader), so it says in its own output that its score is feedback, and it is given no
secret (private mode, which handed a kit token to such a workflow, is gone). The instructor collects
the repositories as `gh classroom clone student-repos` lays them out and grades them with the
instructor's kit, sandboxed: a repository whose grading.yml, workflow or grader was edited gets its
honest grade, and the edit is named in grades.csv, the JSON and the class report.
"""

import csv
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from autograder.engine.checks import messages
from autograder.engine.course import config as grading_config
from autograder.publish import classroom_workflow
from autograder.publish.classroom_result import print_log
from autograder.publish.release import release
from autograder.routes import classroom, cli
from conftest import KIT, SOLUTIONS
from workflow_expressions import expand, runner_contexts

SCALE_MISTAKE = ("/ math.sqrt(d_k)", "/ d_k")  # attention scaled by d_k: the attention step's checks fail


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    return release(tmp_path_factory.mktemp("release") / "mha-lab", assignment="mha", notebooks=False)


def student_repository(released, base, login, mistake=False, edit=None):
    """<base>/mha-lab-submissions/mha-lab-<login>: the release with the reference filled in
    (scaled by d_k where `mistake`), `edit(repo)` applied, committed."""
    repo = base / "mha-lab-submissions" / f"mha-lab-{login}"
    shutil.copytree(released, repo)
    shutil.rmtree(repo / "assignments" / "mha")
    shutil.copytree(SOLUTIONS / "mha", repo / "assignments" / "mha")
    if mistake:
        attention = repo / "assignments" / "mha" / "attention.py"
        assert SCALE_MISTAKE[0] in attention.read_text()
        attention.write_text(attention.read_text().replace(*SCALE_MISTAKE))
    if edit is not None:
        edit(repo)
    git = ["git", "-c", "user.name=s", "-c", "user.email=s@x", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "done"], cwd=repo, check=True)
    return repo


def widen_tolerances(repo):
    text = (repo / "grading.yml").read_text()
    lines = [
        line.split("rtol:")[0] + "rtol: 1.0" if line.strip().startswith("rtol:") else line for line in text.splitlines()
    ]
    lines = [line.split("atol:")[0] + "atol: 10.0" if line.strip().startswith("atol:") else line for line in lines]
    assert lines != text.splitlines(), "grading.yml has no tolerance lines to widen: update this test"
    (repo / "grading.yml").write_text("\n".join(lines) + "\n")


def skip_the_checks(repo):
    workflow = repo / ".github" / "workflows" / "classroom.yml"
    document = yaml.safe_load(workflow.read_text())
    for step in document["jobs"]["autograding"]["steps"]:
        if "command" in step.get("with", {}):
            step["with"]["command"] = "true"  # every step passes, whatever the code
    workflow.write_text(yaml.safe_dump(document, sort_keys=False))


def pass_every_check(repo):
    # the shipped grader, edited to judge nothing: every public check passes
    verdict = repo / "autograder" / "engine" / "judge" / "verdict.py"
    verdict.write_text(verdict.read_text() + "\n\ndef judge(*args, **kwargs):\n    return None\n")


def test_private_mode_is_gone_and_says_why(tmp_path, capsys):
    assert cli.main(["release", str(tmp_path / "out"), "--classroom", "private"]) == 2
    err = capsys.readouterr().err
    assert "--classroom private is gone" in err and "grade <repositories>" in err
    assert not (tmp_path / "out").exists()
    assert not hasattr(classroom, "private_workflow") and not hasattr(classroom, "KIT_TOKEN")


@pytest.mark.parametrize("mode", ["command", "fractional"])
def test_no_workflow_is_given_a_secret_and_each_says_it_is_feedback(mode):
    for config in grading_config.load_all():
        text = classroom_workflow.workflow(config, mode)
        assert "secrets." not in text and "github.token" not in text
        assert "Its score is feedback, computed in this repository" in text
        document = yaml.safe_load(text)
        steps = document["jobs"]["autograding"]["steps"]
        assert steps[-1]["name"] == classroom_workflow.REPORT_STEP and "feedback" in steps[-1]["name"]
        assert not any("--reference" in json.dumps(step) for step in steps)
        assert not any(
            "token" in step.get("with", {}) or step.get("env") and "token" in str(step["env"]) for step in steps
        )


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_every_step_log_starts_by_saying_its_score_is_feedback(capsys, lang):
    from autograder.engine.judge.results import GradeResult, StepResult

    step = StepResult(id="padding", title="Pad", score=10.0, max_score=10.0, checks=[])
    with messages.speaking(lang):
        print_log(GradeResult(assignment="mha", submission="x", steps=[step]), "padding")
        note = messages.render("classroom_feedback")
    assert capsys.readouterr().out.startswith(note + "\n")
    assert "feedback" in note if lang == "en" else "피드백" in note
    # the step command prints it so (in the sandboxed run below, as the workflow runs it)


def grades(out) -> dict:
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        return {row["submission"]: row for row in csv.DictReader(f)}


def test_collected_repositories_get_their_honest_grade_and_the_tampering_named(released, tmp_path):
    """In-process (fast; the sandboxed run of the same is test_..._sandboxed below)."""
    from autograder.engine.operations.batch import grade_batch

    repos = [student_repository(released, tmp_path, "bob", mistake=True, edit=widen_tolerances)]
    config = grading_config.load(assignment="mha")
    results = grade_batch(repos, config, tmp_path / "grades", isolate=False)  # public checks: quick
    rows = grades(tmp_path / "grades")
    assert rows["mha-lab-bob"]["tampering"] == "changed: grading.yml"
    assert float(rows["mha-lab-bob"]["attention"]) < 15  # the instructor's tolerances, not the repository's
    assert results["mha-lab-bob"].kit_files["tampering"] == [{"file": "grading.yml", "change": "changed"}]
    data = json.loads((tmp_path / "grades" / "mha-lab-bob.json").read_text())
    assert data["kit_files"]["tampering"] == [{"file": "grading.yml", "change": "changed"}]


@pytest.mark.slow  # sandboxed grading of four repositories, the per-push commands and the report: CI runs it
def test_collected_repositories_are_graded_sandboxed_and_the_report_names_the_tampering(released, tmp_path):
    edits = {
        "alice": (False, None),
        "bob": (True, widen_tolerances),
        "carol": (True, skip_the_checks),
        "dave": (True, pass_every_check),
    }
    repos = {login: student_repository(released, tmp_path, login, *how) for login, how in edits.items()}
    # the per-push command, as the workflow runs it in bob's repository: his own tolerances pass his mistake
    workflow = yaml.safe_load((repos["bob"] / ".github" / "workflows" / "classroom.yml").read_text())
    command = next(s for s in workflow["jobs"]["autograding"]["steps"] if s.get("id") == "attention")["with"]["command"]
    [command] = expand([command], runner_contexts(tmp_path / "runner-temp", repos["bob"], workflow.get("env")))
    own = subprocess.run(
        ["bash", "-c", command.replace("python ", f"{sys.executable} ", 1)],
        cwd=repos["bob"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert own.returncode == 0, own.stdout[-2000:]  # feedback: forged, and it says so
    assert own.stdout.startswith(messages.render("classroom_feedback"))

    # the instructor's cycle as docs/classroom.md gives it, run as written (gh's clone aside: the
    # repositories above are laid out as it lays them out)
    out = tmp_path / "grades"
    cycle = documented_cycle()
    assert cycle[0].startswith("gh classroom clone student-repos")
    completed = run_as_documented(cycle[1:], tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = grades(out)
    assert set(rows) == {f"mha-lab-{login}" for login in edits}
    assert rows["mha-lab-alice"]["tampering"] == "" and float(rows["mha-lab-alice"]["total"]) == 100
    honest = float(rows["mha-lab-bob"]["total"])
    assert float(rows["mha-lab-bob"]["attention"]) < 15
    for login, named in (
        ("bob", "changed: grading.yml"),
        ("carol", "changed: .github/workflows/classroom.yml"),
        ("dave", "changed: autograder/engine/judge/verdict.py"),
    ):
        assert rows[f"mha-lab-{login}"]["tampering"] == named, login
        assert float(rows[f"mha-lab-{login}"]["total"]) == honest, login  # the same mistake, the same grade
    assert json.loads((out / "mha-lab-dave.json").read_text())["kit_files"]["tampering"][0]["change"] == "changed"

    html = (out / "report.html").read_text()  # the documented report
    assert "tampering: changed: grading.yml" in html and "Kit files changed since the release in 3 repositories" in html
    report = subprocess.run(
        [sys.executable, "-m", "autograder", "report", str(out), "--json", str(tmp_path / "report.json")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert report.returncode == 0, report.stderr[-2000:]
    data = json.loads((tmp_path / "report.json").read_text())
    assert sorted(row["id"] for row in data["summary"]["tampering"]) == ["mha-lab-bob", "mha-lab-carol", "mha-lab-dave"]


def documented_cycle() -> list:
    """The commands of docs/classroom.md's block that collects and grades the repositories."""
    from test_docs import shell_blocks

    text = (KIT / "docs" / "classroom.md").read_text(encoding="utf-8")
    block = next(body for _, body in shell_blocks(text) if "gh classroom clone" in body)
    return [line.split("   #")[0].strip() for line in block.splitlines() if line.strip()]


def run_as_documented(commands: list, cwd) -> subprocess.CompletedProcess:
    """`commands` in bash, in `cwd`, with this test run's Python as `python`."""
    bin_dir = cwd / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-e", "-c", "\n".join(commands)], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200
    )


def test_the_documented_cycle_is_the_one_the_test_runs():
    cycle = documented_cycle()
    assert [line.split()[:4] for line in cycle] == [
        ["gh", "classroom", "clone", "student-repos"],
        ["python", "-m", "autograder", "grade"],
        ["python", "-m", "autograder", "report"],
    ]
    assert "mha-lab-submissions/*/" in cycle[1] and "--out grades" in cycle[1]
