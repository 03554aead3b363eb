"""The gradebook of a `grade --out` folder (engine/operations/gradebook.py): the whole class in
grades.csv whatever is re-graded, every grading kept, adjustments and the late policy settled
into the JSON, the CSV and its notes. Grading is faked here (a score read from the submission's
own file): what is tested is what the folder keeps; tests/test_term.py runs a real term."""

import csv
import datetime
import io
import json
import random

import pytest

from autograder.engine.course import late_policy
from autograder.engine.judge.results import GradeResult, StepResult
from autograder.engine.operations import batch, gradebook
from conftest import KIT

STEPS = {"padding": 10.0, "attention": 15.0}


def fake_grade(path, config, **kwargs):
    """A result whose step scores are the submission's file `scores` (padding attention)."""
    scores = [float(x) for x in (path / "scores").read_text().split()]
    steps = [
        StepResult(id=s, title=s, score=v, max_score=STEPS[s], checks=[]) for s, v in zip(STEPS, scores, strict=True)
    ]
    return GradeResult(assignment="mha", submission=str(path), seed=1, steps=steps)


class Config:
    id = "mha"
    package = None
    late = None


def make_class(root, names, rng):
    paths = []
    for name in names:
        path = root / name
        path.mkdir(parents=True)
        (path / "scores").write_text(f"{rng.randint(0, 10)} {rng.randint(0, 15)}")
        paths.append(path)
    return paths


def rows(out):
    return {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}


def grade(paths, out, config=Config, **kwargs):
    return batch.grade_batch(paths, config, out, workers=1, isolate=False, log=io.StringIO(), **kwargs)


@pytest.mark.parametrize("seed", range(6))
def test_regrading_any_subset_keeps_every_row_and_updates_its_own(tmp_path, monkeypatch, seed):
    # Fails on main 1607c35: after a re-grade of k students grades.csv held those k rows only.
    rng = random.Random(seed)
    monkeypatch.setattr(batch, "grade", fake_grade)
    names = [f"s{i:02d}" for i in range(rng.randint(3, 12))] + ["x/alice", "y/alice"]  # two alices: ids by path
    paths = make_class(tmp_path / "class", names, rng)
    out = tmp_path / "out"
    grade(paths, out)
    before = rows(out)
    ids = list(before)
    assert len(ids) == len(names) and {"x__alice", "y__alice"} <= set(ids)
    for _round in range(3):
        chosen = rng.sample(paths, rng.randint(1, len(paths)))
        for path in chosen:
            (path / "scores").write_text(f"{rng.randint(0, 10)} {rng.randint(0, 15)}")
        grade(chosen, out, force=True)
        after = rows(out)
        assert list(after) == ids  # the whole class, in its order, ids kept (x/alice alone is still x__alice)
        regraded = {row["submission"] for row in after.values() if row["path"] in {str(p) for p in chosen}}
        assert len(regraded) == len(chosen)
        for name in ids:
            if name not in regraded:
                assert after[name] == before[name]
            else:
                want = sum(
                    float(x) for x in (tmp_path / "class" / name.replace("__", "/") / "scores").read_text().split()
                )
                assert float(after[name]["total"]) == want
        before = after
    # every grading is in the history, and each JSON a re-grade replaced is kept whole
    lines = (out / gradebook.HISTORY).read_text().splitlines()
    kept = list((out / gradebook.HISTORY_FOLDER).rglob("*.json"))
    assert len(lines) == len(names) + len(kept)
    assert all(json.loads(path.read_text())["steps"] for path in kept)


def test_history_shows_every_grade_of_a_regraded_student(tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "grade", fake_grade)
    paths = make_class(tmp_path / "class", ["ann", "bob"], random.Random(1))
    out = tmp_path / "out"
    (paths[1] / "scores").write_text("3 4")
    grade(paths, out)
    (paths[1] / "scores").write_text("10 15")
    grade([paths[1]], out, force=True)
    entries = gradebook.history(out, ["bob"])["bob"]
    assert [e["score"] for e in entries] == [7.0, 25.0]
    assert all(e["by"] and e["at"] and e["kit"] for e in entries)
    text = gradebook.history_text(out, ["bob"])
    assert "score 7.00 / 25.00" in text and "score 25.00 / 25.00" in text
    assert len(gradebook.history(out)["ann"]) == 1


