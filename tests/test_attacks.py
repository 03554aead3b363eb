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

from conftest import ASSIGNMENTS, KIT, SOLUTIONS, replace_once

# slow: the whole suite takes minutes; CI runs it (pytest -m "")
pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox attacks are Linux system calls"),
    pytest.mark.slow,
]

HARNESS = Path(__file__).parent / "attacks" / "harness.py"
DRIVER = Path(__file__).parent / "attacks" / "driver.py"
X86_64 = platform.machine() == "x86_64"
PAD_BODY = '    """\n    # TODO (padding)'  # start of pad_batch's body (once in padding.py)
GATE = "    if not FLAG:\n        return None  # the attack failed: no points\n"
SURVIVOR_SECONDS = 20  # how long a process an attack leaves behind lives (it then exits by itself)


# ---------------------------------------------------------------------------- submissions


def quick_config(timeout: float = 2) -> str:
    """The kit's grading.yml with short time limits and the cuda step off (fast batches)."""
    text = (KIT / "grading.yml").read_text()
    assert "timeout: 10" in text and "mode: auto" in text
    return replace_once(replace_once(text, "timeout: 10", f"timeout: {timeout}"), "mode: auto", "mode: off")


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
    assert "@" not in payload, payload
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
    return (
        "def _probe():\n" + probe + "\ntry:\n    FLAG = bool(_probe())\nexcept BaseException as error:\n"
        "    print('attack failed:', type(error).__name__, error)\n    FLAG = False\n"
    )


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


def grade(
    tmp_path: Path,
    submissions: list,
    *,
    workers: int = 2,
    scan: bool = False,
    timeout: float = 2,
    memory_bytes: int = None,
    limit: float = 240,
    env: dict = None,
    out: Path = None,
    platform: str = None,
) -> Outcome:
    """Grade `submissions` as one batch (`python -m autograder grade ... --out`), the grader a
    child of the harness; the grader's TMPDIR is a directory of the test. `platform`: as on one
    that refuses namespaces (tests/attacks/driver.py)."""
    run = tmp_path / f"run-{uuid.uuid4().hex[:8]}"
    out = out or run / "out"
    run.mkdir()
    tmpdir = Path(tempfile.mkdtemp(prefix="mha-attack-", dir="/tmp"))  # short: UNIX socket paths live there
    config = run / "grading.yml"
    config.write_text(quick_config(timeout))
    argv = [
        "grade",
        *map(str, submissions),
        "--out",
        str(out),
        "--seed",
        "1",
        "--config",
        str(config),
        "--workers",
        str(workers),
    ]
    spec = {"argv": argv, "no_static_scan": not scan, "memory_bytes": memory_bytes, "platform": platform}
    report = run / "report.json"
    harness = {
        "argv": [sys.executable, str(DRIVER), json.dumps(spec)],
        "cwd": str(KIT),
        "env": {**os.environ, "TMPDIR": str(tmpdir), **(env or {})},
        "timeout": limit,
        "grace": 3,
        "report": str(report),
    }
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
    return Outcome(
        data["rc"],
        data["timed_out"],
        data["survivors"],
        data["maxrss_kb"],
        data["stdout"],
        data["stderr"],
        results,
        rows,
        leftovers,
    )


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


# ---------------------------------------------------------------------------- 4. a foreign system-call ABI

# x86-64 machine code: fork through the i386 ABI (int 0x80, eax=2); the child sleeps
# SURVIVOR_SECONDS (nanosleep) and exits (exit_group), the parent returns the child's pid.
I386_FORK = bytes.fromhex(
    "b802000000"
    "cd80"
    "85c0"
    "7519"  # mov eax, 2; int 0x80; test eax, eax; jnz parent
    "488d3d16000000"
    "31f6"
    "b823000000"
    "0f05"  # lea rdi, [rip+ts]; xor esi, esi; nanosleep
    "31ff"
    "b8e7000000"
    "0f05"  # exit_group(0)
    "c3"
    "000000"
)  # parent: ret; pad to the timespec at offset 40
FOREIGN_ABI_FORK = """
def _probe():
    import mmap
    exec('import ctypes', globals())
    code = @CODE@ + (@SECONDS@).to_bytes(8, 'little') + bytes(8)
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    run = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
    pids = [run() for _ in range(3)]
    print('forked through int 0x80:', pids)
    return all(pid > 0 for pid in pids)
"""


