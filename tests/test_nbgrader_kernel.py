"""The kernel nbgrader autograde runs a student's notebook in (autograder/sandbox/kernel.py,
autograder/routes/nbgrader_kernel.py): its plan as data, then a real kernel under attack from its
own cells (slow: CI runs it)."""

import ctypes
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autograder import KIT
from autograder.sandbox import confine
from autograder.sandbox.kernel import READ, WRITE, kernel_rules

if not os.environ.get("MHA_LAB_CI"):  # CI installs the instructor extra: never skip there
    pytest.importorskip("nbgrader", reason="pip install -e .[instructor]")
import nbformat  # noqa: E402 - comes with nbgrader

# What this machine's kernel lets the autograde kernel do. CI runs every test, so where a layer is
# missing only the assertions about that layer are left out, each with its reason, never in
# silence; test_nbgrader.py's cycle runs the kernel unconfined (knowingly) there.
LANDLOCK = confine.landlock_abi()
NO_LANDLOCK = (
    "this machine's kernel offers no Landlock (Linux 5.13+ with landlock in lsm=): the autograde kernel "
    "cannot be confined here and refuses to start (test_a_kernel_that_cannot_be_confined_does_not_start)"
)
PID_PROBE = (
    "import sys; sys.path.insert(0, {kit!r}); from autograder.sandbox.confine import private_scratch; "
    "from autograder.sandbox.kernel import own_pid_namespace; private_scratch(sys.argv[1], 1 << 20); "
    "print(own_pid_namespace())"
)


def kernel_gets_a_pid_namespace() -> bool:
    """Whether a kernel started here runs as the first process of a pid namespace of its own
    (sandbox/kernel.py main(): after its private scratch's user namespace, or as root): where it
    does not (no user namespaces, some containers), a process in a session of its own may outlive
    the kernel, as docs/threat-model.md says."""
    with tempfile.TemporaryDirectory() as scratch:
        probe = [sys.executable, "-I", "-c", PID_PROBE.format(kit=str(KIT)), scratch]
        completed = subprocess.run(probe, capture_output=True, text=True, timeout=120)
    return completed.stdout.strip() == "True"


NO_PID_NAMESPACE = "no pid namespace for the kernel here (no user namespaces): a process of its own session outlives it"


def beneath(path: str, folder: str) -> bool:
    return Path(path) == Path(folder) or Path(folder) in Path(path).parents


def test_the_kernel_may_read_nothing_of_the_kit_nor_the_course(tmp_path):
    """No rule reaches the kit's files or the course: the only rules beneath the kit's folder
    are the Python installation's (a virtual environment inside the clone), never the folder
    itself nor one of its own parts; writes only in the scratch; no right to make links or to
    move files in from elsewhere (nbgrader writes into the course after the kernel)."""
    course = tmp_path / "course"
    rules = kernel_rules(str(tmp_path / "scratch"), str(tmp_path / "kernel.json"), os.getpid())
    for rule in rules:
        assert not beneath(str(KIT), rule.path), rule  # not the kit's folder, nor one above it
        assert not beneath(str(course), rule.path) and not beneath(rule.path, str(course)), rule
        for part in ("autograder", "solutions", "grading.yml", "assignments"):
            assert not beneath(rule.path, str(KIT / part)), rule
        assert set(rule.access) <= set(WRITE) and "make_sym" not in rule.access and "refer" not in rule.access
        if rule.access - READ - {"write_file"} or ("write_file" in rule.access and rule.path != "/dev/null"):
            assert rule.path == str(tmp_path / "scratch"), rule


def test_the_plan_fails_on_a_planted_rule(tmp_path, monkeypatch):
    """The test above is shown to fail: a Python installation that is the kit's folder."""
    monkeypatch.setattr("autograder.sandbox.kernel.python_paths", lambda: [str(KIT)])
    rules = kernel_rules(str(tmp_path / "scratch"), str(tmp_path / "kernel.json"), os.getpid())
    assert any(beneath(str(KIT), rule.path) for rule in rules)


