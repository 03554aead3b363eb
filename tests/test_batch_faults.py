"""A batch loses nothing to faults: a write that fails (a full disk), two runs on one --out, a
worker server that dies, a judge killed mid-run. Each file is whole or absent, the message says
what happened, and the plain re-run completes."""

import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autograder.engine.judge.result_files import write_atomically
from autograder.engine.judge.results import CheckResult, GradeResult, StepResult
from autograder.engine.operations import batch
from autograder.engine.operations.shard import MANIFEST, read_manifest
from conftest import KIT, SOLUTIONS


def result_for(path, printed="", message_id=None):
    check = CheckResult(
        id="values",
        passed=message_id is None,
        points=0.0 if message_id else 10.0,
        max_points=10.0,
        visibility="public",
        message_id=message_id,
    )
    step = StepResult(id="padding", title="t", score=check.points, max_score=10.0, checks=[check])
    return GradeResult(assignment="a", submission=str(path), steps=[step], seed=1, output=printed)


def limited_python(code: str, file_size: int) -> subprocess.CompletedProcess:
    """Run `code` in a Python whose files cannot grow past `file_size` bytes (RLIMIT_FSIZE: a
    real write error, EFBIG, as a full disk gives ENOSPC)."""
    prelude = (
        "import resource, signal\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({file_size}, {file_size}))\n"
    )
    # -B: a bytecode file written under the limit is cut short (one raw write) and breaks every later import
    return subprocess.run(
        [sys.executable, "-B", "-c", prelude + code], cwd=KIT, capture_output=True, text=True, timeout=120
    )


