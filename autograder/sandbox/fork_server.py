"""The worker server: the process every worker is forked from, and the judge's handle on it.

    server = WorkerServer.shared(preload)  # started once per judge process, in the background
    process = server.fork(channel, output)  # a fresh worker holding only these two descriptors

The server imports the `preload` module and calls its warm_up() once (for grading:
autograder/harness/serve.py: torch, the observers, the simulated device), so each worker is a
cheap fork. It is started under bubblewrap where that works: its own pid, network, ipc and uts
namespaces, a root file system holding only the Python installation and the grader's code
(read-only; never the reference), no /tmp of the host. Started as root, it drops to an
unprivileged uid before importing anything (fork_server_main), keeping only CAP_SETUID and
CAP_SETGID to give each worker a uid of its own (a block the judge claimed: claim_uid_block).
Without bubblewrap it runs as a plain child process with the same uid drop, and the per-worker
layers still apply (confine.py); the layers in force are reported with each result.

Scratch: each worker gets a directory of its own, <tmp>/mha-lab-scratch-<server pid>/<token>/,
owned by its own uid where it has one; the worker seals it before student code runs. The server
removes it once the worker has gone, removes them all when the judge goes, and at start removes
what a killed server left (sweep).

CUDA: no process that forks may have touched CUDA. On a machine with a GPU the server asks CUDA
questions through NVML only (PYTORCH_NVML_BASED_CUDA_CHECK=1), tells the preload's warm_up()
that a real GPU will be used (`real_gpu=True`, where it takes the flag), and fences torch's CUDA
entry points and its autograd engine while it imports and warms up (cuda_fence): an attempt
raises and is reported (hygiene). Workers initialise CUDA after the fork (worker_process.py).

The judge talks to the server over one socketpair made before the server started: nothing else
reaches it. A fork request carries the worker's two descriptors (SCM_RIGHTS): the end of a
socketpair the judge keeps the other end of, and the output file the judge created. The server
replies with the worker's pid and later its exit status; the judge asks it to kill a worker.
This module imports nothing heavy, so that the command line can start the server before it
imports torch itself: the two imports then run side by side.

One module, though long: the server and the judge's handle are the two ends of one private
protocol over one socketpair (fork, reply, kill, sweep); kept together, the protocol changes in
one place.
"""

import contextlib
import fcntl
import inspect
import json
import os
import re
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from pathlib import Path

from autograder import cache_base

FORK, KILL = b"F", b"K"  # judge -> server: F<token> with two descriptors; K<token>
FORKED, EXITED = b"P", b"X"  # server -> judge: P<token> <pid>; X<token> <exit code>
KIT = Path(__file__).resolve().parents[2]  # the directory that holds autograder/
# The server's own /tmp under bubblewrap, where workers without a private tmpfs get their
# scratch: a cap, not a reservation. Each worker writes at most worker_process.PACKAGE_BYTES there
# before it is sealed (nothing after), and a server runs at most confine.UID_BLOCK workers.
SHARED_TMP = 1 << 30
SCRATCH_PREFIX = "mha-lab-scratch-"  # <tmp>/mha-lab-scratch-<server pid>/<worker token>/
LEGACY_SCRATCH = "mha-lab-worker-"  # what servers before this one left behind
STALE_LEGACY_SECONDS = 3600


# ---------------------------------------------------------------------------- in the server


class CudaBeforeFork(RuntimeError):
    """Something tried to use CUDA in the worker server, whose forks would inherit it broken."""


class _RefusingEngine:
    """Stands in for the autograd engine while fenced: on a machine with a GPU, the first
    backward starts a thread per device (CUDA initialised to count them), and every fork of the
    process then fails any backward."""

    def __init__(self, engine, refuse):
        self._engine, self._refuse = engine, refuse

    def __getattr__(self, name):
        if name in ("run_backward", "queue_callback"):
            return self._refuse(f"autograd engine ({name})")
        return getattr(self._engine, name)