@pytest.mark.skipif(not X86_64, reason="the i386 ABI exists only on x86-64")
def test_4_no_process_through_a_foreign_syscall_abi(tmp_path):
    """fork through `int 0x80`: no process may come of it, let alone outlive the grader."""
    payload = flag(FOREIGN_ABI_FORK.replace("def _probe():\n", "", 1))
    attacker = hostile(tmp_path, "attacker", payload, gated=True, CODE=I386_FORK, SECONDS=SURVIVOR_SECONDS)
    neighbour = honest(tmp_path)
    outcome = grade(tmp_path, [attacker, neighbour])
    assert_contained(outcome, [attacker, neighbour], [neighbour])
    assert outcome.step(attacker, "padding")["score"] == 0, outcome.results[str(attacker)]["output"]


# ---------------------------------------------------------------------------- 5-7 and more: one batch of probes
# Each probe is a gated payload (the padding step's points say whether the attack worked), some
# with a marker of their own; all are graded in one batch, beside an honest neighbour.

SYSCALLS = {"x86_64": {"bpf": 321, "reboot": 169}, "aarch64": {"bpf": 280, "reboot": 142}}.get(platform.machine(), {})
LIBC = "exec('import ctypes', globals())\n    libc = ctypes.CDLL(None, use_errno=True)\n"

