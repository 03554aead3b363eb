"""The GitHub Actions recipe (docs/batch.md) for classes larger than one machine: linted with actionlint,
held to what a term needs (legs that do not cancel each other, re-runs that do not collide,
short-lived artifacts without the students' printed output, grading legs without the instructor
extras), and its steps run here as commands: every leg of the matrix, one leg re-run, the merge.
"""

import csv
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from actionlint import actionlint
from autograder.engine.course.secret import hidden_seed
from conftest import KIT, SOLUTIONS
from test_slurm import readme_block

FIRST_LINE = "# .github/workflows/grade.yml"


def recipe() -> dict:
    return yaml.safe_load(readme_block(FIRST_LINE))


def test_the_recipe_passes_actionlint(tmp_path):
    path = tmp_path / ".github" / "workflows" / "grade.yml"
    path.parent.mkdir(parents=True)
    path.write_text(readme_block(FIRST_LINE))
    completed = actionlint(path)
    assert completed.returncode == 0 and not completed.stdout, completed.stdout


def test_the_recipe_holds_what_a_term_needs():
    jobs = recipe()["jobs"]
    grade, merge = jobs["grade"], jobs["merge"]
    assert grade["strategy"]["fail-fast"] is False  # one failed leg does not cancel the others
    uploads = [
        s for job in (grade, merge) for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")
    ]
    assert uploads and all(s["with"]["overwrite"] is True for s in uploads)  # a re-run leg replaces its own
    assert all(s["with"]["retention-days"] <= 7 for s in uploads)
    runs = [s["run"] for s in grade["steps"] if "run" in s]
    assert any("--omit-output" in run for run in runs)  # no student's printed output in the artifacts
    assert not any("[instructor]" in run for run in runs)  # grading legs install the grader alone
    assert any("[instructor]" in s.get("run", "") for s in merge["steps"])  # the report's extras: merge only
    assert merge["if"] == "${{ !cancelled() }}"  # after a failed leg too: it names what to re-run
    shards = grade["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, len(shards) + 1))
    text = readme_block(FIRST_LINE)
    assert "/8" not in text and "strategy.job-total" in text  # the count is the matrix's, written once
    assert any('--workers "$(nproc)"' in run for run in runs)
    # every leg draws the hidden inputs from the course secret, never from a seed the recipe shows
    grading = next(s for s in grade["steps"] if "autograder grade" in s.get("run", ""))
    assert grading["env"] == {"MHA_LAB_COURSE_SECRET": "${{ secrets.MHA_LAB_COURSE_SECRET }}"}
    assert "--seed" not in text and "--preserve-env=MHA_LAB_COURSE_SECRET" in grading["run"]


def expand(text: str, shard: int, total: int) -> str:
    text = text.replace("${{ matrix.shard }}", str(shard)).replace("${{ strategy.job-total }}", str(total))
    assert "${{" not in text, text
    return text


def run_steps(steps, workdir, artifacts, shard=None, total=None, secrets=None):
    """Run a job's steps here: `run` steps with bash (the install step skipped: this environment
    has what it installs) and their `env` (`${{ secrets.NAME }}` from `secrets`), checkout and
    setup-python as no-ops, artifacts as folders in `artifacts`. The tests' course folder is not
    passed on: a leg has the course secret only where the recipe gives it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MHA_LAB_COURSE_DIR")}
    env["MHA_LAB_COURSE_DIR"] = str(workdir / ".mha-lab")  # the checkout's own: it has none
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    prelude = ""
    if os.geteuid() == 0 and shutil.which("sudo") is None:
        # already root here; sudo's own options dropped (--preserve-env: this keeps all of it)
        prelude = 'sudo() { while [[ "$1" == -* ]]; do shift; done; "$@"; }\n'
    for step in steps:
        uses = step.get("uses", "")
        if uses.startswith(("actions/checkout", "actions/setup-python")):
            continue
        if uses.startswith("actions/upload-artifact"):
            name = expand(step["with"]["name"], shard, total)
            source, target = workdir / expand(step["with"]["path"], shard, total), artifacts / name
            if target.exists():
                assert step["with"]["overwrite"], f"artifact {name} exists: a re-run would fail"
                shutil.rmtree(target)
            shutil.copytree(source, target)
            continue
        if uses.startswith("actions/download-artifact"):
            pattern = step["with"]["pattern"].replace("*", ".*")
            for artifact in artifacts.iterdir():
                if re.fullmatch(pattern, artifact.name):
                    shutil.copytree(artifact, workdir / step["with"]["path"] / artifact.name)
            continue
        assert not uses, uses
        if "pip install" in step["run"]:
            continue  # installs: this environment has the grader (and, for merge, the report's extras)
        given = {
            name: re.sub(r"\$\{\{ secrets\.(\w+) \}\}", lambda m: (secrets or {})[m.group(1)], value)
            for name, value in step.get("env", {}).items()
        }
        completed = subprocess.run(
            ["bash", "-e", "-c", prelude + expand(step["run"], shard, total)],
            cwd=workdir,
            env={**env, **given},
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]


@pytest.mark.slow
def test_the_recipes_steps_run_as_commands(tmp_path):
    """Every leg of the matrix and the merge, run as the workflow runs them; then one leg again
    (a re-run) and the merge again: the same complete grades."""
    jobs = recipe()["jobs"]
    shards = jobs["grade"]["strategy"]["matrix"]["shard"]
    checkout = tmp_path / "checkout"  # the kit's repository, with the class committed
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("autograder", "solutions", "assignments"):
        shutil.copytree(KIT / part, checkout / part, ignore=ignore)
    shutil.copyfile(KIT / "grading.yml", checkout / "grading.yml")
    names = [f"s{i:02d}" for i in range(6)]
    for index, name in enumerate(names):
        source = SOLUTIONS / "mha" if index % 2 else KIT / "assignments" / "mha"
        shutil.copytree(source, checkout / "submissions" / name / "mha", ignore=ignore)
        (checkout / "submissions" / name / "mha" / "padding.py").write_text(
            (checkout / "submissions" / name / "mha" / "padding.py").read_text() + "\nprint('private debugging')\n"
        )
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    secrets = {"MHA_LAB_COURSE_SECRET": "5e" * 32}
    for shard in shards:
        leg = tmp_path / f"leg-{shard}"
        shutil.copytree(checkout, leg, symlinks=True)
        run_steps(jobs["grade"]["steps"], leg, artifacts, shard, len(shards), secrets)
    again = tmp_path / "leg-again"
    shutil.copytree(checkout, again, symlinks=True)
    run_steps(jobs["grade"]["steps"], again, artifacts, 2, len(shards), secrets)  # "re-run failed jobs"
    merge = tmp_path / "merge"
    shutil.copytree(checkout, merge, symlinks=True)
    run_steps(jobs["merge"]["steps"], merge, artifacts)
    rows = list(csv.DictReader((artifacts / "grades" / "grades.csv").open()))
    assert sorted(row["submission"] for row in rows) == names
    for row in rows:
        expected = 100.0 if int(row["submission"][1:]) % 2 else 0.0
        assert abs(float(row["total"]) - expected) <= 5, row
    seed = hidden_seed(bytes.fromhex(secrets["MHA_LAB_COURSE_SECRET"]), "mha")
    for path in (artifacts / "grades").glob("*.json"):
        assert "private debugging" not in path.read_text()  # --omit-output
        assert json.loads(path.read_text())["output"] == ""
        assert json.loads(path.read_text())["seed"] == seed  # the secret reached every leg, through sudo
    assert (artifacts / "grades" / "report.html").exists()