GUARDED = r"""
import ctypes, fcntl, os, resource, socket, sys
sys.path.insert(0, sys.argv[1])
from autograder.sandbox.confine import seccomp_filter
from autograder.sandbox.kernel import guards
port, abstract, abi, guarded = int(sys.argv[2]), "\0" + sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p  # an address: (void *) -1 where refused
librt = ctypes.CDLL("librt.so.1", use_errno=True)
libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as Landlock leaves it
rules = guards(abi, False, os.getpid()) if guarded else []
print("loaded", seccomp_filter(rules, default="allow"))
kept = socket.socket()  # a file of its own, to give an owner


def checked(result):
    if result < 0:
        raise OSError(ctypes.get_errno(), "refused")
    return result


def attached(ident):
    if ident < 0 or libc.shmat(ident, None, 0) in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "shm")


attacks = {
    "connect": lambda: socket.create_connection(("127.0.0.1", port), timeout=3),
    "udp": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", port)),
    "local": lambda: socket.socket(socket.AF_UNIX).connect(abstract),
    "signal": lambda: os.kill(os.getppid(), 0),
    "limit": lambda: resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE),
    "fast open": lambda: socket.socket().sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.1", port)),
    "owner": lambda: fcntl.fcntl(kept.fileno(), fcntl.F_SETOWN, os.getppid()),
    "user's priority": lambda: os.setpriority(os.PRIO_USER, 0, os.getpriority(os.PRIO_PROCESS, 0)),
    "datagram pair": lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)[0].sendto(b"x", abstract + "-datagrams"),
    "mptcp": lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262).close(),
    "user's shared memory": lambda: attached(libc.shmget(int(sys.argv[6]), 4096, 0)),
    "signal on I/O": lambda: fcntl.fcntl(kept.fileno(), fcntl.F_SETFL, os.O_ASYNC),
    "keyring": lambda: checked(libc.syscall(250, 0, -3, 0)),  # keyctl(GET_KEYRING_ID, the session's)
    "file events": lambda: os.close(checked(libc.inotify_init1(0))),
    "message queue": lambda: checked(librt.mq_unlink(b"/mha-lab-guard")),
    "shared port": lambda: socket.socket().setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1),
    "lease": lambda: fcntl.fcntl(os.open(sys.argv[7], os.O_RDONLY), 1024, fcntl.F_RDLCK),
    "new session": lambda: os.setsid(),
    "own signal": lambda: os.kill(os.getpid(), 0),
    "own limit": lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)),
    "server": lambda: socket.create_server(("127.0.0.1", 0)).close(),
    "pair": lambda: socket.socketpair(),
}
for name, attack in attacks.items():
    try:
        attack()
        print(f"{name}: done")
    except OSError as error:
        print(f"{name}: refused {type(error).__name__}")
"""


