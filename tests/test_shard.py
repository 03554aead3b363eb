"""`grade --shard K/N` and `merge`: a class split over N machines comes back as one run."""

import csv
import io
import json
import random
import shutil
import subprocess
import sys

import pytest

from autograder.engine import batch
from autograder.engine.batch import submission_ids
from autograder.engine.results import GradeResult, StepResult
from autograder.engine.shard import ShardError, in_shard, merge, parse_shard, shard_of
from conftest import KIT, SOLUTIONS
from planted import PLANTED


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "autograder", *map(str, args)], cwd=KIT, capture_output=True, text=True, timeout=600
    )


def test_parse_shard_accepts_k_of_n_and_refuses_the_rest():
    assert parse_shard("2/8") == (2, 8)
    for bad in ("0/3", "4/3", "x/2", "1", "1/2/3", "-1/2"):
        with pytest.raises(ShardError):
            parse_shard(bad)


def test_every_id_falls_in_exactly_one_shard_and_shards_are_about_equal():
    ids = [f"student{i:04d}" for i in range(2000)]
    for n in (1, 3, 8):
        owners = [[k for k in range(1, n + 1) if in_shard(sid, (k, n))] for sid in ids]
        assert all(len(owner) == 1 for owner in owners)
        sizes = [sum(owner == [k] for owner in owners) for k in range(1, n + 1)]
        assert min(sizes) > 0.8 * len(ids) / n  # a hash split, not everything in one shard
    assert shard_of("alice", 5) == shard_of("alice", 5)  # no per-process salt (Python's hash() has one)


def fake_grade(path, config, **kwargs):
    return GradeResult(
        assignment="a",
        submission=str(path),
        seed=1,
        output="",
        steps=[StepResult(id="padding", title="t", score=float(len(str(path)) % 10), max_score=10.0, checks=[])],
    )


def test_shards_use_the_ids_of_the_whole_class_whatever_the_argument_order(tmp_path, monkeypatch):
    # x/alice and y/alice are told apart only because both are in the class: a shard holding
    # one of them must still call it x__alice, or the merge would not match a single run.
    paths = [tmp_path / "x" / "alice", tmp_path / "y" / "alice"] + [tmp_path / f"s{i}" for i in range(10)]
    monkeypatch.setattr(batch, "grade", fake_grade)
    seen = {}
    for order in range(2):
        shuffled = paths[:]
        random.Random(order).shuffle(shuffled)
        for k in (1, 2, 3):
            out = tmp_path / f"order{order}-shard{k}"
            graded = batch.grade_batch(shuffled, None, out, workers=1, isolate=False, log=io.StringIO(), shard=(k, 3))
            for name in graded:
                assert seen.setdefault(name, k) == k  # the same shard in both orders
    assert sorted(seen) == sorted(submission_ids(paths))
    assert {"x__alice", "y__alice"} <= set(seen)


def write_out(directory, results, ids):
    """An out directory as grade --out writes it."""
    from autograder.engine.results import write_csv, write_json

    directory.mkdir(parents=True)
    for sid, result in zip(ids, results):
        if result is not None:
            write_json(result, directory / f"{sid}.json")
    write_csv(results, ids, directory / "grades.csv", paths=[f"/class/{sid}" for sid in ids])


def test_merge_writes_one_csv_of_the_single_run_format(tmp_path):
    results = {sid: fake_grade(f"/class/{sid}", None) for sid in ("ann", "bo", "cy", "di")}
    write_out(tmp_path / "one", [results["cy"], results["ann"]], ["cy", "ann"])
    write_out(tmp_path / "two", [results["bo"], None], ["bo", "di"])  # di: the grader failed on it
    merged = merge([tmp_path / "one", tmp_path / "two"], tmp_path / "merged")
    assert sorted(merged) == ["ann", "bo", "cy"]
    write_out(tmp_path / "single", [results[s] for s in ("ann", "bo", "cy")] + [None], ["ann", "bo", "cy", "di"])
    assert (tmp_path / "merged" / "grades.csv").read_text() == (tmp_path / "single" / "grades.csv").read_text()
    for sid in ("ann", "bo", "cy"):
        assert (tmp_path / "merged" / f"{sid}.json").read_text() == (tmp_path / "single" / f"{sid}.json").read_text()


