"""The record of CPU per phase (harness/phases.py) that benchmarks/phases.py reads: where it is
asked for, every grading writes one line that names the judge's phases and its workers', and
the grade is the grade without it; where it is not, nothing is recorded."""

import json

import pytest

from autograder.engine.judge.runner import grade
from autograder.harness import phases
from conftest import SOLUTIONS
from planted import planted_of


def burn():
    return sum(i * i for i in range(200_000))


def test_nothing_is_recorded_without_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(phases.ENV, raising=False)
    assert phases.begin() is None
    with phases.phase("scan"):
        assert phases.current() is None
    phases.end()
    assert list(tmp_path.iterdir()) == []


def test_an_inner_phase_pauses_the_outer_one(monkeypatch, tmp_path):
    record = tmp_path / "phases.jsonl"
    monkeypatch.setenv(phases.ENV, str(record))
    phases.begin()
    with phases.phase("outer", asks=True):
        with phases.phase("inner", asks=True):
            burn()
            phases.current().add_workers({"observing": 0.25, "written-out runs": 0.5, "bad": "x"})
        phases.current().add_workers({"observing": 1.0})
    phases.end()
    (line,) = [json.loads(text) for text in record.read_text().splitlines()]
    assert line["submissions"] == 1
    assert line["judge"]["inner"] > line["judge"]["outer"]  # the burn was the inner one's
    # a worker's answer is booked to the phase that asked for it; what is not a number is dropped
    assert line["workers"] == {"inner": 0.25, "written-out runs": 0.5, "outer": 1.0}


def result_of(graded):
    return [(s.id, s.score, [(c.id, c.passed, c.message_id) for c in s.checks]) for s in graded.steps]


@pytest.mark.slow
def test_a_sandboxed_grading_records_each_phase_and_grades_alike(monkeypatch, tmp_path, config, submission):
    """One line per grading, with the judge's phases and the workers' (their fork and
    confinement, the public and the hidden phase's observing, the integration step's probes of
    earlier steps and its written-out run), and the same grade as without the record."""
    mistake = next(m for m in planted_of("attention") if not m.needs_check)
    path = submission(mistake)
    steps = ["attention", "multi_head_attention"]
    monkeypatch.delenv(phases.ENV, raising=False)
    plain = grade(path, config, reference=SOLUTIONS, seed=7, steps=steps, isolate=True)
    record = tmp_path / "phases.jsonl"
    monkeypatch.setenv(phases.ENV, str(record))
    recorded = grade(path, config, reference=SOLUTIONS, seed=7, steps=steps, isolate=True)
    assert result_of(recorded) == result_of(plain)
    (line,) = [json.loads(text) for text in record.read_text().splitlines()]
    assert {"staging", "scan", "planning", "observing public", "observing hidden", "wire", "judging"} <= set(
        line["judge"]
    )
    workers = line["workers"]
    assert {"fork and confinement", "loading the package", "observing public", "observing hidden", "wire"} <= set(
        workers
    )
    assert workers["earlier-step probes"] > 0 and workers["written-out runs"] > 0
    assert all(seconds >= 0 for seconds in workers.values())