@pytest.mark.skipif(confine.SECCOMP is None and not os.environ.get("MHA_LAB_CI"), reason="pip install pyseccomp")
@pytest.mark.parametrize("abi", [1, 4])
def test_the_guards_close_what_an_old_landlock_leaves_open(abi, tmp_path):
    """Where Landlock is older than ABI 6 (ABI 4: TCP, ABI 6: signals and abstract sockets) and the
    kernel has no pid namespace (no user namespaces, as on Ubuntu 24.04), the kernel's seccomp
    guards alone refuse a connection (TCP, Fast Open, MPTCP), UDP, an abstract local socket (a
    datagram pair sends to any), the user's System V memory, a signal, a file owner, a limit or a
    priority set on another process, signals on I/O and a session of its own (which would outlive
    the kernel); the kernel still serves (a TCP server, a socket pair) and acts on itself.
    Without the guards the same probe does all of it (the probe is live)."""
    listener = socket.create_server(("127.0.0.1", 0))
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x4D480000 + os.getpid() % 0xFFFF  # the instructor's segment (System V: by key)
    segment = libc.shmget(key, 4096, 0o1000 | 0o600)  # IPC_CREAT
    assert segment >= 0, ctypes.get_errno()
    abstract = f"mha-lab-guard-{os.getpid()}-{abi}"  # an abstract name: no file, no Landlock path rule
    local = socket.socket(socket.AF_UNIX)
    local.bind("\0" + abstract)
    local.listen()
    datagrams = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    datagrams.bind("\0" + abstract + "-datagrams")
    platform = {"keyring"}  # keyrings may be off where the tests run (a container's seccomp profile)
    try:
        outcomes = {}
        for guarded in (True, False):
            args = [str(KIT), str(listener.getsockname()[1]), abstract, str(abi), "1" if guarded else "0", str(key)]
            mine = tmp_path / "mine.txt"  # a file of the probe's own, for a lease
            mine.write_text("x")
            args.append(str(mine))
            mq = ctypes.CDLL("librt.so.1", use_errno=True)
            made = mq.mq_open(b"/mha-lab-guard", os.O_CREAT | os.O_RDWR, 0o600, None)  # the user's queue
            if made >= 0:
                os.close(made)
            else:  # no POSIX message queues where the tests run
                platform.add("message queue")
            run = subprocess.run([sys.executable, "-I", "-c", GUARDED, *args], capture_output=True, text=True)
            assert run.returncode == 0 and "loaded True" in run.stdout, run.stdout + run.stderr
            outcomes[guarded] = dict(line.split(": ", 1) for line in run.stdout.splitlines()[1:])
    finally:
        listener.close()
        local.close()
        datagrams.close()
        libc.shmctl(segment, 0, None)  # IPC_RMID
    refused = {"connect", "udp", "local", "signal", "limit", "fast open", "owner", "user's priority"}
    refused |= {"datagram pair", "mptcp", "user's shared memory", "signal on I/O", "new session"}
    refused |= {"file events", "message queue", "shared port", "lease"}
    refused -= platform
    done = {
        guarded: {name for name, outcome in found.items() if outcome == "done"} for guarded, found in outcomes.items()
    }
    assert done[True] == {"own signal", "own limit", "server", "pair"}, outcomes[True]
    assert refused <= done[False], outcomes[False]
    assert not platform & done[True], outcomes[True]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_a_refused_id_map_leaves_no_private_scratch_and_no_error(tmp_path):
    """Ubuntu 24.04's AppArmor lets unshare(CLONE_NEWUSER) succeed and refuses the id map; root
    without CAP_SETFCAP is refused the same way. private_scratch then says False (the kernel goes
    on without a tmpfs, its other layers intact) instead of raising: it raised PermissionError."""
    probe = f"import sys; sys.path.insert(0, {str(KIT)!r}); from autograder.sandbox.confine import private_scratch; "
    probe += f"print(private_scratch({str(tmp_path)!r}, 1 << 20))"
    drop = ["setpriv", "--bounding-set", "-setfcap", "--inh-caps", "-setfcap", "--"]
    done = subprocess.run([*drop, sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stdout + done.stderr


def test_the_kernel_holds_no_terminal(tmp_path):
    """nbgrader run from a shell hands the kernel its terminal (stdout, stderr): a window size set
    on it, or input with O_ASYNC, signals the terminal's foreground job (the instructor's).
    leave_terminals puts /dev/null in their place; a descriptor of anything else stays."""
    import pty

    leader, follower = pty.openpty()
    probe = (
        f"import os, sys; sys.path.insert(0, {str(KIT)!r}); from autograder.sandbox.kernel import leave_terminals; "
        "ttys = lambda: [int(fd) for fd in os.listdir('/proc/self/fd') if os.isatty(int(fd))]; "
        "before = ttys(); leave_terminals(); after = ttys(); "
        "open(sys.argv[1], 'w').write(repr((before, after)))"
    )
    report = tmp_path / "report"
    try:
        subprocess.run(
            [sys.executable, "-I", "-c", probe, str(report)],
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=follower,
            pass_fds=(follower,),
            timeout=120,
            check=True,
        )
    finally:
        os.close(leader)
        os.close(follower)
    before, after = eval(report.read_text())  # noqa: S307 - our own probe's repr
    assert {1, 2, follower} <= set(before), before  # the probe is live: it held the terminal
    assert after == [], after


ATTACK = r"""
import importlib.util, os, socket, subprocess, sys
print("kit importable:", importlib.util.find_spec("autograder") is not None)
print("own /proc entry:", bool(open("/proc/self/status").read(1)))
for path in {secrets!r}:
    try:
        open(path, "rb").read(1)
        print("READ", path)
    except OSError as error:
        print("refused", type(error).__name__)
for path in {outside!r}:
    try:
        open(path, "w").write("x")
        print("WROTE", path)
    except OSError as error:
        print("refused", type(error).__name__)
try:
    os.symlink("/etc/passwd", "link")
    print("LINKED")
except OSError as error:
    print("refused", type(error).__name__)
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3)
    print("CONNECTED")
except OSError as error:
    print("refused", type(error).__name__)
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {port}))
    print("SENT")
except OSError as error:
    print("refused", type(error).__name__)
try:
    socket.socket(socket.AF_UNIX).connect({abstract!r})
    print("REACHED")
except OSError as error:
    print("refused", type(error).__name__)
try:
    os.kill({outsider}, 0)
    print("SIGNALLED")
except OSError as error:  # PermissionError, or ProcessLookupError where the kernel has a pid namespace
    print("refused", type(error).__name__)
try:
    bytearray(32 << 30)
    print("ALLOCATED")
except MemoryError:
    print("refused MemoryError")
written = 0
try:
    with open("flood", "wb") as out:
        for _ in range(2048):
            out.write(b"x" * (1 << 20))
            written += 1
except OSError as error:
    print("flood stopped at", written, "MiB")
os.remove("flood")
subprocess.Popen(["sleep", "{sleeper}"], start_new_session=True)
print("cwd", os.getcwd())
"""


@pytest.mark.slow  # a real kernel: seconds; CI runs it (pytest -m "")
@pytest.mark.skipif(not LANDLOCK, reason=NO_LANDLOCK)
def test_a_confined_kernel_refuses_what_a_student_cell_tries(tmp_path, monkeypatch):
    """A notebook's cell, in the confined kernel: the kit is not importable, its files, the
    gradebook and the environment of other processes are unreadable, nothing outside the kernel's
    scratch is written (the notebook's own folder in the course included), no link, no TCP
    connection, no UDP or local socket, no signal to another process, no huge allocation, files stop at
    the size limit, and a process left running in a session of its own ends with the kernel (where
    the kernel gets a pid namespace)."""
    from nbclient import NotebookClient

    from autograder.routes.nbgrader_kernel import ConfinedKernelManager

    course = tmp_path / "course"
    folder = course / "autograded" / "eve" / "mha"
    folder.mkdir(parents=True)
    (course / "gradebook.db").write_text("the gradebook")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    abstract = f"\0mha-lab-test-{os.getpid()}"
    local = socket.socket(socket.AF_UNIX)
    local.bind(abstract)
    local.listen()
    sleeper = str(600 + os.getpid() % 100)
    source = ATTACK.format(
        secrets=[
            str(KIT / "grading.yml"),
            str(KIT / "solutions" / "mha" / "attention.py"),
            str(course / "gradebook.db"),
            "/proc/1/environ",
        ],
        outside=[str(folder / "mine.txt"), str(course / "gradebook.db"), str(tmp_path / "elsewhere.txt")],
        port=port,
        abstract=abstract,
        outsider=os.getpid(),
        sleeper=sleeper,
    )
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    manager = type("CourseKernelManager", (ConfinedKernelManager,), {"course": str(course)})
    scratch = tmp_path / "tmp"  # where the kernel manager makes the kernel's scratch folder
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    try:
        NotebookClient(
            notebook, timeout=300, kernel_manager_class=manager, resources={"metadata": {"path": str(folder)}}
        ).execute()
    finally:
        listener.close()
        local.close()
    text = "".join(o.get("text", "") for o in notebook.cells[0].outputs)
    assert "kit importable: False" in text, text
    assert "own /proc entry: True" in text, text  # its own entry, by the pid it has (a pid namespace's child)
    # 4 reads, 3 writes, the link, the TCP connection, the UDP socket, the local one (Landlock, and the
    # kernel's seccomp guards on any Landlock ABI)
    assert text.count("refused PermissionError") >= 11, text
    for done in ("LINKED", "ALLOCATED", "CONNECTED", "SENT", "REACHED", "SIGNALLED"):
        assert done not in text, text
    assert "flood stopped at 256 MiB" in text, text
    assert (course / "gradebook.db").read_text() == "the gradebook"
    assert os.listdir(folder) == [] and not (tmp_path / "elsewhere.txt").exists()
    assert f"cwd {scratch}" in text and os.listdir(scratch) == []  # the scratch went with the kernel
    time.sleep(0.5)
    left = [pid for pid, words in processes().items() if words == ["sleep", sleeper]]
    for pid in left:  # where the kernel had no pid namespace: the documented gap, ended here
        os.kill(pid, 9)
    if not kernel_gets_a_pid_namespace():
        pytest.skip(f"all but the process left running checked: {NO_PID_NAMESPACE}")
    assert left == []


def processes() -> dict:
    """pid -> command line (words) of every process, from /proc (`ps` may not be installed)."""
    found = {}
    for entry in os.listdir("/proc"):
        try:
            words = (Path("/proc") / entry / "cmdline").read_bytes().split(b"\0") if entry.isdigit() else []
        except OSError:  # ended meanwhile
            continue
        if words:
            found[int(entry)] = [word.decode(errors="replace") for word in words if word]
    return found


@pytest.mark.slow  # a real kernel: seconds; CI runs it (pytest -m "")
def test_a_kernel_that_cannot_be_confined_does_not_start(tmp_path, monkeypatch):
    """Where Landlock does not apply, the kernel says why and exits before any cell runs."""
    course = tmp_path / "course"
    course.mkdir()
    (tmp_path / "scratch").mkdir()
    connection = tmp_path / "kernel.json"
    connection.write_text(
        json.dumps({key: 0 for key in ("shell_port", "iopub_port", "stdin_port", "hb_port", "control_port")})
    )
    boot = (
        f"import sys; sys.path.insert(0, {str(KIT)!r}); import autograder.sandbox.confine as c; "
        "c.landlock = lambda *a, **k: False; import autograder.sandbox.kernel as k; k.landlock = c.landlock; k.main()"
    )
    completed = subprocess.run(
        [sys.executable, "-I", "-c", boot, str(course), str(tmp_path / "scratch"), str(course), "-f", str(connection)],
        capture_output=True,
        text=True,
        timeout=120,
        env={key: value for key, value in os.environ.items() if key != "MHA_LAB_UNCONFINED_KERNEL"},
    )
    assert completed.returncode == 3, completed.stderr
    assert "could not be confined" in completed.stderr and "MHA_LAB_UNCONFINED_KERNEL" in completed.stderr