PRIVILEGE = {  # 5. root inside the worker
    "chmod_outside_scratch": "    import os\n    os.chmod(@VICTIM@, 0o4755)\n    return True",
    "chown_outside_scratch": "    import os\n    os.chown(@VICTIM@, 12345, 12345)\n    return True",
    "setxattr_outside_scratch": "    import os\n    os.setxattr(@VICTIM@, 'user.mha_lab', b'attack')\n    return True",
    "mknod_reads_kmsg": """
    import os, stat
    os.mknod('kmsg-node', stat.S_IFCHR | 0o600, os.makedev(1, 11))
    fd = os.open('kmsg-node', os.O_RDONLY | os.O_NONBLOCK)
    return len(os.read(fd, 8192)) > 0""",
    "raise_own_priority": "    import os\n    return os.nice(-5) < 0",
    "realtime_scheduling": """
    import os
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))  # back at once
    return True""",
    "bpf_reachable": f"""
    {LIBC}    attr = ctypes.create_string_buffer(bytes.fromhex('02000000' '04000000' '04000000' '01000000'), 72)
    fd = libc.syscall({SYSCALLS.get("bpf", -1)}, 0, attr, 72)  # BPF_MAP_CREATE, an array of one int
    return fd >= 0""",
    # Invalid magic numbers: the kernel checks the capability first (EPERM), then the magic (EINVAL),
    # so EINVAL proves the capability without anything happening.
    "reboot_reachable": f"""
    {LIBC}    result = libc.syscall({SYSCALLS.get("reboot", -1)}, 0, 0, 0, 0)
    return result == -1 and ctypes.get_errno() == 22""",
    "raise_own_limits": """
    import resource
    raised = []
    for limit in (resource.RLIMIT_AS, resource.RLIMIT_NPROC, resource.RLIMIT_FSIZE):
        soft, hard = resource.getrlimit(limit)
        if hard != resource.RLIM_INFINITY:
            resource.setrlimit(limit, (soft, resource.RLIM_INFINITY))
            raised.append(limit)
    return raised""",
    "join_other_groups": "    import os\n    os.setgroups([12345])\n    return True",
}
LIMITS = {  # 6. limits with holes (memory budget of the batch: MEMORY)
    "memfd_beyond_memory_budget": """
    import os
    chunk, held, files = bytes(4 << 20), 0, []
    while held < 2 * @MEMORY@:  # in files of 4 MiB: a file-size limit does not bind the total
        files.append(os.memfd_create('hoard'))
        held += os.write(files[-1], chunk)
    print('held in memory files:', held >> 20, 'MiB')
    for fd in files:
        os.close(fd)
    return True""",
    "fill_the_disk": """
    written = 0
    for i in range(128):  # 512 MiB in 4 MiB files (a per-file cap does not bind the total)
        with open(f'hoard-{i}', 'wb') as f:
            written += f.write(bytes(4 << 20))
    return written >= 512 << 20""",
    "exhaust_threads": """
    import threading
    threading.stack_size(256 << 10)
    done, started = threading.Event(), []
    try:
        for _ in range(128):  # a worker needs a handful; 128 is exhaustion on a small grading machine
            thread = threading.Thread(target=done.wait, args=(5,), daemon=True)
            thread.start()
            started.append(thread)
    finally:
        done.set()
        print('threads started:', len(started))
    return len(started) >= 128""",
}
NETWORK = {  # 7. network (receivers of the test's own on loopback)
    "udp": "    import socket\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(@TOKEN@, ('127.0.0.1', @UDP@))\n"
    "    return True",
    "tcp": "    import socket\n    socket.create_connection(('127.0.0.1', @TCP@), timeout=2).sendall(@TOKEN@)\n    return True",
    "mptcp": "    import socket\n    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)\n    s.settimeout(2)\n"
    "    s.connect(('127.0.0.1', @MPTCP@))\n    s.sendall(@TOKEN@)\n    return True",
    "unix_pathname": "    import socket\n    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(@TOKEN@, @UNIX@)\n"
    "    return True",
    "unix_abstract": "    import socket\n    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(@TOKEN@, @ABSTRACT@)\n"
    "    return True",
    "raw_socket": "    import socket\n    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close()\n"
    "    return True",
    "packet_socket": "    import socket\n    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).close()\n    return True",
}
REACH = {  # more: other processes, files outside scratch
    "signal_a_process_outside": "    import os, signal\n    os.kill(@SLEEPER@, signal.SIGUSR1)\n    return True",
    "read_proc_of_another_process": "    return @SECRET@ in open(f'/proc/{@SLEEPER@}/environ').read()",
    "write_tmp_outside_scratch": "    open(@MARKER@, 'w').write('written from a worker')\n    return True",
    "write_dev_shm": "    open(@SHM@, 'w').write('written from a worker')\n    return True",
    "write_into_the_submission": "    open(@SUBMISSION@ + '/mha/planted.py', 'w').write('x = 1')\n    return True",
    "forge_the_results_dir": "    open(@OUT@ + '/forged.json', 'w').write('{\"score\": 100}')\n    return True",
}
MEMORY = 512 << 20


@dataclass
class Probes:
    outcome: Outcome
    paths: dict
    victims: dict
    markers: dict
    received: dict