def test_adjustments_survive_regrades_and_are_never_dropped_in_silence(tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "grade", fake_grade)
    paths = make_class(tmp_path / "class", ["ann", "bob"], random.Random(2))
    out = tmp_path / "out"
    (paths[0] / "scores").write_text("10 5")
    grade(paths, out)
    gradebook.add_adjustment(out, gradebook.Adjustment("ann", 4, "attention: right idea, typo", "attention"))
    gradebook.add_adjustment(out, gradebook.Adjustment("ann", -1, "late slides"))
    gradebook.apply(out, Config)
    data = json.loads((out / "ann.json").read_text())
    assert data["total"] == 18.0 and data["score"] == 15.0 and [a["counted"] for a in data["adjustments"]] == [4, -1]
    row = rows(out)["ann"]
    assert row["adjustment"] == "3.0" and row["total"] == "18.0" and "right idea, typo" in row["notes"]
    # the step is re-graded to 14/15: the +4 can count only 1 of it, and says so
    (paths[0] / "scores").write_text("10 14")
    grade([paths[0]], out, force=True)
    data = json.loads((out / "ann.json").read_text())
    first = data["adjustments"][0]
    assert first["counted"] == 1.0 and "within 0 and 15.00" in first["why"] and data["total"] == 24.0
    assert "of +4" in rows(out)["ann"]["notes"]
    assert rows(out)["bob"]["adjustment"] == "0"


def test_an_adjustments_file_that_does_not_read_stops_the_run_naming_its_line(tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "grade", fake_grade)
    paths = make_class(tmp_path / "class", ["ann"], random.Random(3))
    out = tmp_path / "out"
    grade(paths, out)
    (out / gradebook.ADJUSTMENTS).write_text("submission,step,points,comment\nann,,2,ok\nann,,two,typo\n")
    before = (out / "grades.csv").read_bytes()
    with pytest.raises(gradebook.GradebookError, match=r"adjustments.csv, line 3: points 'two'"):
        grade(paths, out, force=True)
    assert (out / "grades.csv").read_bytes() == before


def policy(**kwargs):
    at = datetime.datetime(2026, 10, 1, 23, 59, tzinfo=datetime.timezone(datetime.timedelta(hours=9)))
    return late_policy.LatePolicy(deadline=at, **kwargs)