def test_a_file_is_written_whole_or_not_at_all(tmp_path):
    target = tmp_path / "result.json"
    write_atomically(target, '{"old": true}\n')
    completed = limited_python(
        "from autograder.engine.judge.result_files import WriteError, write_atomically\n"
        "try:\n"
        f"    write_atomically({str(target)!r}, 'x' * 100000)\n"
        "except WriteError as error:\n"
        "    print('refused:', error)\n",
        file_size=4096,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith(f"refused: cannot write {target}"), completed.stdout
    assert target.read_text() == '{"old": true}\n'  # the old file stays whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]  # no temporary file left


def test_a_failed_write_stops_the_batch_and_the_rerun_completes(tmp_path, monkeypatch):
    """One student's JSON cannot be written (too big for the file-size limit, as a full disk):
    the batch stops with WriteError naming it; every JSON written is whole; a re-run grades
    only what is missing."""
    out, subs = tmp_path / "out", [tmp_path / f"s{i}" for i in range(6)]
    script = f"""
import io, sys
sys.path.insert(0, {str(KIT / "tests")!r})
from autograder.engine.operations import batch
from test_batch_faults import result_for
batch.grade = lambda path, config, **kw: result_for(path, printed="x" * (50000 if str(path).endswith("s3") else 10))
try:
    batch.grade_batch({[str(s) for s in subs]!r}, None, {str(out)!r}, workers=1, isolate=False, log=io.StringIO())
except batch.result_files.WriteError as error:
    print("stopped:", error)
"""
    completed = limited_python(script, file_size=20000)
    assert "stopped: cannot write" in completed.stdout and "s3.json" in completed.stdout, completed.stdout
    assert "Traceback" not in completed.stderr, completed.stderr
    written = sorted(p.name for p in out.glob("*.json"))
    assert "s3.json" not in written and written, written
    for path in out.glob("*.json"):
        assert json.loads(path.read_text())["steps"]  # whole
    assert not list(out.glob(".*.tmp")) and not (out / "grades.csv").exists()
    assert read_manifest(out).complete is False  # stopped: the manifest says so

    graded = []
    monkeypatch.setattr(batch, "grade", lambda path, config, **kw: graded.append(path.name) or result_for(path))
    batch.grade_batch(subs, None, out, workers=1, isolate=False, log=io.StringIO())
    assert sorted(graded) == sorted(s.name for s in subs if f"{s.name}.json" not in written)
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert len(rows) == 6 and all(row["total"] == "10.0" for row in rows)
    assert read_manifest(out).complete is True


def test_a_second_run_on_the_same_out_is_refused_while_the_first_runs(tmp_path, monkeypatch):
    started, release = threading.Event(), threading.Event()

    def slow_grade(path, config, **kwargs):
        started.set()
        release.wait(30)
        return result_for(path)

    monkeypatch.setattr(batch, "grade", slow_grade)
    out, subs = tmp_path / "out", [tmp_path / "a", tmp_path / "b"]
    first = threading.Thread(
        target=batch.grade_batch, args=(subs, None, out), kwargs={"isolate": False, "log": io.StringIO()}
    )
    first.start()
    try:
        assert started.wait(30)
        with pytest.raises(batch.BatchBusy, match="another `grade` is writing"):
            batch.grade_batch(subs, None, out, isolate=False, log=io.StringIO())
    finally:
        release.set()
        first.join(30)
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert [row["total"] for row in rows] == ["10.0", "10.0"]
    # the lock goes with its holder: a later run is let in
    batch.grade_batch(subs, None, out, isolate=False, log=io.StringIO())


def kill_server_python(pid):
    """SIGKILL the worker server's Python: `pid` itself, or under bubblewrap the process in its
    namespace (killing bwrap alone leaves the server running)."""
    for candidate in [pid, *descendants(pid)]:
        try:
            words = Path(f"/proc/{candidate}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"bwrap" not in words[0] and any(b"fork_server_main" in word for word in words):
            os.kill(candidate, signal.SIGKILL)
            return candidate
    return None


def test_a_submission_graded_while_the_worker_server_died_is_graded_again(tmp_path, monkeypatch):
    """The server is killed while `victim` is graded: its worker died with the server, and what
    its checks saw (a crash) is the server's end, not the student's code. It is graded again, on
    a new server, and its JSON holds that second grading."""
    server = batch._worker_server()
    server.wait_ready()
    calls = []

    def grade(path, config, **kwargs):
        calls.append(path.name)
        if path.name == "victim" and calls.count("victim") == 1:
            kill_server_python(server.process.pid)
            for _ in range(200):
                if server.stopped:
                    break
                time.sleep(0.05)
            return result_for(path, message_id="worker_crashed")  # what the runner reports then
        return result_for(path)

    monkeypatch.setattr(batch, "grade", grade)
    log = io.StringIO()
    out = tmp_path / "out"
    graded = batch.grade_batch([tmp_path / "ann", tmp_path / "victim"], None, out, workers=1, log=log)
    assert calls.count("victim") == 2, calls
    assert graded["victim"].score == 10.0
    assert json.loads((out / "victim.json").read_text())["score"] == 10.0
    assert "worker server stopped while 1 submission(s) were graded (victim)" in log.getvalue()
    assert batch._worker_server() is not server and not batch._worker_server().stopped


def test_the_manifest_says_what_the_run_is_and_whether_it_completed(tmp_path, monkeypatch):
    seen = []
    out = tmp_path / "out"

    def grade(path, config, **kwargs):
        seen.append(read_manifest(out))  # while grading: written, not complete
        return result_for(path)

    monkeypatch.setattr(batch, "grade", grade)
    subs = [tmp_path / f"s{i}" for i in range(9)]
    command = ["python", "-m", "autograder", "grade", "--class-list", "c.txt", "--out", str(out), "--shard", "2/3"]
    batch.grade_batch(
        subs, None, out, isolate=False, log=io.StringIO(), shard=(2, 3), seed=7, command=command, class_list="c.txt"
    )
    assert seen and not seen[0].complete and seen[0].finished is None
    manifest = read_manifest(out)
    assert manifest.complete and manifest.shard == (2, 3) and manifest.seed == 7
    assert manifest.class_ids == [f"s{i}" for i in range(9)]
    assert set(manifest.owed) == {p.stem for p in out.glob("*.json")} and 0 < len(manifest.owed) < 9
    assert manifest.command == command and manifest.cwd == os.getcwd()
    assert manifest.class_list == str(Path("c.txt").absolute())
    data = json.loads((out / MANIFEST).read_text())
    assert data["class_size"] == 9 and len(data["class_digest"]) == 16


def test_the_printed_output_can_be_left_out_of_the_results(tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "grade", lambda path, config, **kw: result_for(path, printed="my secret debug"))
    batch.grade_batch([tmp_path / "a"], None, tmp_path / "out", isolate=False, log=io.StringIO(), omit_output=True)
    assert json.loads((tmp_path / "out" / "a.json").read_text())["output"] == ""


def test_weaker_isolation_is_warned_about_once(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.delenv("MHA_LAB_NO_BWRAP", raising=False)
    gaps = batch.isolation_gaps(["no-capabilities", "rlimits", "seccomp"])
    assert gaps[0].startswith("uid-drop (not running as root")
    assert any(gap.startswith("bubblewrap") for gap in gaps)
    assert not any(gap.startswith("seccomp") for gap in gaps)
    assert batch.isolation_gaps(["uid-drop", "bubblewrap", "seccomp", "landlock"]) == []
    log = io.StringIO()
    warn = batch._isolation_warning(log)
    weak = result_for("x")
    weak.sandbox = ["rlimits"]
    warn(weak)
    warn(weak)
    assert log.getvalue().count("warning: student code runs with weaker isolation") == 1
    assert '"sandbox" lists the layers in force' in log.getvalue()


def test_a_result_whose_code_never_reached_a_worker_says_nothing_of_the_sandbox(monkeypatch):
    """A batch whose first submission has no package warned that every layer was missing while
    the JSONs showed them all in force: the warning is the first result's that ran in a worker
    (a worker always has its rlimits), whatever the order."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    strong = ["uid-drop", "bubblewrap", "closed-kit", "no-capabilities", "rlimits", "seccomp", "landlock"]
    weak = ["no-capabilities", "rlimits"]
    for order in ([[], [], strong, weak], [[], weak, strong], [strong, []], [[], []]):
        log = io.StringIO()
        warn = batch._isolation_warning(log)
        for layers in order:
            result = result_for("x")
            result.sandbox = list(layers)
            warn(result)
        first_run = next((layers for layers in order if layers), None)
        said = log.getvalue()
        if first_run is None or not batch.isolation_gaps(first_run):
            assert said == "", (order, said)
        else:
            assert said.count("weaker isolation") == 1 and "uid-drop" in said, (order, said)


# ----------------------------------------------------------------------------- for real, slow


@pytest.mark.slow  # a real sandboxed batch
def test_the_isolation_warning_names_no_layer_a_result_shows_in_force(tmp_path):
    """For real: a class whose first submission has no package (nothing of it runs), then the
    reference. What the warning says is missing is missing from every JSON's `sandbox`."""
    empty = tmp_path / "class" / "a-empty"
    empty.mkdir(parents=True)
    (empty / "notes.txt").write_text("forgot the package\n")
    good = tmp_path / "class" / "b-good"
    shutil.copytree(SOLUTIONS / "mha", good / "mha")
    out = tmp_path / "out"
    completed = subprocess.run(grade_command([empty, good], out), capture_output=True, text=True, cwd=KIT, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    in_force = set(json.loads((out / "b-good.json").read_text())["sandbox"])
    assert json.loads((out / "a-empty.json").read_text())["sandbox"] == []
    warning = next((line for line in completed.stderr.splitlines() if "weaker isolation" in line), "")
    named = set(re.findall(r"(?:^|; |missing: )([a-z-]+) \(", warning))
    assert not named & in_force, (warning, in_force)
    assert bool(warning) == bool(batch.isolation_gaps(sorted(in_force)))


def class_of(tmp_path, count):
    """`count` submissions: every third the untouched skeleton (0 points), the others the reference."""
    paths = []
    for i in range(count):
        root = tmp_path / "class" / f"s{i:02d}"
        shutil.copytree(SOLUTIONS / "mha" if i % 3 else KIT / "assignments" / "mha", root / "mha")
        paths.append(root)
    return paths


def grade_command(paths, out, *extra):
    return [
        *(sys.executable, "-m", "autograder", "grade", *map(str, paths), "--assignment", "mha"),
        *("--out", str(out), "--seed", "7", "--workers", "2", *extra),
    ]


def assert_complete(out, paths):
    for path in paths:
        data = json.loads((out / f"{path.name}.json").read_text())
        expected = 0.0 if int(path.name[1:]) % 3 == 0 else 100.0
        assert data["score"] == pytest.approx(expected, abs=5.0), (path.name, data["score"])
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert sorted(row["submission"] for row in rows) == sorted(p.name for p in paths)
    assert all(row["total"] != "" for row in rows)


def descendants(pid):
    found = []
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return found
    for child in map(int, children):
        found += [child, *descendants(child)]
    return found


@pytest.mark.slow
def test_killing_the_worker_server_mid_batch_loses_nothing(tmp_path):
    """The Python of the worker server itself is killed (not only bubblewrap around it): the
    batch goes on with a new server, prints no traceback, and every score is right."""
    paths = class_of(tmp_path, 9)
    out = tmp_path / "out"
    process = subprocess.Popen(
        grade_command(paths, out), cwd=KIT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    killed = []
    deadline = time.time() + 300
    while not killed and time.time() < deadline and process.poll() is None:
        if len(list(out.glob("*.json"))) >= 2:
            killed += [pid for pid in [kill_server_python(process.pid)] if pid]
        time.sleep(0.02)
    printed, _ = process.communicate(timeout=600)
    assert killed, "no worker server found to kill: the test proves nothing"
    assert "Traceback" not in printed, printed
    if process.returncode != 0:  # it may say which it could not grade; then the re-run completes
        assert "NOT GRADED" in printed, printed
        rerun = subprocess.run(grade_command(paths, out), cwd=KIT, capture_output=True, text=True, timeout=600)
        assert rerun.returncode == 0, rerun.stderr
    assert_complete(out, paths)


@pytest.mark.slow
def test_a_judge_killed_mid_batch_is_completed_by_the_rerun(tmp_path):
    paths = class_of(tmp_path, 9)
    out = tmp_path / "out"
    process = subprocess.Popen(
        grade_command(paths, out), cwd=KIT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.time() + 300
    while len(list(out.glob("*.json"))) < 3 and time.time() < deadline:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert read_manifest(out).complete is False
    rerun = subprocess.run(grade_command(paths, out), cwd=KIT, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert_complete(out, paths)
    assert read_manifest(out).complete is True


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs: needs root")
def test_a_full_disk_is_one_message_and_the_rerun_completes(tmp_path):
    paths = class_of(tmp_path, 6)
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)], check=True)
    try:
        out = small / "out"
        completed = subprocess.run(grade_command(paths, out), cwd=KIT, capture_output=True, text=True, timeout=600)
        assert completed.returncode == 1, completed.stderr
        assert "Traceback" not in completed.stdout + completed.stderr
        assert "error: cannot write" in completed.stderr and "No space left on device" in completed.stderr
        assert "run the same command again" in completed.stderr
        for path in out.glob("*.json"):
            assert json.loads(path.read_text())["steps"]  # whole, or not there
        assert not list(out.glob(".*.tmp"))
        subprocess.run(["mount", "-o", "remount,size=16m", str(small)], check=True)
        rerun = subprocess.run(grade_command(paths, out), cwd=KIT, capture_output=True, text=True, timeout=600)
        assert rerun.returncode == 0, rerun.stderr
        assert_complete(out, paths)
    finally:
        subprocess.run(["umount", str(small)], check=False)
