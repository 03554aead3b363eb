"""The worker server: the process every worker is forked from, and the judge's handle on it.

    server = WorkerServer.shared(preload)  # started once per judge process, in the background
    process = server.fork(channel, output)  # a fresh worker holding only these two descriptors

The server imports the `preload` module and calls its warm_up() once (for grading:
autograder/harness/serve.py: torch, the observers, the simulated device), so each worker is a
cheap fork. It is started under bubblewrap where that works: its own pid, network, ipc and uts
namespaces, a root file system holding only the Python installation and the grader's code
(read-only; never the reference), no /tmp of the host. Started as root, it drops to an
unprivileged uid before importing anything (fork_server_main). Without bubblewrap it runs as a
plain child process with the same uid drop, and the per-worker layers still apply
(confine.py); the layers in force are reported with each result.

The judge talks to the server over one socketpair made before the server started: nothing else
reaches it. A fork request carries the worker's two descriptors (SCM_RIGHTS): the end of a
socketpair the judge keeps the other end of, and the output file the judge created. The server
replies with the worker's pid and later its exit status; the judge asks it to kill a worker.
This module imports nothing heavy, so that the command line can start the server before it
imports torch itself: the two imports then run side by side.
"""

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

FORK, KILL = b"F", b"K"  # judge -> server: F<token> with two descriptors; K<token>
FORKED, EXITED = b"P", b"X"  # server -> judge: P<token> <pid>; X<token> <exit code>
KIT = Path(__file__).resolve().parents[2]  # the directory that holds autograder/
SHARED_TMP = 256 << 20  # bytes: the server's own /tmp under bubblewrap


# ---------------------------------------------------------------------------- in the server


def fork_server_main(control_fd, preload):
    """Entry point of the server process: drop privilege, import `preload` (a module with
    warm_up() and serve(conn, scratch, setup)) and warm it up, then serve fork requests."""
    import importlib

    from autograder.sandbox.confine import close_other_fds, drop_to_unprivileged_user

    # No parent-death signal: it fires when the *thread* that started us ends. The judge's end
    # of the control socket closes when the judge goes, however it goes, and then so do we.
    namespaced = bool(os.environ.get("MHA_LAB_BWRAP"))
    # Under bubblewrap the server sees the Python installation through fresh, readable mount
    # points, so it can drop its uid at once. Without, the installation may sit where only root
    # can read (under /root, say): then torch is imported first.
    dropped = drop_to_unprivileged_user() if namespaced else False
    close_other_fds([control_fd])
    control = socket.socket(fileno=control_fd)
    control.sendall(b"H\n")  # alive: the judge now knows bubblewrap (if any) let Python start
    preloaded = importlib.import_module(preload)
    preloaded.warm_up()
    from autograder.sandbox.worker import worker_main

    dropped = dropped or drop_to_unprivileged_user()
    children = {}  # pid -> token
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    layers = ["uid-drop"] if dropped else []
    if namespaced:
        layers.append("bubblewrap")
    control.sendall(b"R" + ",".join(layers).encode() + b"\n")
    while True:
        readable, _, _ = select.select([control, wake_read], [], [])
        if wake_read in readable:
            os.read(wake_read, 4096)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            token, fallback_scratch = children.pop(pid, (None, None))
            if token is not None:
                shutil.rmtree(fallback_scratch, ignore_errors=True)
                control.sendall(EXITED + token + b" %d\n" % os.waitstatus_to_exitcode(status))
        if control not in readable:
            continue
        data, fds, _, _ = socket.recv_fds(control, 256, 2)
        if not data:  # the judge has gone: so do its workers
            for pid in children:
                os.kill(pid, signal.SIGKILL)
            return
        kind, token = data[:1], data[1:]
        if kind == FORK and len(fds) == 2:
            # Scratch for a worker that cannot mount its own (no nested user namespaces): made
            # here, removed here once the worker has gone (rmtree follows no link it finds).
            fallback_scratch = tempfile.mkdtemp(prefix="mha-lab-worker-", dir="/tmp")
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    worker_main(fds[0], fds[1], layers, fallback_scratch, preloaded.serve)
                except BaseException:  # noqa: BLE001 - the judge sees the exit code; the output file the trace
                    traceback.print_exc()
                    code = 70
                finally:
                    os._exit(code)
            children[pid] = (token, fallback_scratch)
            control.sendall(FORKED + token + b" %d\n" % pid)
        elif kind == KILL:
            for pid, (owner, _) in children.items():
                if owner == token:
                    os.kill(pid, signal.SIGKILL)
        for fd in fds:
            os.close(fd)