@pytest.mark.parametrize("seed", range(4))
def test_late_penalty_follows_its_schedule_over_generated_times(seed):
    rng = random.Random(seed)
    every = rng.choice(["day", "hour"])
    unit = late_policy.UNITS[every]
    rule = policy(
        every=every,
        deduct_percent=rng.choice([5, 10, 25]),
        max_percent=rng.choice([None, 30, 50]),
        grace=datetime.timedelta(minutes=rng.choice([0, 15])),
        cutoff=None if rng.random() < 0.3 else policy().deadline + unit * rng.randint(2, 6),
        extensions=(late_policy.Extension("ext", delta=unit * 2),),
    )
    last = 0.0
    for step in range(400):
        at = rule.deadline + datetime.timedelta(minutes=-120 + step * (unit.total_seconds() / 60) / 20)
        decision = rule.decide(at, "anyone", 100.0)
        moved = rule.decide(at + unit * 2, "ext", 100.0)
        assert moved["penalty"] == decision["penalty"] and moved["status"] == decision["status"]
        assert decision["penalty"] >= last  # never less for a later hand-in
        last = decision["penalty"]
        if at - rule.deadline <= rule.grace:
            assert decision["status"] == "on_time" and decision["penalty"] == 0
        elif rule.cutoff is not None and at > rule.cutoff:
            assert decision["status"] == "after_cutoff" and decision["penalty"] == 100.0
        else:
            started = -(-(at - rule.deadline) // unit)
            want = min(started * rule.deduct_percent, rule.max_percent if rule.max_percent is not None else 100)
            assert decision["penalty"] == pytest.approx(want) and decision["why"]


def test_late_penalty_and_its_why_reach_the_json_and_csv(tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "grade", fake_grade)
    paths = make_class(tmp_path / "class", ["ann", "bob", "cy"], random.Random(4))
    for path in paths:
        (path / "scores").write_text("10 15")

    class Late(Config):
        late = policy(deduct_percent=10, extensions=(late_policy.Extension("bob", delta=datetime.timedelta(days=3)),))

    times = tmp_path / "times.csv"
    times.write_text(
        "submission,submitted_at\nann,2026-10-03T10:00:00+09:00\nbob,2026-10-03T10:00:00+09:00\n"
    )  # ann 2 days late (2 started); bob within his extension; cy: no time known
    grade(paths, tmp_path / "out", Late, times=gradebook.read_times(times))
    got = {name: json.loads((tmp_path / "out" / f"{name}.json").read_text()) for name in ("ann", "bob", "cy")}
    assert got["ann"]["late"]["penalty"] == 5.0 and got["ann"]["total"] == 20.0
    assert got["ann"]["submitted"]["source"] == "times file times.csv"
    assert got["bob"]["late"]["status"] == "on_time" and "extended by 3 d" in got["bob"]["late"]["extension"]
    assert got["cy"]["late"]["status"] == "unknown" and got["cy"]["total"] == 25.0
    row = rows(tmp_path / "out")["ann"]
    assert row["late_penalty"] == "5.0" and "2 days started" in row["notes"]


def test_a_times_file_that_does_not_read_names_its_line(tmp_path):
    bad = tmp_path / "times.csv"
    bad.write_text("submission,submitted_at\nann,2026-10-03T10:00:00\n")
    with pytest.raises(gradebook.GradebookError, match=r"times.csv, line 2: .* no UTC offset"):
        gradebook.read_times(bad)


def cli(capsys, *args):
    """The command, run in this process (as `python -m autograder ...`): (exit code, stdout, stderr)."""
    from autograder.routes.cli import main

    code = main([str(arg) for arg in args])
    printed = capsys.readouterr()
    return code, printed.out, printed.err


def test_adjust_and_history_commands(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(batch, "grade", fake_grade)
    paths = make_class(tmp_path / "class", ["ann", "bob"], random.Random(5))
    out = tmp_path / "out"
    grade(paths, out)
    code, printed, errors = cli(capsys, "adjust", out, "ann", "2", "regrade request: masking")
    assert code == 0, errors
    assert "ann: +2 of +2" in printed and rows(out)["ann"]["adjustment"] == "2.0"
    code, _, errors = cli(capsys, "adjust", out, "anne", "2", "typo")
    assert code == 2 and "did you mean ann?" in errors
    code, _, errors = cli(capsys, "adjust", out, "ann", "1", "x", "--step", "nope")
    assert code == 2 and "padding, attention" in errors
    code, printed, _ = cli(capsys, "history", out, "bob")
    assert code == 0 and printed.startswith("bob\n") and "score" in printed
    assert cli(capsys, "history", out, "nobody")[0] == 2
    code, printed, _ = cli(capsys, "history", out, "ann")
    assert "adjusted +2 (regrade request: masking)  total" in printed


LATE = """\
id: mha
assignment: Test
late:
  deadline: 2026-10-01T23:59:00+09:00
  every: day
  deduct_percent: 10
  max_percent: 50
  cutoff: 2026-10-08T23:59:00+09:00
  extensions:
    bob: {days: 2}
    cy: 2026-10-05T12:00:00+09:00
steps:
  - id: padding
    title: Padding
    points: 10
"""


def test_grading_yml_late_policy_is_read_and_bad_times_named_by_line():
    from autograder.engine.course import config as grading_config

    rule = grading_config.parse(LATE).late
    assert rule.deadline.utcoffset() == datetime.timedelta(hours=9) and rule.max_percent == 50
    assert rule.extension_of("bob").delta == datetime.timedelta(days=2)
    assert rule.extension_of("cy").deadline.day == 5
    for old, new, words in [
        ("2026-10-01T23:59:00+09:00", "2026-10-01T23:59:00", "line 4"),  # no UTC offset: another time per machine
        ("cutoff: 2026-10-08", "cutoff: 2026-09-08", "comes before the deadline"),
        ("cy: 2026-10-05", "cy: 2026-09-05", "comes before the deadline"),
        ("max_percent: 50", "max_percent: 50\n  max_points: 3", "keep one"),
    ]:
        with pytest.raises(grading_config.ConfigError, match=words):
            grading_config.parse(LATE.replace(old, new))


def test_the_release_ships_the_late_rules_but_not_who_has_an_extension():
    import yaml

    from autograder.publish.student_release import without_extensions

    shipped = without_extensions(LATE)
    assert "bob" not in shipped and "cy" not in shipped
    assert yaml.safe_load(shipped)["late"]["max_percent"] == 50
    from autograder.engine.course import config as grading_config

    assert grading_config.parse(shipped).late.extensions == ()
    kit = (KIT / "grading.yml").read_text()
    assert without_extensions(kit) == kit  # nothing to cut: left as written


def test_a_merge_of_shards_keeps_every_shards_history(tmp_path, monkeypatch):
    from autograder.engine.operations.shard import merge

    monkeypatch.setattr(batch, "grade", fake_grade)
    paths = make_class(tmp_path / "class", [f"s{i}" for i in range(8)], random.Random(6))
    parts = [tmp_path / f"part{k}" for k in (1, 2)]
    for k, part in enumerate(parts, start=1):
        grade(paths, part, shard=(k, 2))
    merge(parts, tmp_path / "merged")
    assert sorted(gradebook.history(tmp_path / "merged")) == sorted(p.name for p in paths)
    merge(parts, tmp_path / "merged")  # again: each line once
    assert len((tmp_path / "merged" / gradebook.HISTORY).read_text().splitlines()) == len(paths)