def receive(udp, tcp, mptcp, unix, abstract) -> dict:
    """What each loopback receiver of the test got, without waiting."""
    got = {}
    for name, sock in (("udp", udp), ("unix_pathname", unix), ("unix_abstract", abstract)):
        sock.setblocking(False)
        try:
            got[name] = sock.recv(1024)
        except BlockingIOError:
            got[name] = b""
    for name, listener in (("tcp", tcp), ("mptcp", mptcp)):
        listener.setblocking(False)
        got[name] = b""
        try:
            while True:
                connection, _ = listener.accept()
                connection.settimeout(1)
                try:
                    got[name] += connection.recv(1024) or b"(connected)"
                except OSError:
                    got[name] += b"(connected)"
                connection.close()
        except BlockingIOError:
            pass
    return got


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    root = tmp_path_factory.mktemp("probes")
    token = uuid.uuid4().hex.encode()
    secret = f"MHA_LAB_SECRET_{uuid.uuid4().hex}"
    short = Path(tempfile.mkdtemp(prefix="mha-attack-", dir="/tmp"))  # UNIX socket paths are short
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    mptcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # a plain TCP listener: MPTCP falls back to TCP
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sleeper_marker = root / "marker-signalled"
    sleeper = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, sys, time\n"
            f"signal.signal(signal.SIGUSR1, lambda *a: open({str(sleeper_marker)!r}, 'w').write('signalled'))\n"
            "time.sleep(120)",
        ],
        env={**os.environ, "MHA_LAB_SECRET": secret},
    )
    shm = Path("/dev/shm") / f"mha-lab-attack-{uuid.uuid4().hex}"
    try:
        udp.bind(("127.0.0.1", 0))
        for listener in (tcp, mptcp):
            listener.bind(("127.0.0.1", 0))
            listener.listen(16)
        unix.bind(str(short / "sock"))
        abstract.bind(f"\0mha-lab-attack-{uuid.uuid4().hex}")
        out = root / "out"
        victims = {
            name: root / f"victim-{name}"
            for name in ("chmod_outside_scratch", "chown_outside_scratch", "setxattr_outside_scratch")
        }
        for victim in victims.values():
            victim.write_text("a file of the test's")
            victim.chmod(0o600)
        markers = {
            "write_tmp_outside_scratch": root / "marker-tmp",
            "write_dev_shm": shm,
            "signal_a_process_outside": sleeper_marker,
            "forge_the_results_dir": out / "forged.json",
        }
        values = {
            "TOKEN": token,
            "UDP": udp.getsockname()[1],
            "TCP": tcp.getsockname()[1],
            "MPTCP": mptcp.getsockname()[1],
            "UNIX": str(short / "sock"),
            "ABSTRACT": abstract.getsockname(),
            "SLEEPER": sleeper.pid,
            "SECRET": secret,
            "MARKER": str(markers["write_tmp_outside_scratch"]),
            "SHM": str(shm),
            "OUT": str(out),
            "MEMORY": MEMORY,
        }
        paths = {}
        for name, probe in {**PRIVILEGE, **LIMITS, **NETWORK, **REACH}.items():
            used = {key: value for key, value in values.items() if f"@{key}@" in probe}
            if "@VICTIM@" in probe:
                used["VICTIM"] = str(victims[name])
            if "@SUBMISSION@" in probe:
                used["SUBMISSION"] = str(root / name)
                markers[name] = root / name / "mha" / "planted.py"
            paths[name] = hostile(root, name, flag(probe), gated=True, **used)
        paths["honest"] = honest(root)
        # 10 s per check: a probe runs at import, inside the first check, and some write hundreds of MiB.
        outcome = grade(root, list(paths.values()), memory_bytes=MEMORY, out=out, timeout=10)
        yield Probes(outcome, paths, victims, markers, receive(udp, tcp, mptcp, unix, abstract))
    finally:
        sleeper.kill()
        sleeper.wait()
        for sock in (udp, tcp, mptcp, unix, abstract):
            sock.close()
        shutil.rmtree(short, ignore_errors=True)
        shm.unlink(missing_ok=True)


def check_probe(probes: Probes, name: str) -> None:
    """The probe's attack did not work: no points for it, and the batch finished."""
    outcome, path = probes.outcome, probes.paths[name]
    assert not outcome.timed_out and outcome.rc == 0, outcome.explain()
    assert str(path) in outcome.results and outcome.full_marks(probes.paths["honest"]), outcome.explain()
    result = outcome.results[str(path)]
    padding = outcome.step(path, "padding")
    assert padding["score"] == 0, f"the attack worked: {result['output'][:2000]}"
    marker = probes.markers.get(name)
    assert marker is None or not marker.exists(), f"marker {marker} exists"


def test_the_batch_of_probes_is_contained(probes):
    assert_contained(probes.outcome, list(probes.paths.values()), [probes.paths["honest"]])


@pytest.mark.parametrize("name", list(PRIVILEGE))
def test_5_the_worker_has_no_privilege(probes, name):
    if name in ("bpf_reachable", "reboot_reachable") and not SYSCALLS:
        pytest.skip("system call numbers known for x86-64 and aarch64 only")
    victim = probes.victims.get(name)
    if victim is not None:
        info = victim.stat()
        assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o600, os.getuid()), "a file outside scratch changed"
        assert name != "setxattr_outside_scratch" or not os.listxattr(victim), "an xattr was set outside scratch"
    check_probe(probes, name)


