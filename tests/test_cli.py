"""`python -m autograder grade`: the table, --json (documented shape), and batch mode (--out)."""

import csv
import json
import subprocess
import sys

import pytest

from conftest import KIT, SOLUTIONS, all_mistakes


def run(*args, cwd=KIT):
    return subprocess.run(
        [sys.executable, "-m", "autograder", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def assert_result_shape(data):
    assert set(data) >= {"assignment", "score", "max_score", "steps"}
    assert isinstance(data["score"], (int, float)) and isinstance(data["max_score"], (int, float))
    for step in data["steps"]:
        assert set(step) >= {"id", "title", "score", "max_score", "checks", "diagnoses"}
        assert isinstance(step["diagnoses"], list)
        for diagnosis in step["diagnoses"]:
            assert {"id", "message"} <= set(diagnosis) <= {"id", "message", "symptom", "refined_by"}
        for check in step["checks"]:
            assert set(check) >= {"id", "passed", "points", "max_points", "visibility", "message"}
            assert check["visibility"] in ("public", "hidden")
            assert check["passed"] in (True, False, None)
        assert step["score"] == pytest.approx(sum(c["points"] for c in step["checks"]), abs=1e-3)
    assert data["score"] == pytest.approx(sum(s["score"] for s in data["steps"]), abs=1e-3)


def test_grade_writes_json_of_the_documented_shape(tmp_path):
    out = tmp_path / "result.json"
    completed = run("grade", SOLUTIONS, "--assignment", "mha", "--json", out, "--seed", "5")
    assert completed.returncode == 0, completed.stderr
    assert "total" in completed.stdout
    data = json.loads(out.read_text())
    assert_result_shape(data)
    assert data["score"] == data["max_score"]
    assert {c["visibility"] for s in data["steps"] for c in s["checks"]} == {"public", "hidden"}


@pytest.mark.slow  # an end-to-end run of seconds: CI runs it (pytest -m "")
def test_batch_writes_one_json_per_submission_and_a_csv(tmp_path):
    step, mistake = next((s, m) for s, m in all_mistakes() if m.id == "no_scale")
    mutant = tmp_path / "student-b"
    (mutant / "mha").mkdir(parents=True)
    for path in (SOLUTIONS / "mha").glob("*.py"):
        text = path.read_text()
        (mutant / "mha" / path.name).write_text(mistake.apply(text) if path.name == mistake.file else text)
    empty = tmp_path / "student-c"
    empty.mkdir()
    out = tmp_path / "out"
    completed = run("grade", SOLUTIONS, mutant, empty, "--assignment", "mha", "--out", out, "--seed", "5")
    assert completed.returncode == 0, completed.stderr
    for name in ("solutions", "student-b", "student-c"):
        assert_result_shape(json.loads((out / f"{name}.json").read_text()))
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert [row["submission"] for row in rows] == ["solutions", "student-b", "student-c"]
    assert float(rows[0]["total"]) == float(rows[0]["max_score"])
    assert float(rows[1]["attention"]) < 15 and float(rows[1]["padding"]) == 10
    assert float(rows[2]["total"]) == 0


@pytest.mark.slow  # an end-to-end run of seconds: CI runs it (pytest -m "")
def test_grade_without_path_grades_the_shipped_assignments():
    completed = run("grade", "--public-only")
    assert completed.returncode == 0, completed.stderr
    assert "not implemented yet" in completed.stdout
    assert "total" in completed.stdout


def test_malformed_config_exits_with_a_clear_error(tmp_path):
    bad = tmp_path / "grading.yml"
    bad.write_text("id: mha\nassignment: x\nsteps:\n  - id: padding\n    title: P\n    points: lots\n")
    completed = run("grade", SOLUTIONS, "--config", bad)
    assert completed.returncode == 2
    assert "line 6" in completed.stderr and "points" in completed.stderr


def test_skeleton_check_passes_on_the_repository():
    completed = run("skeleton", "--check")
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_a_submission_the_grader_fails_on_is_not_scored_and_is_retried(tmp_path, monkeypatch):
    """The grader's own failure (a worker that would not start, say) is not the student's: that
    submission gets no score, an empty row and no JSON, the batch goes on, and the next run
    grades it (and only it) again. In-process, a batch grades one submission at a time whatever
    `workers` says (two at once in one interpreter mixed their modules: ann or cy lost points)."""
    import io
    import shutil

    from autograder.engine.course import config as grading_config
    from autograder.engine.operations import batch

    config = grading_config.load()
    paths = [tmp_path / name for name in ("ann", "bob", "cy")]
    for path in paths:
        shutil.copytree(SOLUTIONS / "mha", path / "mha")
    real_grade, graded = batch.grade, []

    def grade_but_fail_on_bob(path, *args, **kwargs):
        graded.append(path.name)
        if path.name == "bob":
            raise RuntimeError("a grading worker did not start")
        return real_grade(path, *args, **kwargs)

    monkeypatch.setattr(batch, "grade", grade_but_fail_on_bob)
    out, log = tmp_path / "out", io.StringIO()
    results = batch.grade_batch(paths, config, out, workers=2, isolate=False, log=log)
    assert results["bob"] is None and results["ann"].score == results["cy"].score == results["ann"].max_score
    assert "bob: NOT GRADED" in log.getvalue() and "did not start" in log.getvalue()
    assert not (out / "bob.json").exists() and (out / "ann.json").exists()
    rows = {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}
    assert rows["bob"]["total"] == "" and float(rows["cy"]["total"]) == float(rows["cy"]["max_score"])

    graded.clear()
    monkeypatch.setattr(batch, "grade", lambda path, *a, **k: graded.append(path.name) or real_grade(path, *a, **k))
    results = batch.grade_batch(paths, config, out, workers=2, isolate=False, log=io.StringIO())
    assert graded == ["bob"] and results["bob"].score == results["bob"].max_score


def test_a_submission_holding_two_assignments_needs_assignment_where_one_result_is_written(tmp_path):
    completed = run("grade", SOLUTIONS, "--json", tmp_path / "r.json", "--public-only", "--in-process")
    assert completed.returncode == 2 and "--assignment" in completed.stderr and "mha" in completed.stderr
    assert not (tmp_path / "r.json").exists()


def test_every_command_runs_from_its_module_of_the_table():
    """The command line is a table: each command the parser takes has a module of routes/cli/
    with `run(args)`, and the table names no command the parser does not take."""
    import argparse

    from autograder.routes import cli

    parser = cli.command_line()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(commands) == set(cli.COMMANDS)
    for command in commands:
        assert callable(cli.command_module(command).run), command