@contextlib.contextmanager
def cuda_fence(active):
    """While `active` (a GPU's device files exist here): torch's CUDA entry points and its
    autograd engine raise CudaBeforeFork in this process instead of initialising CUDA; what
    tried is listed in the list this yields. Everything is put back on leaving."""
    attempts = []
    if not active:
        yield attempts
        return
    import torch
    import torch.autograd.variable as variable

    def refuse(name):
        def refused(*args, **kwargs):
            attempts.append(name)
            raise CudaBeforeFork(f"{name} in the worker server, before it forks: refused")

        return refused

    saved = []
    for owner, name in ((torch.cuda, "_lazy_init"), (torch.cuda, "init"), (torch._C, "_cuda_init")):
        saved.append((owner, name, getattr(owner, name, None)))
    if hasattr(torch._C, "_cuda_getDeviceCount"):  # a CUDA build: cudaGetDeviceCount runs cuInit
        saved.append((torch._C, "_cuda_getDeviceCount", torch._C._cuda_getDeviceCount))
    for owner, name, _ in saved:
        setattr(owner, name, refuse(f"{owner.__name__}.{name}"))
    engine = variable.Variable._execution_engine
    variable.Variable._execution_engine = _RefusingEngine(engine, refuse)
    try:
        yield attempts
    finally:
        variable.Variable._execution_engine = engine
        for owner, name, original in saved:
            if original is None:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


def warm_up(preloaded, real_gpu):
    """The preload's warm_up(), told whether a real GPU will be used where it takes `real_gpu`
    (it must then leave CUDA and backward passes alone; the fence refuses them anyway)."""
    try:
        takes_flag = "real_gpu" in inspect.signature(preloaded.warm_up).parameters
    except (TypeError, ValueError):
        takes_flag = False
    try:
        preloaded.warm_up(real_gpu=real_gpu) if takes_flag else preloaded.warm_up()
    except CudaBeforeFork:  # a warm-up only saves time; the attempt is reported (hygiene)
        pass


def hygiene(attempts, real_gpu):
    """What the server reports about itself before it forks anything: one thread, CUDA untouched."""
    torch = sys.modules.get("torch")
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        maps = ""
    return {
        "threads": _thread_count(),
        "cuda_initialised": bool(torch is not None and torch.cuda.is_initialized()),
        "driver_loaded": "libcuda.so" in maps,
        "cuda_attempts": sorted(set(attempts)),
        "real_gpu": real_gpu,
    }


def _thread_count():
    from autograder.sandbox.confine import thread_count  # late: not at the start of the worker server

    return thread_count()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_tree(path, identity=None):
    """Remove the directory `path` and all in it, following no link: its contents as `identity`
    ((uid, gid): their owner, a worker's own uid), itself as this process. A sealed scratch
    (read-only) is made writable first, as its owner may."""
    from autograder.sandbox.confine import file_identity  # late: not at the start of the worker server

    with file_identity(*(identity or (None, None))):
        for _, dirs, files, fd in os.fwalk(path, topdown=False):  # each fd is valid until the next step
            try:
                os.fchmod(fd, 0o700)
            except OSError:
                pass
            for name in [*files, *dirs]:
                try:
                    os.rmdir(name, dir_fd=fd)
                except OSError:
                    try:
                        os.unlink(name, dir_fd=fd)
                    except OSError:
                        pass
    try:
        os.rmdir(path)
    except OSError:
        pass


class ScratchDirectories:
    """Each worker's scratch: a directory of its own under one parent per server,
    <tmp>/mha-lab-scratch-<server pid>/<token>/, owned by the worker's own uid where it has one
    (made and removed with setfsuid). Each is removed once its worker has gone, all of them when
    the server stops; a killed server's are removed by the next server (sweep)."""

    def __init__(self, uid_base=None):
        from autograder.sandbox.confine import UID_BLOCK  # late: not at the start of the worker server

        self.uid_base = uid_base
        self.free_slots = list(range(UID_BLOCK)) if uid_base is not None else []
        self.parent = None
        for base in (os.environ.get("TMPDIR"), "/tmp", "/var/tmp", "/dev/shm"):
            if not base or not os.path.isdir(base):
                continue
            sweep(base)
            parent = Path(base) / f"{SCRATCH_PREFIX}{os.getpid()}"
            try:
                os.mkdir(parent, 0o700)
                # Workers may pass, not list. With their own uids, the server makes each one's
                # directory as that uid (setfsuid): all may create, only the owner remove (sticky).
                os.chmod(parent, 0o1733 if uid_base is not None else 0o711)
            except OSError:
                continue
            self.parent = parent
            break
        if self.parent is None:
            raise OSError("no temporary directory for the workers' scratch")

    def make(self, token):
        """(path, (uid, gid) of the worker or None): a fresh scratch for the worker `token`."""
        identity = None
        if self.free_slots:
            slot = self.free_slots.pop(0)
            identity = (self.uid_base + slot, self.uid_base + slot)
        path = self.parent / token.decode()
        from autograder.sandbox.confine import file_identity  # late: not at the start of the worker server

        with file_identity(*(identity or (None, None))):
            os.mkdir(path, 0o700)
        if identity and os.lstat(path).st_uid != identity[0]:  # no CAP_SETUID after all
            self.free_slots.append(identity[0] - self.uid_base)
            identity = None
        return path, identity

    def remove(self, path, identity):
        remove_tree(path, identity)
        if identity:
            self.free_slots.append(identity[0] - self.uid_base)

    def close(self):
        remove_tree(self.parent)


