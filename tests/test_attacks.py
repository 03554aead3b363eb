"""Attacks on the sandbox, made as a determined student would make them (issue 11), graded as an
instructor grades: `python -m autograder grade SUB... --out DIR` in a subprocess.

Every attack is benign: it proves success only by a marker file in a directory the test owns, a
forged score (the attacked step earns its points only if the attack worked: `flag()`), or a
process that outlives the grader and ends by itself within seconds. Nothing is destroyed, no
traffic leaves loopback, every loop is bounded.

Each test asserts what a holding sandbox guarantees, never how it does it: no marker, honest
scores (the attacking step gets no undeserved points, honest neighbours keep full marks), nothing
left outside the grader's own output (no worker scratch left in TMPDIR, no file of the test
changed), no process outliving the grader (tests/attacks/harness.py makes the test a child
subreaper to see them), and the batch finishes.

Sandbox attacks run with the judge's source scan turned off (tests/attacks/driver.py): the
sandbox must hold on its own, not because a scan refused the code before it ran. Attacks on the
scan itself (forbidden calls, class 8) run with it on.
"""
import csv
import ctypes
import fcntl
import json
import os
import platform
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import ASSIGNMENTS, KIT, SOLUTIONS

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox attacks are Linux system calls")

HARNESS = Path(__file__).parent / "attacks" / "harness.py"
DRIVER = Path(__file__).parent / "attacks" / "driver.py"
X86_64 = platform.machine() == "x86_64"
PAD_BODY = '    """\n    # TODO: build `ids` and `pad_mask`'  # start of pad_batch's body (once in padding.py)
GATE = "    if not FLAG:\n        return None  # the attack failed: no points\n"
SURVIVOR_SECONDS = 20  # how long a process an attack leaves behind lives (it then exits by itself)


# ---------------------------------------------------------------------------- submissions


def quick_config(timeout: float = 2) -> str:
    """The kit's grading.yml with short time limits and the cuda step off (fast batches)."""
    text = (KIT / "grading.yml").read_text()
    assert "timeout: 10" in text and "mode: auto" in text
    return text.replace("timeout: 10", f"timeout: {timeout}").replace("mode: auto", "mode: off")


def honest(root: Path, name: str = "honest") -> Path:
    """A correct submission (the reference's files)."""
    path = root / name
    shutil.copytree(SOLUTIONS / "mha", path / "mha")
    return path


def hostile(root: Path, name: str, payload: str, gated: bool = False, **values: str) -> Path:
    """The reference with `payload` run when mha/padding.py is imported. `@KEY@` in the payload is
    replaced by repr(values[KEY]). With `gated`, the payload sets FLAG (True when the attack
    worked) and pad_batch answers only then: the padding step's points are the attack's flag."""
    path = honest(root, name)
    for key, value in values.items():
        payload = payload.replace(f"@{key}@", repr(value))
    assert "@" not in payload.replace("@property", ""), payload
    target = path / "mha" / "padding.py"
    source = target.read_text()
    source = source.replace("import torch\n", "import torch\n" + payload + "\n", 1)
    if gated:
        assert source.count(PAD_BODY) == 1
        source = source.replace(PAD_BODY, '    """\n' + GATE + PAD_BODY[8:])
    target.write_text(source)
    return path


def flag(probe: str) -> str:
    """A gated payload: FLAG is what `probe` (the body of a function, indented 4) returns."""
    return "def _probe():\n" + probe + "\ntry:\n    FLAG = bool(_probe())\nexcept BaseException as error:\n" \
        "    print('attack failed:', type(error).__name__, error)\n    FLAG = False\n"


# ---------------------------------------------------------------------------- grading


@dataclass
class Outcome:
    rc: int
    timed_out: bool
    survivors: list
    maxrss_kb: int
    stdout: str
    stderr: str
    results: dict  # submission path -> its JSON (or missing)
    rows: list  # grades.csv rows (dicts)
    leftovers: list  # what the grader left in its TMPDIR (worker scratch, staging)
    log: list = field(default_factory=list)

    def score(self, path: Path) -> float:
        return self.results[str(path)]["score"]

    def step(self, path: Path, step_id: str) -> dict:
        return next(s for s in self.results[str(path)]["steps"] if s["id"] == step_id)

    def full_marks(self, path: Path) -> bool:
        result = self.results.get(str(path))
        return result is not None and result["score"] == result["max_score"] and result["max_score"] > 0

    def explain(self) -> str:
        return f"rc={self.rc} timed_out={self.timed_out} survivors={self.survivors}\nstderr: {self.stderr[-3000:]}"