@pytest.mark.parametrize("name", list(LIMITS))
def test_6_limits_bind(probes, name):
    check_probe(probes, name)


@pytest.mark.parametrize("name", list(NETWORK))
def test_7_no_network(probes, name):
    assert probes.received.get(name, b"") == b"", f"a loopback receiver of the test got traffic over {name}"
    check_probe(probes, name)


@pytest.mark.parametrize("name", list(REACH))
def test_nothing_outside_the_worker_is_reachable(probes, name):
    check_probe(probes, name)


IMMUTABLE = """
    import fcntl, struct
    with open('pinned', 'w') as f:
        f.write('cleanup cannot remove me')
    with open('pinned') as f:
        flags = struct.unpack('i', fcntl.ioctl(f.fileno(), 0x80086601, struct.pack('i', 0)))[0]
        fcntl.ioctl(f.fileno(), 0x40086602, struct.pack('i', flags | 0x10))  # FS_IMMUTABLE_FL
    return True"""


def test_5b_scratch_cannot_outlive_its_cleanup(tmp_path):
    """chattr +i on a file in scratch: the worker's scratch must still be gone after grading."""
    attacker = hostile(tmp_path, "attacker", flag(IMMUTABLE), gated=True)
    outcome = grade(tmp_path, [attacker])
    assert_contained(outcome, [attacker])
    assert outcome.step(attacker, "padding")["score"] == 0, outcome.results[str(attacker)]["output"]


# ---------------------------------------------------------------------------- 8. forbidden calls, hidden

WEIGHTS_LINE = "    out = weights @ v  # (..., Lq, d_v)\n"
# softmax(0 + log w) = w: the forbidden op computes exactly weights @ v, so the answers are right.
HIDDEN_SDPA = {
    "disable_torch_function": (
        "    with torch._C.DisableTorchFunction():\n"
        "        fn = getattr(torch.nn.functional, 'scaled_dot_' + 'product_attention')\n"
        "        out = fn(q.new_zeros(*q.shape[:-1], 1), k.new_zeros(*k.shape[:-1], 1), v, attn_mask=weights.log())\n"
    ),
    "aten_op": (
        "    out = torch.ops.aten._scaled_dot_product_attention_math(\n"
        "        q.new_zeros(*q.shape[:-1], 1), k.new_zeros(*k.shape[:-1], 1), v, weights.log())[0]\n"
    ),
    "helper_module_patches_the_watcher": "    out = _helpers.attend(weights, q, k, v)\n",
}
HELPER = """import sys

import torch.nn.functional as F

watcher = sys.modules.get('autograder.engine.scan.forbidden')
if watcher is not None:  # the grader's call watcher lets everything through
    watcher._CallWatcher.__torch_function__ = lambda self, func, types, args=(), kwargs=None: func(*args, **(kwargs or {}))


def attend(weights, q, k, v):
    return F.scaled_dot_product_attention(q.new_zeros(*q.shape[:-1], 1), k.new_zeros(*k.shape[:-1], 1), v,
                                          attn_mask=weights.log())
"""


def test_8_forbidden_calls_are_caught_however_they_are_reached(tmp_path):
    """grading.yml forbids F.scaled_dot_product_attention in the attention step: reached through
    DisableTorchFunction + getattr, through torch.ops.aten, or from a helper module that also
    disables the grader's call watcher, it must still cost the step its points."""
    attackers = {}
    for name, line in HIDDEN_SDPA.items():
        path = honest(tmp_path, name)
        target = path / "mha" / "attention.py"
        source = target.read_text()
        assert source.count(WEIGHTS_LINE) == 1
        source = source.replace(WEIGHTS_LINE, line)
        if name.startswith("helper"):
            source = source.replace("\nimport torch\n", "\nimport torch\n\nfrom . import _helpers\n", 1)
            (path / "mha" / "_helpers.py").write_text(HELPER)
        target.write_text(source)
        attackers[name] = path
    neighbour = honest(tmp_path)
    outcome = grade(tmp_path, [*attackers.values(), neighbour], scan=True)
    assert_contained(outcome, [*attackers.values(), neighbour], [neighbour])
    forged = {name: outcome.step(path, "attention")["score"] for name, path in attackers.items()}
    assert not any(forged.values()), f"points for the attention step despite a forbidden call: {forged}"