def sweep(base):
    """Remove from `base` the scratch that servers of this uid left when they were killed (their
    pid gone), and old servers' leftovers (an hour old). Never follows a link."""
    from autograder.sandbox.confine import (
        OWN_UIDS,
        UID_BLOCK,
        UID_BLOCKS,
    )  # late: not at the start of the worker server

    own = range(OWN_UIDS, OWN_UIDS + UID_BLOCK * UID_BLOCKS)
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            match = re.fullmatch(re.escape(SCRATCH_PREFIX) + r"(\d+)", entry.name)
            if match:
                pid = int(match.group(1))
                if pid != os.getpid() and _alive(pid):
                    continue
                for worker in os.scandir(entry.path):
                    owner = worker.stat(follow_symlinks=False)
                    identity = (owner.st_uid, owner.st_gid) if owner.st_uid in own else None
                    if worker.is_dir(follow_symlinks=False):
                        remove_tree(worker.path, identity)
                remove_tree(entry.path)
            elif (
                entry.name.startswith(LEGACY_SCRATCH)
                and time.time() - entry.stat(follow_symlinks=False).st_mtime > STALE_LEGACY_SECONDS
            ):
                remove_tree(entry.path)
        except OSError:
            continue


def fork_server_main(control_fd, preload):
    """Entry point of the server process: drop privilege, import `preload` (a module with
    warm_up() and serve(conn, scratch, setup)) and warm it up, then serve fork requests."""
    import importlib

    from autograder.sandbox import confine  # late: not at the start of the worker server

    # No parent-death signal: it fires when the *thread* that started us ends. The judge's end
    # of the control socket closes when the judge goes, however it goes, and then so do we.
    namespaced = bool(os.environ.get("MHA_LAB_BWRAP"))
    # Started as root: the judge gave us a block of uids, one per worker; we keep the capability
    # to switch to them (CAP_SETUID, CAP_SETGID) and no other.
    uid_base = int(os.environ["MHA_LAB_UID_BASE"]) if os.environ.get("MHA_LAB_UID_BASE", "").isdigit() else None
    keep_setuid = uid_base is not None and os.geteuid() == 0
    # Under bubblewrap the server sees the Python installation through fresh, readable mount
    # points, so it can drop its uid at once. Without, the installation may sit where only root
    # can read (under /root, say): then torch is imported first.
    read_root_only()  # before the uid drop: files closed to every uid but root's
    dropped = confine.drop_to_unprivileged_user(keep_setuid=keep_setuid) if namespaced else False
    confine.close_other_fds([control_fd])
    control = socket.socket(fileno=control_fd)
    control.sendall(b"H\n")  # alive: the judge now knows bubblewrap (if any) let Python start
    # On a machine with a GPU, nothing here may initialise CUDA: every fork would inherit it
    # broken ("Cannot re-initialize CUDA in forked subprocess", autograd's threads). Workers
    # initialise it themselves, after the fork (worker_process.py).
    with cuda_fence(bool(confine.nvidia_device_nodes())) as attempts:
        preloaded = importlib.import_module(preload)
        facts = confine.machine_facts()
        warm_up(preloaded, facts.real_gpu)
    # Late: worker_process imports torch (wire), which must first load inside the fence above.
    from autograder.sandbox.worker_process import worker_main  # late: not at the start of the worker server

    dropped = dropped or confine.drop_to_unprivileged_user(keep_setuid=keep_setuid)
    scratch = ScratchDirectories(uid_base if keep_setuid and dropped else None)
    children = {}  # pid -> (token, scratch path, worker identity)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    layers = ["uid-drop"] if dropped else []
    if namespaced:
        layers.append("bubblewrap")
    if os.environ.get("MHA_LAB_KIT_CLOSED") and dropped:
        layers.append("closed-kit")  # the kit closed to every uid but root's (sandbox/kit_view.py)
    report = hygiene(attempts, facts.real_gpu)
    control.sendall(b"S" + json.dumps(report).encode() + b"\n")
    control.sendall(b"R" + ",".join(layers).encode() + b"\n")
    try:
        serve_forks(control, wake_read, children, scratch, layers, facts, preloaded, worker_main)
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        for pid, (_, path, identity) in children.items():
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            scratch.remove(path, identity)
        scratch.close()


