"""Batch bookkeeping: every submission gets a unique id derived from its path, its own JSON and
its own row in grades.csv, whatever its directory is called."""

import csv
import io
import json

from autograder.engine.judge.results import GradeResult, StepResult
from autograder.engine.operations import batch
from autograder.engine.operations.batch import submission_ids


def test_ids_are_unique_and_tell_same_named_directories_apart(tmp_path):
    paths = [
        tmp_path / "x" / "alice",
        tmp_path / "y" / "alice",
        tmp_path / "z" / "alice-2",
        tmp_path / "z" / "alice",
        tmp_path / "bob",
        tmp_path / "a b",
        tmp_path / "a_b",
    ]
    ids = submission_ids(paths)
    assert len(set(ids)) == len(ids)
    assert ids[:5] == ["x__alice", "y__alice", "alice-2", "z__alice", "bob"]
    assert submission_ids([tmp_path / "alice", tmp_path / "alice"]) == ["alice", "alice"]


def fake_grade(path, config, **kwargs):
    """A result whose score tells which path was graded."""
    score = float(len(str(path)))
    return GradeResult(
        assignment="a",
        submission=str(path),
        seed=1,
        output="",
        steps=[StepResult(id="padding", title="t", score=score, max_score=1000.0, checks=[])],
    )


def test_batch_keeps_one_result_and_one_row_per_submission(tmp_path, monkeypatch):
    paths = [tmp_path / "x" / "alice", tmp_path / "y" / "alice", tmp_path / "z" / "alice-2", tmp_path / "z" / "alice"]
    monkeypatch.setattr(batch, "grade", fake_grade)
    out = tmp_path / "out"
    results = batch.grade_batch(paths, config=None, out=out, workers=1, isolate=False, log=io.StringIO())
    assert len(results) == 4
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert [row["path"] for row in rows] == [str(p) for p in paths]
    assert len({row["submission"] for row in rows}) == 4
    for row in rows:
        assert float(row["total"]) == len(row["path"])  # each row holds its own submission's result
        assert json.loads((out / f"{row['submission']}.json").read_text())["submission"] == row["path"]
