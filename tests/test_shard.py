"""`grade --shard K/N` and `merge`: a class split over N machines comes back as one run."""

import csv
import io
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.engine.judge.results import GradeResult, StepResult
from autograder.engine.operations import batch
from autograder.engine.operations.batch import submission_ids
from autograder.engine.operations.shard import (
    IncompleteMerge,
    ShardError,
    class_list_text,
    in_shard,
    merge,
    parse_shard,
    read_class_list,
    read_manifest,
    shard_of,
)
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
    from autograder.engine.judge.grades_csv import write_csv
    from autograder.engine.judge.result_files import write_json

    directory.mkdir(parents=True)
    for sid, result in zip(ids, results, strict=True):
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
    # the seed, every grade and code: the instructor's alone, as grade's --out (test_secret.py)
    assert (tmp_path / "merged").stat().st_mode & 0o777 == 0o700


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
    write_out(tmp_path / "one", [fake_grade("/a", None)], ["ann"])  # 2 points
    write_out(tmp_path / "two", [fake_grade("/abc", None)], ["ann"])  # 4 points
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
        data.pop("duration_s")  # how long it took differs between two runs, and when (the gradebook's
        data.pop("graded")  # run stamp: gradebook.run_stamp); nothing else may
        return data

    assert rows(tmp_path / "merged") == rows(tmp_path / "single")
    assert len(rows(tmp_path / "single")) == 6  # header + 5
    single = sorted(p.name for p in (tmp_path / "single").glob("*.json"))
    assert sorted(p.name for p in (tmp_path / "merged").glob("*.json")) == single
    for name in single:
        assert result(tmp_path / "merged" / name) == result(tmp_path / "single" / name)
    # the shards really split the class
    assert sum(len(list((tmp_path / f"shard{k}").glob("*.json"))) for k in (1, 2, 3)) == 5


# ----------------------------------------------------------------------------- completeness


def graded_shards(tmp_path, monkeypatch, names, count=3, out="parts/{k}"):
    """`names` graded (fake_grade) as `count` shards into tmp_path/parts/K, each recording its
    command; returns the shards' directories."""
    monkeypatch.setattr(batch, "grade", fake_grade)
    monkeypatch.chdir(tmp_path)
    paths = [tmp_path / "class" / name for name in names]
    dirs = []
    for k in range(1, count + 1):
        target = out.format(k=k)
        command = ["python", "-m", "autograder", "grade", "--class-list", "class.txt", "--out", target]
        command += ["--shard", f"{k}/{count}", "--seed", "7"]
        batch.grade_batch(
            paths, None, target, isolate=False, log=io.StringIO(), shard=(k, count), seed=7, command=command
        )
        dirs.append(tmp_path / target)
    return dirs


CLASS = [f"s{i:02d}" for i in range(12)]


def test_a_merge_of_every_shard_equals_one_run(tmp_path, monkeypatch):
    dirs = graded_shards(tmp_path, monkeypatch, CLASS)
    batch.grade_batch([tmp_path / "class" / n for n in CLASS], None, tmp_path / "one", isolate=False, log=io.StringIO())
    merged = merge(dirs, tmp_path / "merged")
    assert sorted(merged) == CLASS
    rows = (tmp_path / "merged" / "grades.csv").read_text().splitlines()
    single = (tmp_path / "one" / "grades.csv").read_text().splitlines()
    assert rows[0] == single[0] and sorted(rows[1:]) == sorted(single[1:])
    manifest = read_manifest(tmp_path / "merged")
    assert manifest.complete and manifest.shard is None and manifest.owed == CLASS


def test_a_merge_missing_a_result_names_the_shard_the_student_and_the_command(tmp_path, monkeypatch):
    dirs = graded_shards(tmp_path, monkeypatch, CLASS)
    victim = sorted(dirs[1].glob("*.json"))[0]
    victim.unlink()  # half a shard: killed after some of its results
    with pytest.raises(IncompleteMerge) as raised:
        merge(dirs, tmp_path / "merged")
    message = str(raised.value)
    assert f"shard 2/3 ({dirs[1]}" in message and f"{victim.stem} not graded" in message
    assert (
        f"re-run: cd {tmp_path} && python -m autograder grade --class-list class.txt --out parts/2 --shard 2/3"
        in message
    )
    assert not (tmp_path / "merged").exists()  # nothing that looks complete is written
    completed = run("merge", *dirs, "--out", tmp_path / "merged")
    assert completed.returncode == 1 and victim.stem in completed.stderr and not (tmp_path / "merged").exists()


def test_a_merge_without_a_shards_directory_names_the_shard_and_what_it_owes(tmp_path, monkeypatch):
    dirs = graded_shards(tmp_path, monkeypatch, CLASS)
    owed = sorted(p.stem for p in dirs[2].glob("*.json"))
    with pytest.raises(IncompleteMerge) as raised:
        merge(dirs[:2], tmp_path / "merged")
    message = str(raised.value)
    assert "shard 3/3: no directory of it was given; it owes " + ", ".join(owed) in message
    assert "--out parts/3 --shard 3/3 --seed 7" in message  # the sibling's command, renumbered