# ---------------------------------------------------------------------------- in the judge


def bubblewrap_command(python):
    """The bwrap command line that runs `python` in the server's namespaces, or None without bwrap."""
    bwrap = shutil.which("bwrap")
    if bwrap is None or os.environ.get("MHA_LAB_NO_BWRAP"):
        return None
    from autograder.sandbox.confine import python_paths

    from autograder import cache_base

    # The judge's cache of built helpers (the simulated CUDA device's), read-only.
    binds = [*python_paths(), str(cache_base()), "/usr", "/etc/ld.so.cache", "/etc/localtime"]
    links = []  # merged /usr: /lib -> usr/lib and the like stay links
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            links += ["--symlink", os.readlink(top), top]
        else:
            binds.append(top)
    binds = sorted({str(Path(p)) for p in binds if os.path.exists(p)})
    command = [
        bwrap,
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--new-session",
        "--hostname",
        "mha-lab",
    ]
    if os.geteuid() != 0:
        command.append("--unshare-user")  # root needs no user namespace to make the others; it drops its uid itself
    # /tmp first: the kit or its Python may live below /tmp (a CI clone), and a later tmpfs would
    # hide them. The server makes each worker's scratch directory in this /tmp (shared, capped).
    command += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(SHARED_TMP), "--tmpfs", "/tmp"]
    parents = sorted({str(a) for p in binds for a in Path(p).parents if str(a) not in ("/", "/tmp")}, key=len)
    for directory in parents:
        command += ["--perms", "0755", "--dir", directory]
    for path in binds:
        command += ["--ro-bind", path, path]
    # Of the kit, only what runs beside student code: an empty folder first (it also hides the
    # kit where a bound Python installation holds it), then those parts alone.
    grader = KIT / "autograder"
    command += ["--perms", "0755", "--tmpfs", str(grader)]
    for path in server_files():
        relative = path.relative_to(grader)
        for parent in reversed(relative.parents[:-1]):
            command += ["--perms", "0755", "--dir", str(grader / parent)]
        command += ["--ro-bind", str(path), str(path)]
    command += links
    from autograder.sandbox.confine import gpu_devices

    for device in gpu_devices():  # a real GPU: its device files (after --dev), and what its driver reads
        command += ["--dev-bind", device, device]
    if gpu_devices():
        command += ["--ro-bind-try", "/sys", "/sys"]
    command += ["--chdir", str(KIT), "--setenv", "MHA_LAB_BWRAP", "1", python]
    return command


# What the worker server's root holds of the kit: the sandbox, the harness (what runs beside
# student code) and each assignment's observers and warm-up. Never its checks (hidden ones,
# oracles), known mistakes, messages, fingerprints, the engine, the routes or the reference.
SERVER_FILES = (
    "__init__.py",
    "sandbox",
    "harness",
    "assignments/__init__.py",
    "assignments/*/__init__.py",
    "assignments/*/observers",
    "assignments/*/warmup.py",
)


def server_files() -> list:
    """The paths of SERVER_FILES that exist in this kit (autograder/...), in a stable order."""
    grader = KIT / "autograder"
    return sorted({path for pattern in SERVER_FILES for path in grader.glob(pattern) if not path.is_symlink()})


class ServerError(RuntimeError):
    """The worker server could not be started or has stopped."""


class ForkedWorker:
    """The judge's handle on one worker process of the server: pid, liveness, exit status, kill."""

    def __init__(self, server, token):
        self.server, self.token = server, token
        self.pid = None
        self.exitcode = None
        self.started = threading.Event()
        self.ended = threading.Event()

    def is_alive(self):
        return not self.ended.is_set()

    def kill(self):
        if not self.ended.is_set():
            try:
                self.server.send(KILL + self.token)
            except ServerError:  # the server has gone, and its workers with it
                self.ended.set()

    def join(self, timeout=None):
        self.ended.wait(timeout)