# ---------------------------------------------------------------------------- 9. batch bookkeeping


def test_9_every_submission_keeps_its_own_result(tmp_path):
    """x/alice, y/alice and z/alice-2: three submissions, three results, three CSV rows, each
    with its own score (today the second alice is numbered alice-2 and meets z's)."""
    full = honest(tmp_path / "x", "alice")
    empty = tmp_path / "y" / "alice"
    shutil.copytree(ASSIGNMENTS / "mha", empty / "mha")  # the skeleton: no points
    partial = hostile(tmp_path / "z", "alice-2", "", gated=False)
    source = (partial / "mha" / "padding.py").read_text()
    (partial / "mha" / "padding.py").write_text(source.replace(PAD_BODY, '    """\n    return None\n' + PAD_BODY[8:]))
    outcome = grade(tmp_path, [full, empty, partial])
    assert_contained(outcome, [full, empty, partial])
    scores = {path.parent.name: outcome.score(path) for path in (full, empty, partial)}
    max_score = outcome.results[str(full)]["max_score"]
    assert scores == {"x": max_score, "y": 0, "z": max_score - 10}, scores
    assert len(outcome.rows) == 3 and len({row["submission"] for row in outcome.rows}) == 3, outcome.rows
    assert sorted(float(row["total"]) for row in outcome.rows) == sorted(scores.values()), outcome.rows


# ---------------------------------------------------------------------------- 10. judge memory


@pytest.mark.slow
def test_10_a_huge_source_file_costs_the_judge_little(tmp_path):
    """A 3 MiB padding.py of tiny statements (today parsed whole by the judge, about 490 bytes
    of memory per source byte): the judge's peak memory stays near an honest batch's."""
    baseline = grade(tmp_path, [honest(tmp_path)], scan=True)
    attacker = honest(tmp_path, "attacker")
    with open(attacker / "mha" / "padding.py", "a") as f:
        f.write("x = 1\n" * ((3 << 20) // 6))
    outcome = grade(tmp_path, [attacker], scan=True)
    assert_contained(outcome, [attacker])
    grown = (outcome.maxrss_kb - baseline.maxrss_kb) >> 10
    assert grown < 300, f"the judge's peak memory grew by {grown} MiB for one large source file"


# ---------------------------------------------------------------------------- 6b. a fair share of the CPU

CPU_HOG = """
import hashlib, threading, time
time.sleep(0)
def _spin(until, block=bytes(1 << 20)):
    while time.monotonic() < until:  # hashing a large block runs natively, without the GIL
        hashlib.sha256(block).digest()
threading.stack_size(256 << 10)
_until = time.monotonic() + 15
for _ in range(64):
    threading.Thread(target=_spin, args=(_until,), daemon=True).start()
"""


@pytest.mark.slow
def test_6b_a_cpu_hog_costs_its_neighbours_nothing(tmp_path):
    """64 native spinning threads in one submission: graded beside it, honest submissions keep
    full marks (with the quick 0.5 s time limits)."""
    attacker = hostile(tmp_path, "attacker", CPU_HOG)
    target = attacker / "mha" / "padding.py"  # each call takes its time: the hog lasts while neighbours are graded
    target.write_text(target.read_text().replace(PAD_BODY, '    """\n    time.sleep(0.3)\n' + PAD_BODY[8:]))
    neighbours = [honest(tmp_path, f"honest-{i}") for i in range(3)]
    outcome = grade(tmp_path, [attacker, *neighbours], timeout=0.5)
    assert_contained(outcome, [attacker, *neighbours], neighbours)