def grade(tmp_path: Path, submissions: list, *, workers: int = 2, scan: bool = False, timeout: float = 2,
          memory_bytes: int = None, limit: float = 240, env: dict = None) -> Outcome:
    """Grade `submissions` as one batch (`python -m autograder grade ... --out`), the grader a
    child of the harness; the grader's TMPDIR is a directory of the test."""
    run = tmp_path / f"run-{uuid.uuid4().hex[:8]}"
    out = run / "out"
    run.mkdir()
    tmpdir = Path(tempfile.mkdtemp(prefix="mha-attack-", dir="/tmp"))  # short: UNIX socket paths live there
    config = run / "grading.yml"
    config.write_text(quick_config(timeout))
    argv = ["grade", *map(str, submissions), "--out", str(out), "--seed", "1", "--config", str(config),
            "--workers", str(workers)]
    spec = {"argv": argv, "no_static_scan": not scan, "memory_bytes": memory_bytes}
    report = run / "report.json"
    harness = {"argv": [sys.executable, str(DRIVER), json.dumps(spec)], "cwd": str(KIT),
               "env": {**os.environ, "TMPDIR": str(tmpdir), **(env or {})}, "timeout": limit, "grace": 3,
               "report": str(report)}
    try:
        subprocess.run([sys.executable, str(HARNESS), json.dumps(harness)], check=True, timeout=limit + 120)
        data = json.loads(report.read_text())
    finally:
        unpin(tmpdir)
    leftovers = sorted(p.name for p in tmpdir.iterdir() if p.name.startswith("mha-lab"))
    shutil.rmtree(tmpdir, ignore_errors=True)
    results = {}
    for path in sorted(out.glob("*.json")) if out.is_dir() else []:
        result = json.loads(path.read_text())
        results[result.get("submission", path.stem)] = result
    rows = list(csv.DictReader((out / "grades.csv").open())) if (out / "grades.csv").exists() else []
    return Outcome(data["rc"], data["timed_out"], data["survivors"], data["maxrss_kb"], data["stdout"],
                   data["stderr"], results, rows, leftovers)


FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_IMMUTABLE_FL, FS_APPEND_FL = 0x80086601, 0x40086602, 0x10, 0x20


def unpin(root: Path) -> None:
    """Clear immutable/append-only flags a worker may have set under `root`, so it can be removed."""
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                flags = struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, struct.pack("i", 0)))[0]
                if flags & (FS_IMMUTABLE_FL | FS_APPEND_FL):
                    fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("i", flags & ~(FS_IMMUTABLE_FL | FS_APPEND_FL)))
            except OSError:
                pass
            finally:
                os.close(fd)


def assert_contained(outcome: Outcome, graded: list, honest_ones: list = ()) -> None:
    """What every attack test asks: the batch finished and graded everything, nothing outlived
    it, no scratch was left behind, honest neighbours kept full marks."""
    assert not outcome.timed_out, "the batch did not finish: " + outcome.explain()
    assert outcome.rc == 0, outcome.explain()
    missing = [str(p) for p in graded if str(p) not in outcome.results]
    assert not missing, f"not graded: {missing}\n" + outcome.explain()
    assert not outcome.survivors, f"processes outlived the grader: {outcome.survivors}"
    assert not outcome.leftovers, f"left in TMPDIR after grading: {outcome.leftovers}"
    for path in honest_ones:
        assert outcome.full_marks(path), f"honest neighbour {path.name} lost points: {outcome.results.get(str(path))}"


# ---------------------------------------------------------------------------- 1. an unconfined process

REACH_THE_FORK_SERVER = """
def _escape():
    import multiprocessing
    # The code a fork of the worker server would run outside the worker's confinement.
    code = "open(" + repr(@MARKER@) + ", 'w').write('escaped: ran outside the sandbox')"
    from multiprocessing import forkserver
    multiprocessing.current_process()._config['daemon'] = False  # a worker is daemonic: may not start children
    forkserver._forkserver.ensure_running = lambda: None  # the server runs: use its inherited address
    child = multiprocessing.get_context('forkserver').Process(target=exec, args=(code,))
    child.start()
    child.join(10)
try:
    _escape()
except BaseException as error:
    import traceback
    traceback.print_exc()
"""


def test_1_the_worker_cannot_get_code_run_by_an_unconfined_process(tmp_path):
    """The worker asks the process it was forked from to fork again and run its code: that
    process must not exist, or not be reachable, or run nothing outside the sandbox."""
    marker = tmp_path / "marker-fork-server"
    attacker = hostile(tmp_path, "attacker", REACH_THE_FORK_SERVER, MARKER=str(marker))
    neighbour = honest(tmp_path)
    outcome = grade(tmp_path, [attacker, neighbour])
    assert not marker.exists(), "student code ran outside the sandbox: " + marker.read_text()
    assert_contained(outcome, [attacker, neighbour], [neighbour])


# ---------------------------------------------------------------------------- 2. inherited descriptors


def inherited_pipes(write: str) -> str:
    """A payload that writes `write` into every pipe the worker inherited (found by fstat, as a
    student scanning descriptors would)."""
    return f"""
import os, stat
for _fd in range(3, 1024):
    try:
        if stat.S_ISFIFO(os.fstat(_fd).st_mode):
            os.write(_fd, {write})
    except OSError:
        pass
"""