def serve_forks(control, wake_read, children, scratch, layers, facts, preloaded, worker_main):
    """The server's loop: fork workers on request, report their pids and exits, remove each
    one's scratch once it has gone. Returns when the judge has gone."""
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
            if pid in children:
                token, path, identity = children.pop(pid)
                scratch.remove(path, identity)
                control.sendall(EXITED + token + b" %d\n" % os.waitstatus_to_exitcode(status))
        if control not in readable:
            continue
        data, fds, _, _ = socket.recv_fds(control, 256, 2)
        if not data:  # the judge has gone: so do its workers (the caller kills and cleans up)
            return
        kind, token = data[:1], data[1:]
        if kind == FORK and len(fds) == 2 and token.isdigit():
            path, identity = scratch.make(token)
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    worker_main(fds[0], fds[1], layers, str(path), preloaded.serve, facts, identity)
                except BaseException:  # noqa: BLE001 - the judge sees the exit code; the output file the trace
                    traceback.print_exc()
                    code = 70
                finally:
                    os._exit(code)
            children[pid] = (token, path, identity)
            control.sendall(FORKED + token + b" %d\n" % pid)
        elif kind == KILL:
            for pid, (owner, _, _) in children.items():
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
    from autograder.sandbox.confine import python_paths  # late: not at the start of the worker server

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
    # hide them. The server makes each worker's scratch directory in this /tmp (shared, capped;
    # each worker seals its own before student code runs).
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
    # A GPU: its device files after --dev (those the driver creates on first use included, made
    # beforehand by ensure_gpu_device_nodes), and what its driver reads (confine.server_plan).
    from autograder.sandbox.confine import machine_facts, server_plan  # late: not at the start of the worker server

    gpu = server_plan(machine_facts())
    for device in gpu.device_binds:
        command += ["--dev-bind-try", device, device]
    for path in gpu.read_only_binds:
        command += ["--ro-bind-try", path, path]
    command += ["--chdir", str(KIT), "--setenv", "MHA_LAB_BWRAP", "1", python]
    return command


# What the worker server's root holds of the kit: the sandbox, the harness (what runs beside
# student code) and each assignment's observers, warm-up and earlier steps written out (the
# instructor's kit) or stored answers (a student release), loaded before any student code. Never its checks (hidden ones,
# oracles), known mistakes, messages, fingerprints, the engine, the routes or the reference.
SERVER_FILES = (
    "__init__.py",
    "sandbox",
    "harness",
    "assignments/__init__.py",
    "assignments/*/__init__.py",
    "assignments/*/observers",
    "assignments/*/warmup.py",
    "assignments/*/written_out.py",
    "assignments/*/answers.wire",
)


# Of SERVER_FILES, those no worker may read: the earlier steps written out are correct versions of
# steps (the instructor's kit only). Started as root, the judge closes them to every other uid (0600
# in the worker-side copy, o-rwx in the kit that bubblewrap binds: sandbox/kit_view.py) and the
# server reads them into ROOT_READ while it is still root, before it drops its uid; loaded from
# there (harness/earlier.versions), each text is let go. As a normal user nothing here can hold.
ROOT_ONLY = ("assignments/*/written_out.py",)
ROOT_READ = {}  # "autograder/assignments/mha/written_out.py" -> its text, read before the uid drop


def server_files(patterns=SERVER_FILES) -> list:
    """The paths of `patterns` (SERVER_FILES) that exist in this kit (autograder/...), in a stable
    order."""
    grader = KIT / "autograder"
    return sorted({path for pattern in patterns for path in grader.glob(pattern) if not path.is_symlink()})


def root_read_module(name):
    """The module `name` (dotted, of the kit) loaded from its ROOT_READ text, the text let go;
    None where this server read no such file."""
    relative = name.replace(".", "/") + ".py"
    source = ROOT_READ.pop(relative, None)
    if source is None:
        return None
    module = types.ModuleType(name)
    module.__file__, module.__package__ = str(KIT / relative), name.rpartition(".")[0]
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), vars(module))  # noqa: S102 - the kit's own file
    return module


def read_root_only() -> None:
    """ROOT_READ filled with the ROOT_ONLY files this server can read (all, while it is root)."""
    for path in server_files(ROOT_ONLY):
        try:
            ROOT_READ[path.relative_to(KIT).as_posix()] = path.read_bytes()
        except OSError:
            continue