class WorkerServer:
    """Starts the server process and forwards fork and kill requests to it."""

    _shared = {}  # preload module -> its server
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls, preload):
        """The server that preloads `preload` (started on first use, restarted if it stopped)."""
        with cls._shared_lock:
            server = cls._shared.get(preload)
            if server is None or server.stopped:
                server = cls._shared[preload] = cls(preload)
            return server

    def __init__(self, preload):
        if not all(part.isidentifier() for part in preload.split(".")):
            raise ValueError(f"not a module name: {preload!r}")
        judge_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control = judge_end
        code = (
            f"from autograder.sandbox.fork_server import fork_server_main; "
            f"fork_server_main({server_end.fileno()}, {preload!r})"
        )
        base = [sys.executable, "-c", code]
        from autograder import cache_base

        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "PYTHONPATH": str(KIT),
            "PYTHONDONTWRITEBYTECODE": "1",
            "HOME": "/tmp",
            "MHA_LAB_CACHE": str(cache_base()),
        }
        wrapped = bubblewrap_command(sys.executable)
        self.ready = threading.Event()
        self.layers, self.stopped, self.error = [], False, ""
        for command in ([*wrapped, *base[1:]], base) if wrapped else (base,):
            self.stderr = tempfile.TemporaryFile()  # the server's own complaints, if it fails to start
            self.process = subprocess.Popen(
                command,
                pass_fds=[server_end.fileno()],
                env=env,
                cwd=str(KIT),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.stderr,
                start_new_session=True,
            )
            if command is base or self._says_hello():
                break
            self.process.kill()  # bwrap refused (no user namespaces here, say): run without it
            self.process.wait()
        server_end.close()
        self.lock = threading.Lock()
        self.workers = {}  # token -> ForkedWorker
        self.counter = 0
        threading.Thread(target=self._read_replies, daemon=True).start()

    def _says_hello(self):
        """Whether the server started (bubblewrap fails at once where it cannot run)."""
        for _ in range(600):
            if select.select([self.control], [], [], 0.1)[0]:
                return self.control.recv(16) == b"H\n"
            if self.process.poll() is not None:
                return False
        return False

    def wait_ready(self, seconds=120):
        if not self.ready.wait(seconds):
            raise ServerError("the worker server did not start: " + self.error)
        if self.stopped:
            raise ServerError("the worker server stopped: " + self.error)
        return self.layers

    def send(self, data, fds=()):
        try:
            socket.send_fds(self.control, [data], list(fds))
        except OSError as error:
            raise ServerError(f"the worker server has stopped ({error})") from None

    def fork(self, channel_fd, output_fd):
        """A new worker holding `channel_fd` and `output_fd` (the caller keeps its own copies)."""
        self.wait_ready()
        with self.lock:
            self.counter += 1
            token = b"%d" % self.counter
            worker = self.workers[token] = ForkedWorker(self, token)
        self.send(FORK + token, [channel_fd, output_fd])
        if not worker.started.wait(60) or worker.pid is None:
            raise ServerError("the worker server did not fork a worker: " + self.error)
        return worker

    def _read_replies(self):
        buffer = b""
        while True:
            try:
                data = self.control.recv(4096)
            except OSError:
                data = b""
            if not data:
                break
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                self._handle(line)
        self.stopped = True
        try:
            self.process.wait(5)
            self.stderr.seek(0)
            self.error = self.stderr.read()[-2000:].decode(errors="replace")
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        self.ready.set()
        with self.lock:
            for worker in self.workers.values():
                worker.started.set()
                worker.ended.set()

    def _handle(self, line):
        kind, rest = line[:1], line[1:]
        if kind == b"H":
            return
        if kind == b"R":
            self.layers = [layer for layer in rest.decode().split(",") if layer]
            self.ready.set()
            return
        token, number = rest.split(b" ")
        with self.lock:
            worker = self.workers.get(token)
            if worker is None:
                return
            if kind == FORKED:
                worker.pid = int(number)
                worker.started.set()
            elif kind == EXITED:
                worker.exitcode = int(number)
                worker.ended.set()
                worker.started.set()
                del self.workers[token]


def start(preload):
    """Start the shared server for `preload` now, without waiting for it (the first fork waits)."""
    WorkerServer.shared(preload)