def test_2a_inherited_pipes_cannot_kill_the_grader_s_machinery(tmp_path):
    """A byte into every inherited pipe (today: the fork server's liveness pipe, which kills
    it): the batch still finishes, every neighbour is graded in full, nothing is left running."""
    attacker = hostile(tmp_path, "attacker", inherited_pipes("b'x'"))
    neighbours = [honest(tmp_path, f"honest-{i}") for i in range(3)]
    outcome = grade(tmp_path, [attacker, *neighbours], workers=1, limit=90)
    assert_contained(outcome, [attacker, *neighbours], neighbours)


def test_2b_inherited_pipes_cannot_make_the_grader_delete_files(tmp_path):
    """Registering a file of someone else's with multiprocessing's resource tracker (its pipe is
    inherited today) makes the tracker unlink it when the grader exits."""
    victim = Path("/dev/shm") / f"mha-lab-attack-{uuid.uuid4().hex}"
    if not victim.parent.is_dir():
        pytest.skip("no /dev/shm here")
    victim.write_text("a file of another user of the machine")
    try:
        line = f"REGISTER:/{victim.name}:shared_memory\n".encode()
        attacker = hostile(tmp_path, "attacker", inherited_pipes(repr(line)))
        neighbour = honest(tmp_path)
        outcome = grade(tmp_path, [attacker, neighbour])
        assert victim.exists(), "the grader deleted a file the submission named"
        assert_contained(outcome, [attacker, neighbour], [neighbour])
    finally:
        victim.unlink(missing_ok=True)


def test_2c_the_worker_holds_no_descriptor_but_its_channel_and_output(tmp_path):
    """An FD scan: besides 0-2, a worker may hold its one channel to the judge (a socket), not
    pipes or further sockets of the grader's."""
    probe = """
    import os, stat
    pipes, sockets = [], []
    for fd in range(3, 1024):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if stat.S_ISFIFO(mode):
            pipes.append(fd)
        elif stat.S_ISSOCK(mode):
            sockets.append(fd)
    print('inherited pipes', pipes, 'sockets', sockets)
    return pipes or len(sockets) > 1
"""
    attacker = hostile(tmp_path, "attacker", flag(probe), gated=True)
    outcome = grade(tmp_path, [attacker])
    assert_contained(outcome, [attacker])
    assert outcome.step(attacker, "padding")["score"] == 0, outcome.results[str(attacker)]["output"]


# ---------------------------------------------------------------------------- 3. files the worker made

OUTPUT_FILES = {
    "symlink": "os.symlink(@SECRET@, _name)",
    "fifo": "os.mkfifo(_name)",
    "directory": "os.mkdir(_name)",
}


@pytest.mark.parametrize("kind", list(OUTPUT_FILES))
def test_3a_the_judge_never_opens_what_the_worker_made(kind, tmp_path):
    """The worker replaces every file in its scratch directory by a symlink to a secret of the
    test's, a FIFO or a directory: the judge must not show the secret, hang, or fail."""
    secret = tmp_path / "secret.txt"
    token = f"SECRET-{uuid.uuid4().hex}"
    secret.write_text(token)
    payload = f"""
import os
for _name in os.listdir('.'):
    if os.path.isfile(_name) and not os.path.islink(_name):
        try:
            os.unlink(_name)
            {OUTPUT_FILES[kind]}
        except OSError as error:
            print('attack failed:', error)
_name = '.output'
if not os.path.lexists(_name):
    try:
        {OUTPUT_FILES[kind]}
    except OSError as error:
        print('attack failed:', error)
"""
    attacker = hostile(tmp_path, "attacker", payload, SECRET=str(secret))
    neighbour = honest(tmp_path)
    outcome = grade(tmp_path, [attacker, neighbour], limit=60)
    assert token not in json.dumps(outcome.results), "the judge showed a file the worker's symlink pointed to"
    assert_contained(outcome, [attacker, neighbour], [neighbour])


def test_3b_staging_does_not_follow_a_symlinked_notebook(tmp_path):
    """An otherwise empty submission whose mha.ipynb is a symlink to a solved notebook elsewhere
    (here the course's own) earns nothing."""
    solved = SOLUTIONS / "mha.ipynb"
    if not solved.exists():
        pytest.skip("no solved notebook in solutions/")
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    (attacker / "mha.ipynb").symlink_to(solved)
    outcome = grade(tmp_path, [attacker])
    assert_contained(outcome, [attacker])
    assert outcome.score(attacker) == 0, "a symlink to someone else's notebook was graded"


@pytest.mark.parametrize("layout", ["flat", "package"])
def test_3c_staging_does_not_follow_a_symlinked_step_file(layout, tmp_path):
    """A step file that is a symlink to a solved one (uploaded flat, or in mha/) earns nothing."""
    attacker = tmp_path / "attacker"
    folder = attacker if layout == "flat" else attacker / "mha"
    folder.mkdir(parents=True)
    (folder / "padding.py").symlink_to(SOLUTIONS / "mha" / "padding.py")
    (folder / "notes.py").write_text("# the student's own file\n")
    outcome = grade(tmp_path, [attacker])
    assert_contained(outcome, [attacker])
    assert outcome.score(attacker) == 0, "a symlinked step file was graded"