def test_a_shard_that_stopped_is_named_as_such(tmp_path, monkeypatch):
    dirs = graded_shards(tmp_path, monkeypatch, CLASS)
    from autograder.engine.operations.shard import write_manifest

    manifest = read_manifest(dirs[0])
    manifest.complete, manifest.finished = False, None  # as the start of a run leaves it
    write_manifest(dirs[0], manifest)
    for path in sorted(dirs[0].glob("*.json"))[1:]:
        path.unlink()
    with pytest.raises(IncompleteMerge, match=r"shard 1/3 \(.*stopped before it finished\)"):
        merge(dirs, tmp_path / "merged")


def test_allow_missing_writes_what_there_is(tmp_path, monkeypatch):
    dirs = graded_shards(tmp_path, monkeypatch, CLASS)
    merged = merge(dirs[:2], tmp_path / "merged", allow_missing=True)
    rows = {row["submission"]: row for row in csv.DictReader((tmp_path / "merged" / "grades.csv").open())}
    assert sorted(rows) == CLASS and len(merged) < len(CLASS)
    assert [name for name, row in rows.items() if row["total"] == ""] == sorted(set(CLASS) - set(merged))
    assert read_manifest(tmp_path / "merged").complete is False


def test_only_scores_decide_whether_two_gradings_differ(tmp_path, monkeypatch):
    """The same grade from a root run and a user run (other sandbox layers), another duration,
    another language: one result, merged."""
    dirs = graded_shards(tmp_path, monkeypatch, CLASS, count=1, out="first")
    again = tmp_path / "again"
    shutil.copytree(dirs[0], again)
    for path in again.glob("*.json"):
        data = json.loads(path.read_text())
        data.update(sandbox=["rlimits"], duration_s=9.9, output="other", submission="/elsewhere")
        path.write_text(json.dumps(data))
    assert sorted(merge([dirs[0], again], tmp_path / "merged")) == CLASS
    data = json.loads((again / "s01.json").read_text())
    data["steps"][0]["score"] += 1
    data["score"] += 1
    (again / "s01.json").write_text(json.dumps(data))
    with pytest.raises(ShardError, match="s01 was graded twice with different scores"):
        merge([dirs[0], again], tmp_path / "merged2")


def test_shards_of_two_class_lists_are_refused_not_silently_merged(tmp_path, monkeypatch):
    """A late submission: shard 1 ran before it came, shards 2 and 3 after. Without a frozen
    class list it would be dropped or counted twice; the merge names the difference."""
    dirs = graded_shards(tmp_path, monkeypatch, CLASS)
    late = graded_shards(tmp_path, monkeypatch, [*CLASS, "s99"], out="late/{k}")
    with pytest.raises(ShardError, match=r"graded different classes \(12 and 13 submissions\)"):
        merge([dirs[0], late[1], late[2]], tmp_path / "merged")
    assert sorted(merge(late, tmp_path / "merged")) == sorted([*CLASS, "s99"])


def test_a_frozen_class_list_is_read_with_file_and_line_in_its_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("b", "a"):
        (tmp_path / "subs" / name).mkdir(parents=True)
    text = class_list_text([Path("subs/b"), Path("subs/a"), Path("subs/a")])
    assert text == f"{tmp_path}/subs/a\n{tmp_path}/subs/b\n"
    listing = tmp_path / "class.txt"
    listing.write_text("# frozen on Monday\n" + text + "\nsubs/a\n")
    assert read_class_list(listing) == [tmp_path / "subs" / "a", tmp_path / "subs" / "b", Path("subs/a")]
    listing.write_text(text + "subs/gone\n")
    with pytest.raises(ShardError, match=r"class.txt, line 3: subs/gone: no such submission"):
        read_class_list(listing)
    completed = run("class-list", tmp_path / "subs" / "b", tmp_path / "subs" / "a")
    assert completed.returncode == 0 and completed.stdout == text


def test_grade_takes_a_class_list_and_keeps_a_resumed_batchs_seed(tmp_path):
    listing = tmp_path / "class.txt"
    listing.write_text(f"{tmp_path}/nowhere\n")
    completed = run("grade", "--class-list", listing, "--out", tmp_path / "out")
    assert completed.returncode == 2 and "class.txt, line 1" in completed.stderr
    completed = run("grade", SOLUTIONS, "--class-list", listing, "--out", tmp_path / "out")
    assert completed.returncode == 2 and "--class-list FILE takes the place of the paths" in completed.stderr
    from autograder.engine.operations.shard import Manifest, write_manifest

    write_manifest(tmp_path / "out", Manifest("mha", (1, 2), 7, ["a"], ["a"], [], str(tmp_path)))
    completed = run("grade", SOLUTIONS, "--out", tmp_path / "out", "--seed", "8", "--shard", "1/2")
    # which seed it was is not said: the message goes to a log (test_secret.py)
    assert completed.returncode == 2 and "another hidden-check seed than --seed 8" in completed.stderr
    assert "7" not in completed.stderr.replace(str(tmp_path), "")