def test_merge_keeps_each_students_pictures(tmp_path):
    """The class report finds a student's attention pictures in OUT/pictures/<id>/: a merged
    directory holds those of every shard."""
    results = {sid: fake_grade(f"/class/{sid}", None) for sid in ("ann", "bo")}
    write_out(tmp_path / "one", [results["ann"]], ["ann"])
    write_out(tmp_path / "two", [results["bo"]], ["bo"])
    for out, sid in (("one", "ann"), ("two", "bo")):
        (tmp_path / out / "pictures" / sid).mkdir(parents=True)
        (tmp_path / out / "pictures" / sid / "attention-weights.png").write_bytes(sid.encode())
    merge([tmp_path / "one", tmp_path / "two"], tmp_path / "merged")
    for sid in ("ann", "bo"):
        assert (tmp_path / "merged" / "pictures" / sid / "attention-weights.png").read_bytes() == sid.encode()


def test_merge_refuses_two_different_results_for_one_submission(tmp_path):
    write_out(tmp_path / "one", [fake_grade("/a", None)], ["ann"])
    write_out(tmp_path / "two", [fake_grade("/longer/path", None)], ["ann"])
    with pytest.raises(ShardError, match="ann was graded twice"):
        merge([tmp_path / "one", tmp_path / "two"], tmp_path / "merged")
    completed = run("merge", tmp_path / "one", tmp_path / "two", "--out", tmp_path / "m")
    assert completed.returncode == 2 and "graded twice" in completed.stderr
    completed = run("merge", tmp_path / "nowhere", "--out", tmp_path / "m")
    assert completed.returncode == 2 and "nowhere" in completed.stderr


def test_grade_refuses_a_bad_shard():
    completed = run("grade", SOLUTIONS, "--out", "/tmp/unused-out", "--shard", "3/2")
    assert completed.returncode == 2 and "--shard" in completed.stderr


@pytest.mark.slow
def test_n_shards_merged_equal_one_run(tmp_path):
    """Real grading (public checks, in-process for speed): 3 shards + merge == one run."""
    students = []
    for name, planted in (
        ("ok", None),
        ("scale", "scale_by_d_model"),
        ("softmax", "softmax_wrong_dim"),
        ("pad", "pad_left"),
        ("ok2", None),
    ):
        root = tmp_path / "class" / name
        shutil.copytree(SOLUTIONS / "mha", root / "mha")
        if planted:
            mistake = next(p for p in PLANTED if p.name == planted)
            target = root / "mha" / mistake.file
            target.write_text(mistake.apply(target.read_text()))
        students.append(root)
    common = ["--public-only", "--in-process", "--seed", "3"]
    completed = run("grade", *students, "--out", tmp_path / "single", *common)
    assert completed.returncode == 0, completed.stderr
    for k in (1, 2, 3):
        completed = run("grade", *reversed(students), "--out", tmp_path / f"shard{k}", "--shard", f"{k}/3", *common)
        assert completed.returncode == 0, completed.stderr
    completed = run("merge", *(tmp_path / f"shard{k}" for k in (1, 2, 3)), "--out", tmp_path / "merged")
    assert completed.returncode == 0, completed.stderr

    def rows(directory):
        return sorted(csv.reader((directory / "grades.csv").open()))

    def result(path):
        data = json.loads(path.read_text())
        data.pop("duration_s")  # how long it took differs between two runs, nothing else may
        return data

    assert rows(tmp_path / "merged") == rows(tmp_path / "single")
    assert len(rows(tmp_path / "single")) == 6  # header + 5
    single = sorted(p.name for p in (tmp_path / "single").glob("*.json"))
    assert sorted(p.name for p in (tmp_path / "merged").glob("*.json")) == single
    for name in single:
        assert result(tmp_path / "merged" / name) == result(tmp_path / "single" / name)
    # the shards really split the class
    assert sum(len(list((tmp_path / f"shard{k}").glob("*.json"))) for k in (1, 2, 3)) == 5
