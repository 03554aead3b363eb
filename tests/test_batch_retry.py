"""A check that timed out while neighbours ran is graded again, alone, before it is charged:
a hostile neighbour must not cost an honest submission points."""

import json
import threading

from autograder.engine.judge.results import CheckResult, GradeResult, StepResult
from autograder.engine.operations import batch


def result_with(message_id):
    check = CheckResult(
        id="values",
        passed=message_id is None,
        points=0.0 if message_id else 1.0,
        max_points=1.0,
        visibility="public",
        message="",
        message_id=message_id,
    )
    step = StepResult(id="padding", title="Padding", score=check.points, max_score=1.0, checks=[check])
    return GradeResult(assignment="test", submission="", steps=[step])


def test_a_submission_that_timed_out_in_company_is_graded_again_alone(tmp_path, monkeypatch, config):
    running, calls, lock = [0], [], threading.Lock()

    def fake_grade(path, *args, **kwargs):
        with lock:
            running[0] += 1
            calls.append((path, running[0]))
        try:
            first = sum(1 for p, _ in calls if p == path) == 1
            return result_with("timeout" if path.endswith("slow") and first else None)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(batch, "grade", fake_grade)
    paths = [str(tmp_path / name) for name in ("a", "slow", "b", "c")]
    results = batch.grade_batch(paths, config, tmp_path / "out", workers=2)
    assert [p for p, _ in calls].count(paths[1]) == 2
    assert calls[-1] == (paths[1], 1)  # the second time, nothing else was running
    assert results["slow"].score == 1.0
    saved = json.loads((tmp_path / "out" / "slow.json").read_text())
    assert saved["score"] == 1.0


def test_a_lone_worker_does_not_grade_twice(tmp_path, monkeypatch, config):
    calls = []
    monkeypatch.setattr(batch, "grade", lambda path, *a, **k: calls.append(path) or result_with("timeout"))
    batch.grade_batch([str(tmp_path / "x")], config, tmp_path / "out", workers=1)
    assert len(calls) == 1