def ensure_gpu_device_nodes():
    """Where a GPU exists but the driver has not yet made the device files it makes on first
    use (/dev/nvidia-uvm: CUDA's), make them now with NVIDIA's setuid helper, so that they can
    be bound into the sandbox (no worker can make them: it cannot start a process)."""
    helper = shutil.which("nvidia-modprobe")
    if helper is None or not os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia-uvm"):
        return
    try:
        subprocess.run([helper, "-u", "-c=0"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        pass


def claim_uid_block():
    """Root only: a block of uids for this server's workers (confine.OWN_UIDS), one no other
    grader on this machine holds: (lock descriptor, first uid), the lock held until closed (or
    this process ends); None where every block is taken or this is not root."""
    from autograder.sandbox.confine import (
        OWN_UIDS,
        UID_BLOCK,
        UID_BLOCKS,
    )  # late: not at the start of the worker server

    if os.geteuid() != 0:
        return None
    directory = next((d for d in ("/run/lock", "/var/lock", "/tmp") if os.path.isdir(d)), None)
    for block in range(UID_BLOCKS if directory else 0):
        try:
            fd = os.open(
                f"{directory}/mha-lab-uids-{block}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return fd, OWN_UIDS + block * UID_BLOCK
    return None


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

    @classmethod
    def stop_all(cls, seconds: float = 5.0) -> None:
        """Stop every server this process started and wait (up to `seconds` each) while it kills
        its workers and removes their scratch: a command that ends at once leaves nothing behind."""
        with cls._shared_lock:
            servers = list(cls._shared.values())
            cls._shared.clear()
        for server in servers:
            try:
                server.control.shutdown(socket.SHUT_RDWR)  # the server reads EOF: it cleans up and ends
            except OSError:
                pass
            try:
                server.process.wait(seconds)
            except subprocess.TimeoutExpired:
                server.process.kill()
                server.process.wait()
            server.remove_copy()

    def remove_copy(self) -> None:
        """Remove the worker-side copy once the server (which imports from it) has gone."""
        if self.copy is not None and self.process.poll() is not None:
            from autograder.sandbox.kit_view import remove_copy  # late: not at the start of the worker server

            remove_copy(self.copy)
            self.copy = None

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
        from autograder.sandbox.confine import machine_facts, server_plan  # late: not at the start of the worker server

        ensure_gpu_device_nodes()
        env.update(server_plan(machine_facts()).env)  # NVML-based CUDA checks; CUDA_VISIBLE_DEVICES, ...
        self.uid_lock = claim_uid_block()
        if self.uid_lock:
            env["MHA_LAB_UID_BASE"] = str(self.uid_lock[1])
        # Started as root without namespaces or Landlock, the permission bits are what keeps the
        # kit from the workers: closed to other uids, and the server imports a copy of its own
        # files (sandbox/kit_view.py). Under bubblewrap the kit is not in its file system at all.
        self.copy = None
        if os.geteuid() == 0:
            from autograder.sandbox import kit_view  # late: not at the start of the worker server
            from autograder.sandbox.confine import python_paths  # late: not at the start of the worker server

            self.copy, closed = kit_view.close_kit(
                KIT, server_files(), [*python_paths(), cache_base()], private=server_files(ROOT_ONLY)
            )
            if closed:
                env["MHA_LAB_KIT_CLOSED"] = "1"
        wrapped = bubblewrap_command(sys.executable)
        self.ready = threading.Event()
        self.layers, self.stopped, self.error = [], False, ""
        self.hygiene = {}  # what the server says of itself before its first fork (threads, CUDA)
        for command in ([*wrapped, *base[1:]], base) if wrapped else (base,):
            # the server's own complaints, read if it fails to start: a file kept for the server's life
            self.stderr = tempfile.TemporaryFile()  # noqa: SIM115
            # Without bubblewrap the server shares this machine's temporary directory: ours, if it can write there.
            own_tmp = {"TMPDIR": os.environ["TMPDIR"]} if command is base and os.environ.get("TMPDIR") else {}
            home = self.copy if command is base and self.copy is not None else KIT
            self.process = subprocess.Popen(
                command,
                pass_fds=[server_end.fileno()],
                env={**env, **own_tmp, "PYTHONPATH": str(home)},
                cwd=str(home),
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
            # Random, not counted: the token names the worker's scratch, which its code can print,
            # and a count would tell it how many workers (of other submissions too) came before.
            token = b"%d" % secrets.randbelow(10**18)
            while token in self.workers:
                token = b"%d" % secrets.randbelow(10**18)
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
        if self.uid_lock:
            os.close(self.uid_lock[0])
            self.uid_lock = None
        try:
            self.process.wait(5)
            self.stderr.seek(0)
            self.error = self.stderr.read()[-2000:].decode(errors="replace")
            self.remove_copy()
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
        if kind == b"S":
            try:
                self.hygiene = json.loads(rest)
            except ValueError:
                pass
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
