"""Confine a worker process before it imports student code (Linux; each layer optional).

Threat model: the code being confined is hostile. It may try to read the reference or other
students' work, change anything on the machine, reach another process (the judge, the worker
server, a neighbouring worker), open a network connection, start processes or threads, or
exhaust the machine. The layers below, applied in this order in a freshly forked,
single-threaded worker, are each meant to stop all of that on their own where the kernel offers
them:

* descriptors: every one is closed but the channel to the judge and the output file the judge
  made (`close_range`), so nothing inherited is left to misuse;
* own uid: started as root, the worker server gives each worker a uid and gid of its own
  (OWN_UIDS: 60000 + 64 * block + slot, a block per server), so no worker can read another's
  scratch (0700, another owner), signal it or share its process count;
* namespaces (kernel user namespaces): a private mount namespace with a size-capped tmpfs as
  scratch, which no other process can see and which vanishes with the worker; the worker server
  itself runs under bubblewrap in its own pid, network, ipc and uts namespaces (fork_server.py);
* scratch sealed: the worker writes the submission's files, then makes them and their
  directories read-only (0400, 0500); from then on nothing may be created or written, by any
  layer below (seccomp alone suffices), so a submission can neither fill a disk nor starve a
  neighbour whose scratch shares a file system with its own;
* no privilege: no capability now or ever, no new privileges;
* resource limits: address space (what the process maps once ready, CUDA included, + a budget),
  file size (so a flood of output stops), open files, tasks (RLIMIT_NPROC: counted per worker
  where it has its own uid or user namespace), no core dumps, and one CPU core;
* Landlock (kernel 5.13+): the worker may read only the Python installation, a few system paths
  and its scratch, write nowhere (a GPU worker: its device files and its threads' names), open
  no TCP connection, and signal no process outside itself;
* seccomp, an allow-list built with libseccomp: the system calls Python and torch make while
  computing, nothing else. A call from a foreign ABI (i386 `int 0x80`, x32) kills the process;
  opening a file for writing, creating, renaming, removing or truncating one, process creation,
  sockets, memfd_create, mknod, bpf, ptrace, mount, namespaces, priority changes, keyrings and
  the rest fail with EPERM (openat2, whose flags seccomp cannot read, fails with ENOSYS, so libc
  uses openat); signals may only go to the worker itself.

Threads. A CPU worker may not start a thread once confined: seccomp refuses `clone` (EPERM;
`clone3` answers ENOSYS so that libc tries `clone`), so student code that starts one gets
`RuntimeError: can't start new thread`, and every line of student code runs on the one thread
the run-time watch of forbidden calls sees. Torch computes everything a grading run needs on
that thread (one intra-op thread; the autograd engine runs a CPU backward on its caller). A GPU
worker keeps threads: the CUDA driver and the autograd engine start their own (RLIMIT_NPROC
bounds them where the count is the worker's own).

GPU profile (a real GPU, planned by the judge for the worker): CUDA is initialised in the
worker after the fork and before any layer (the worker server never touches CUDA, see
fork_server.py), with one GPU visible (CUDA_VISIBLE_DEVICES) and a cap on its memory; the
limits are then measured from what initialisation mapped. The allowances are listed, each with
its reason, in confinement_plan(). The threads the driver starts during initialisation are held
by seccomp (synchronised to every thread) and the limits (per process); Landlock and dropped
capabilities hold the confining thread and those it starts, where student code runs.

Data first: machine_facts() reads what the system offers without calling CUDA,
confinement_plan() turns facts into a ConfinementPlan (plain data: seccomp and Landlock rules,
limits, environment), apply() makes the system calls. The tests fake the facts and read the plan.

One module, though long: the layers are applied in one order in one freshly forked process, each
relying on what the one before left (descriptors closed, uid dropped, scratch sealed), and the
order is the design; split by layer, it would be written down nowhere.
"""

import ctypes
import errno
import glob
import os
import platform
import re
import resource
import signal
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_KEEPCAPS = 8
CAP_KILL, CAP_SETGID, CAP_SETUID = 5, 6, 7

# Every layer apply() knows, in the order it applies them (the worker adds own-uid and
# private-scratch before, at fork; the doctor adds them one at a time).
LAYERS = ("own-uid", "private-scratch", "no-capabilities", "rlimits", "one-cpu", "landlock", "seccomp")

# ---------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class MachineFacts:
    """What the confinement depends on, read from the system (no CUDA call)."""

    device_nodes: tuple = ()
    """The NVIDIA device files present: /dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm, ..."""
    cuda_build: bool = False
    """torch was built with CUDA (False also where torch is not imported in this process)."""
    landlock_abi: int = 0
    """The kernel's Landlock ABI version (0: none)."""
    seccomp: bool = False
    """libseccomp's Python bindings load."""
    cgroup_v2: bool = False
    """/sys/fs/cgroup is a cgroup v2 hierarchy (unified)."""
    root: bool = False
    """The process runs as root (the worker server can give each worker its own uid)."""
    kernel: str = ""
    """The kernel release (uname -r)."""
    driver_version: str = ""
    """The NVIDIA kernel driver's version line, where it is loaded."""
    driver_library: str = ""
    """Where libcuda.so.1 (the driver's user-space half) was found ('' if nowhere)."""
    gpu_env: tuple = ()
    """(name, value) of this process's variables a GPU worker keeps: CUDA_VISIBLE_DEVICES, ..."""

    @property
    def real_gpu(self) -> bool:
        """A CUDA build of torch on a machine with an NVIDIA GPU's device files."""
        return self.cuda_build and any(re.fullmatch(r"/dev/nvidia\d+", node) for node in self.device_nodes)


GPU_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES")
DRIVER_LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
DRIVER_LIBRARY_DIRS += ("/usr/local/nvidia/lib64", "/usr/lib/wsl/lib")


def nvidia_device_nodes() -> tuple:
    """The NVIDIA device files of this machine (a real GPU): a worker on it needs them."""
    return tuple(sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/nvidia-caps/*")))


def cuda_build() -> bool:
    """Whether the torch this process imported was built with CUDA (False if it imported none)."""
    torch = sys.modules.get("torch")
    return bool(torch is not None and getattr(getattr(torch, "version", None), "cuda", None))


def machine_facts() -> MachineFacts:
    """This machine's facts, read now (cheap: a few stats and small files, no CUDA)."""
    env = tuple((name, os.environ[name]) for name in GPU_ENV if os.environ.get(name))
    try:
        driver = Path("/proc/driver/nvidia/version").read_text().splitlines()[0].strip()
    except (OSError, IndexError):
        driver = ""
    library_dirs = [*os.environ.get("LD_LIBRARY_PATH", "").split(":"), *DRIVER_LIBRARY_DIRS]
    library = next((f"{d}/libcuda.so.1" for d in library_dirs if d and os.path.exists(f"{d}/libcuda.so.1")), "")
    return MachineFacts(
        device_nodes=nvidia_device_nodes(),
        cuda_build=cuda_build(),
        landlock_abi=landlock_abi(),
        seccomp=SECCOMP is not None,
        cgroup_v2=os.path.exists("/sys/fs/cgroup/cgroup.controllers"),
        root=os.geteuid() == 0,
        kernel=platform.release(),
        driver_version=driver,
        driver_library=library,
        gpu_env=env,
    )


def gpu_ordinals(facts: MachineFacts) -> list:
    """The GPUs a worker may be given, as CUDA_VISIBLE_DEVICES entries: those the judge was
    given (its own CUDA_VISIBLE_DEVICES), else one per /dev/nvidiaN."""
    given = dict(facts.gpu_env).get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [entry.strip() for entry in given.split(",") if entry.strip() and entry.strip() != "-1"]
    count = sum(1 for node in facts.device_nodes if re.fullmatch(r"/dev/nvidia\d+", node))
    return [str(index) for index in range(count)]


# ---------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class SyscallRule:
    """One seccomp rule."""

    name: str
    """The system call."""
    action: str
    """'allow', or the errno it fails with ('EPERM', 'ENOSYS', ...)."""
    masked: tuple = ()
    """((argument index, mask, value), ...): the rule holds only where argument & mask == value;
    a mask of 'ne' or 'gt' compares the whole argument instead (!= or > value, unsigned)."""
    why: str = ""
    """Why the rule is there (a GPU allowance's reason)."""


@dataclass(frozen=True)
class PathRule:
    """One Landlock rule: what may be done beneath a path."""

    path: str
    """A file or directory."""
    access: frozenset
    """Names from LANDLOCK_RIGHTS: read_file, read_dir, execute, write_file, truncate, ioctl_dev."""
    why: str = ""
    """Why the rule is there."""


@dataclass(frozen=True)
class ConfinementPlan:
    """Everything one worker's confinement does, as data; apply() does it."""

    gpu: bool
    """A real-GPU worker: CUDA initialised after the fork and before confinement (the GPU profile)."""
    cuda_device: str | None
    """The worker's CUDA_VISIBLE_DEVICES (one GPU); None for a CPU worker."""
    gpu_memory_bytes: int | None
    """The cap on the worker's GPU memory (torch's per-process fraction); None for a CPU worker."""
    threads: bool
    """Whether new threads may be started once confined (GPU workers only)."""
    memory_bytes: int
    """Address space allowed on top of what the process maps when the limits are set."""
    rlimits: dict
    """Resource limits ('FSIZE', 'NOFILE', ...) -> value; the address space is measured (memory_bytes)."""
    cpu: int | None
    """The one core the worker runs on (None: not pinned)."""
    env: dict
    """The worker's whole environment once confined."""
    landlock: tuple
    """PathRules: everything the worker may read or write (nothing else)."""
    seccomp: tuple
    """SyscallRules; any other call fails with EPERM, a foreign ABI kills."""
    layers: tuple = field(default=LAYERS[2:])
    """The layers apply() applies, in order."""


CLONE_THREAD = 0x00010000
# open(2) flags that write or create: refused once the scratch is sealed. O_TMPFILE includes
# O_DIRECTORY, which reading a directory uses: only its own bit is tested.
WRITE_FLAGS = (
    os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND | (0o20000000 if sys.platform == "linux" else 0)
)
CREATE_FLAGS = WRITE_FLAGS & ~(os.O_WRONLY | os.O_RDWR)

# What Python and torch call while importing and computing on one thread. No call here creates,
# writes, renames, removes or truncates a file: open and openat are allowed by flags (below).
ALLOWED_SYSCALLS = """
    read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2 lseek close
    stat fstat lstat newfstatat statx access faccessat faccessat2 readlink readlinkat
    getdents64 getcwd chdir fchdir fsync fdatasync flock fadvise64 readahead statfs fstatfs umask
    sendfile copy_file_range splice tee
    fcntl dup dup2 dup3 pipe pipe2 poll ppoll select pselect6 epoll_create epoll_create1 epoll_ctl
    epoll_wait epoll_pwait epoll_pwait2 eventfd eventfd2 timerfd_create timerfd_settime timerfd_gettime
    mmap munmap mprotect mremap madvise brk msync mincore get_mempolicy
    futex futex_waitv set_robust_list get_robust_list rseq set_tid_address arch_prctl membarrier
    rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigsuspend rt_sigtimedwait sigaltstack
    setitimer getitimer alarm timer_create timer_settime timer_gettime timer_getoverrun timer_delete
    clock_gettime clock_getres clock_nanosleep nanosleep gettimeofday time
    getpid gettid getppid getuid geteuid getgid getegid getgroups getresuid getresgid getpgrp getpgid getsid
    getrusage times sysinfo getrandom uname getcpu capget
    sched_getaffinity sched_yield sched_getparam sched_getscheduler sched_getattr
    sched_get_priority_max sched_get_priority_min getpriority getrlimit
    exit exit_group
""".split()  # noqa: SIM905 - grouped by kind, a group a line
IOCTLS = (0x5401, 0x541B, 0x5421, 0x5450, 0x5451)  # TCGETS FIONREAD FIONBIO FIONCLEX FIOCLEX
PRCTLS = (3, 15, 16, 23, 0x53564D41)  # GET_DUMPABLE SET_NAME GET_NAME CAPBSET_READ SET_VMA

OUTPUT_FILES = 64  # RLIMIT_NOFILE of a CPU worker: Python's imports need a few at a time
GPU_FILES = 1024  # a GPU worker's: the driver holds descriptors of its own
TASKS = 16  # RLIMIT_NPROC: a CPU worker starts none (seccomp); a GPU worker this many past CUDA's


def confinement_plan(
    facts: MachineFacts,
    *,
    scratch: str,
    memory_bytes: int,
    output_bytes: int,
    cpu: int | None = None,
    cuda_device: str | None = None,
    own_accounting: bool = False,
    extra_read: tuple = (),
    pid: int | None = None,
) -> ConfinementPlan:
    """The confinement of one worker. `cuda_device`: the GPU the judge gave it (a real-GPU
    worker; ignored where facts show no real GPU); `own_accounting`: its task count is its own
    (own uid or user namespace), so RLIMIT_NPROC bounds it alone."""
    gpu = cuda_device is not None and facts.real_gpu
    pid = os.getpid() if pid is None else pid
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "HOME": str(scratch),
        "PYTORCH_NVML_BASED_CUDA_CHECK": "1",  # asking whether CUDA exists never initialises it
    }
    read = frozenset({"execute", "read_file", "read_dir"})
    landlock = [
        *(PathRule(path, read) for path in python_paths()),
        *(PathRule(path, read) for path in ("/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/localtime")),
        PathRule("/dev/urandom", read),
        PathRule("/dev/null", read),
        PathRule(str(scratch), read, "the submission's files: read-only once written"),
        *(PathRule(str(path), read) for path in extra_read),
    ]
    deny_writes = ("open", 1), ("openat", 2)  # (call, index of its flags)
    seccomp = [
        *(SyscallRule(name, "allow") for name in ALLOWED_SYSCALLS),
        SyscallRule(
            "openat2", "ENOSYS", why="its flags are in a struct seccomp cannot read: libc falls back to openat"
        ),
        SyscallRule("clone3", "ENOSYS", why="its flags are in a struct: libc falls back to clone"),
        SyscallRule("kill", "allow", ((0, 0xFFFFFFFF, pid),), "signals to itself only"),
        SyscallRule("tgkill", "allow", ((0, 0xFFFFFFFF, pid),), "signals to its own threads only"),
        SyscallRule("prlimit64", "allow", ((2, 0xFFFFFFFFFFFFFFFF, 0),), "read a limit, never set one"),
        *(SyscallRule("prctl", "allow", ((0, 0xFFFFFFFF, option),)) for option in PRCTLS),
    ]
    rlimits = {"FSIZE": output_bytes, "CORE": 0, "MEMLOCK": 0, "NOFILE": OUTPUT_FILES, "NPROC": TASKS}
    if not gpu:
        seccomp += [
            SyscallRule(call, "allow", ((index, WRITE_FLAGS, 0),), "read-only opens") for call, index in deny_writes
        ]
        seccomp += [SyscallRule("ioctl", "allow", ((1, 0xFFFFFFFF, request),)) for request in IOCTLS]
        seccomp.append(SyscallRule("clone", "EPERM", why="no new thread or process once student code loads"))
        return ConfinementPlan(
            gpu=False,
            cuda_device=None,
            gpu_memory_bytes=None,
            threads=False,
            memory_bytes=memory_bytes,
            rlimits=rlimits,
            cpu=cpu,
            env=env,
            landlock=tuple(landlock),
            seccomp=tuple(seccomp),
        )
    # ---- the GPU profile: what the CUDA driver needs after initialisation, no more
    env.update({name: value for name, value in facts.gpu_env if name in ("LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES")})
    env.update(
        {
            "CUDA_VISIBLE_DEVICES": cuda_device,  # one GPU per worker, chosen by the judge (round-robin)
            "CUDA_DEVICE_ORDER": dict(facts.gpu_env).get("CUDA_DEVICE_ORDER", "FASTEST_FIRST"),
            "CUDA_CACHE_DISABLE": "1",  # the JIT cache would write to ~/.nv: writes are refused
            "CUDA_MODULE_LOADING": "LAZY",  # kernels load when first used, not all at initialisation
        }
    )
    nodes = [node for node in facts.device_nodes if not node.startswith("/dev/nvidia-caps")]
    device_rights = frozenset({"read_file", "write_file", "ioctl_dev"})
    landlock += [
        *(
            PathRule(node, device_rights, "the driver is driven by reads, writes and ioctls on its device files")
            for node in nodes
        ),
        PathRule("/proc/driver/nvidia", read, "the driver's parameters and its GPUs"),
        PathRule("/sys", read, "PCI topology and NUMA nodes of the GPU"),
        PathRule(f"/proc/{pid}", read, "its own maps, limits and status, which the driver reads"),
        PathRule(f"/proc/{pid}/task", frozenset({"read_file", "write_file"}), "the driver names its threads (comm)"),
    ]
    seccomp += [
        SyscallRule(
            call, "allow", ((index, CREATE_FLAGS, 0),), "device files are opened read-write; nothing is created"
        )
        for call, index in deny_writes
    ]
    seccomp += [
        SyscallRule("ioctl", "allow", why="the driver's own requests, too many to list"),
        SyscallRule("clone", "allow", ((0, CLONE_THREAD, CLONE_THREAD),), "the driver and autograd start threads"),
        SyscallRule("memfd_create", "allow", why="recent drivers share memory through memfds"),
        SyscallRule("ftruncate", "allow", why="a memfd is sized with ftruncate (a file is bounded by RLIMIT_FSIZE)"),
        SyscallRule("mbind", "allow", why="the driver places pinned host memory on the GPU's NUMA node"),
    ]
    rlimits["NOFILE"] = GPU_FILES
    if not own_accounting:
        # Counted per uid: a shared uid counts the neighbours' (and the user's) tasks as well.
        del rlimits["NPROC"]
    return ConfinementPlan(
        gpu=True,
        cuda_device=cuda_device,
        gpu_memory_bytes=memory_bytes,
        threads=True,
        memory_bytes=memory_bytes,
        rlimits=rlimits,
        cpu=cpu,
        env=env,
        landlock=tuple(landlock),
        seccomp=tuple(seccomp),
    )


@dataclass(frozen=True)
class ServerPlan:
    """What the worker server's bubblewrap adds for a GPU, and the environment it is given."""

    device_binds: tuple
    """Device files bound into the server's /dev (those created lazily included: bound if present)."""
    read_only_binds: tuple
    """Paths the driver reads besides the Python installation (bound read-only if present)."""
    env: dict
    """Variables the server is started with (on top of its own)."""
    real_gpu: bool
    """Whether a real GPU is in use: then the server's warm-up must not touch CUDA."""


# Device files the driver creates on first use (nvidia-modprobe), after the server may have started.
LAZY_DEVICE_NODES = ("/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset", "/dev/nvidia-caps")


def server_plan(facts: MachineFacts) -> ServerPlan:
    """The GPU part of the worker server's start (bubblewrap binds, environment)."""
    env = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}  # torch.cuda.is_available() asks NVML: no cuInit before fork
    env.update(dict(facts.gpu_env))
    gpu = any(re.fullmatch(r"/dev/nvidia(\d+|ctl)", node) for node in facts.device_nodes)
    if not gpu:
        return ServerPlan((), (), env, False)
    devices = sorted(set(facts.device_nodes) | set(LAZY_DEVICE_NODES))
    libraries = [d for d in dict(facts.gpu_env).get("LD_LIBRARY_PATH", "").split(":") if d.startswith("/")]
    if facts.driver_library:
        libraries.append(os.path.dirname(facts.driver_library))
    read_only = ["/sys", *sorted(set(libraries))]
    return ServerPlan(tuple(devices), tuple(read_only), env, facts.real_gpu or gpu)


# ---------------------------------------------------------------------------- descriptors


def close_other_fds(keep):
    """Close every descriptor but `keep` (and 0-2, which the caller sets up)."""
    keep = sorted(set(keep))
    low = 3
    for fd in keep:
        if fd >= low:
            os.closerange(low, fd)  # close_range(2) underneath on Linux
            low = fd + 1
    os.closerange(low, 1 << 20)


# ---------------------------------------------------------------------------- privilege

SANDBOX_UID = SANDBOX_GID = 65534  # nobody: what the worker server runs as when started as root
OWN_UIDS = 60000  # the first of the workers' own uids (root only): 16 blocks of 64, below systemd's dynamic users
UID_BLOCK, UID_BLOCKS = 64, 16


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


def _set_capabilities(caps):
    """Effective and permitted sets = `caps` (bit numbers), inheritable empty."""
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2 words
    for cap in caps:
        data[0] |= 1 << cap
        data[1] |= 1 << cap
    return libc.capset(ctypes.byref(header), data) == 0


def drop_to_unprivileged_user(uid=SANDBOX_UID, gid=SANDBOX_GID, keep_setuid=False):
    """From root: no supplementary groups, the unprivileged uid/gid (all three of each), no
    capability but, with `keep_setuid`, CAP_SETUID and CAP_SETGID (to give each worker a uid of
    its own) and CAP_KILL (to kill it: it is not our uid; CAP_SETUID could reach it anyway).
    Does nothing when not root."""
    if os.geteuid() != 0:
        return False
    kept = (CAP_SETUID, CAP_SETGID, CAP_KILL) if keep_setuid else ()
    for cap in range(64):
        if cap not in kept:
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability: harmless
    libc.prctl(PR_SET_KEEPCAPS, 1 if kept else 0, 0, 0, 0)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if kept:
        libc.prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0)
        if not _set_capabilities(kept):
            raise OSError(ctypes.get_errno(), "could not keep CAP_SETUID, CAP_SETGID and CAP_KILL")
    return True


def become_worker_user(uid, gid):
    """In a fresh worker of a server that kept CAP_SETUID: its own uid and gid, then no
    capability at all (nonzero to nonzero keeps them otherwise)."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    _set_capabilities(())
    return os.getuid() == uid


def drop_capabilities():
    """No capability now or ever: bounding set emptied, capability sets zeroed, no new privileges."""
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability: harmless
    _set_capabilities(())
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


class file_identity:
    """Within the block, files are created and checked as `uid`/`gid` (setfsuid: this thread
    only; needs CAP_SETUID). A no-op for None."""

    def __init__(self, uid, gid):
        self.ids = None if uid is None else (uid, gid)

    def __enter__(self):
        if self.ids:
            self.saved = libc.setfsuid(-1), libc.setfsgid(-1)
            libc.setfsgid(self.ids[1])
            libc.setfsuid(self.ids[0])
        return self

    def __exit__(self, *exc):
        if self.ids:
            libc.setfsuid(self.saved[0])
            libc.setfsgid(self.saved[1])


# ---------------------------------------------------------------------------- namespaces

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_NOSUID, MS_NODEV = 2, 4
INNER_ID = 1000  # the worker's uid/gid inside its user namespace


def private_scratch(mount_point, size_bytes):
    """Enter new user and mount namespaces and mount a tmpfs of `size_bytes` on `mount_point`,
    seen by this process alone. Must run single-threaded. False if the kernel refuses: where it
    allows unshare and refuses the id map (Ubuntu 24.04's AppArmor), the process stays in a user
    namespace of its own without a map (its ids show as the overflow id; the kernel still checks
    its access as its own uid), with no tmpfs."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS  # network and ipc: the server's own (bubblewrap), and seccomp bans sockets
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # /proc/self/*_map are writable only while dumpable
    try:
        if libc.unshare(flags) != 0:
            return False
        try:
            for name, text in (
                ("setgroups", "deny"),
                ("uid_map", f"{INNER_ID} {uid} 1"),
                ("gid_map", f"{INNER_ID} {gid} 1"),
            ):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
        except PermissionError:
            return False
        options = f"size={size_bytes},mode=0700,uid={INNER_ID},gid={INNER_ID}".encode()
        if libc.mount(b"mha-lab-scratch", str(mount_point).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
            raise OSError(ctypes.get_errno(), "mount of the scratch tmpfs failed")
        return True
    finally:
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no process of the same uid may read this one


def seal(directory):
    """Make `directory` and everything in it read-only (files 0400, directories 0500), through
    descriptors that follow no link; the worker cannot undo it (no chmod in the seccomp allow-list)."""
    for _, _, files, root_fd in os.fwalk(directory, topdown=False):
        for name in files:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=root_fd)
            except OSError:  # a link
                continue
            try:
                os.fchmod(fd, 0o400)
            finally:
                os.close(fd)
        os.fchmod(root_fd, 0o500)


# ---------------------------------------------------------------------------- CUDA, before confinement


def initialise_cuda(plan: ConfinementPlan) -> dict:
    """In a fresh worker (never in a process that forks): make the plan's one GPU visible,
    initialise CUDA, start what a grading run would start later (autograd's device threads,
    cuBLAS), cap the GPU memory. Returns what initialisation took."""
    os.environ.update(plan.env)
    started = time.monotonic()
    import torch

    torch.cuda.init()
    x = torch.ones(8, 8, device="cuda", requires_grad=True)
    (x @ x).sum().backward()
    torch.cuda.synchronize()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, plan.gpu_memory_bytes / total), 0)
    return {"seconds": time.monotonic() - started, "mapped_bytes": mapped_bytes(), "threads": thread_count()}


# ---------------------------------------------------------------------------- resource limits


def mapped_bytes():
    """The process's current virtual size (VmSize)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def thread_count():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 1


def limit_resources(plan: ConfinementPlan):
    """The plan's limits; the address space from what the process maps now (CUDA's included)."""
    address_space = mapped_bytes() + plan.memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    for name, value in plan.rlimits.items():
        if name == "NPROC" and plan.threads:
            value += thread_count()  # the driver's threads, started at initialisation
        resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (value, value))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing


def pin_to_cpu(cpu):
    """Run on one core only, so that busy threads slow this worker and no neighbour."""
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {cpu})
            return True
        except OSError:
            pass
    return False


# ---------------------------------------------------------------------------- Landlock

SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_RIGHTS = {
    "execute": 1 << 0,
    "write_file": 1 << 1,
    "read_file": 1 << 2,
    "read_dir": 1 << 3,
    "remove_dir": 1 << 4,
    "remove_file": 1 << 5,
    "make_dir": 1 << 7,
    "make_reg": 1 << 8,
    "truncate": 1 << 14,
    "ioctl_dev": 1 << 15,
}
FS_ALL_V1 = (1 << 13) - 1  # execute ... make_sym
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
DIRECTORY_ONLY = FS_ALL_V1 & ~(
    LANDLOCK_RIGHTS["execute"] | LANDLOCK_RIGHTS["write_file"] | LANDLOCK_RIGHTS["read_file"]
)


def landlock_abi():
    abi = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    return abi if abi > 0 else 0


def landlock(rules, bind_ports=()) -> bool:
    """Allow only what `rules` (PathRules) allow, for every file right the kernel handles; no TCP
    connection, and a TCP bind only on `bind_ports` (a notebook kernel's own: where the kernel
    handles TCP rights, ABI 4+)."""
    abi = landlock_abi()
    if abi < 1:
        return False
    handled = (
        FS_ALL_V1 | (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0) | (FS_IOCTL_DEV if abi >= 5 else 0)
    )
    net = (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("QQQ", handled, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    buffer = ctypes.create_string_buffer(attr[:size], size)
    ruleset = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, buffer, ctypes.c_size_t(size), 0)
    if ruleset < 0:
        return False
    try:
        for rule in rules:
            try:
                fd = os.open(rule.path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rights = sum(LANDLOCK_RIGHTS[name] for name in rule.access)
                if not os.path.isdir(rule.path):
                    rights &= ~DIRECTORY_ONLY & ~LANDLOCK_RIGHTS["read_dir"]
                packed = ctypes.create_string_buffer(struct.pack("=Qi", rights & handled, fd), 12)
                libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, 1, packed, 0)  # LANDLOCK_RULE_PATH_BENEATH
            finally:
                os.close(fd)
        for port in bind_ports if net else ():
            packed = ctypes.create_string_buffer(struct.pack("=QQ", NET_BIND_TCP, port), 16)
            if libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, 2, packed, 0) != 0:  # LANDLOCK_RULE_NET_PORT
                return False
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        return libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) == 0
    finally:
        os.close(ruleset)


# ---------------------------------------------------------------------------- seccomp


def _seccomp_library():
    """libseccomp's Python bindings, loaded where this module is (in the worker server)."""
    try:
        import pyseccomp as seccomp  # PyPI: ctypes over libseccomp
    except (ImportError, RuntimeError):  # RuntimeError: libseccomp itself is missing
        try:
            import seccomp  # Debian's python3-seccomp, libseccomp's own bindings
        except ImportError:
            return None
    return seccomp


SECCOMP = _seccomp_library()


def seccomp_filter(rules, default: str = "EPERM") -> bool:
    """Install `rules` (SyscallRules) over a `default` action ('allow' or an errno: EPERM, the
    workers' allow-list); False if libseccomp is missing or refuses a rule."""
    seccomp = SECCOMP
    if seccomp is None:
        return False
    try:
        flt = seccomp.SyscallFilter(seccomp.ALLOW if default == "allow" else seccomp.ERRNO(getattr(errno, default)))
        flt.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)  # i386 and x32 calls
        # Every thread, those CUDA's driver started before the confinement included (else a
        # filter holds only the calling thread and those it starts later).
        flt.set_attr(seccomp.Attr.CTL_TSYNC, 1)
        for rule in rules:
            action = seccomp.ALLOW if rule.action == "allow" else seccomp.ERRNO(getattr(errno, rule.action))
            conditions = [
                seccomp.Arg(index, getattr(seccomp, mask.upper()), value)
                if isinstance(mask, str)
                else seccomp.Arg(index, seccomp.MASKED_EQ, mask, value)
                for index, mask, value in rule.masked
            ]
            try:
                flt.add_rule(action, rule.name, *conditions)
            except (RuntimeError, ValueError, OSError):  # not a system call on this architecture
                if conditions:
                    raise
        flt.load()
    except (RuntimeError, ValueError, OSError):
        return False
    return True


# ---------------------------------------------------------------------------- all together


def python_paths():
    """Where this interpreter reads its own code from (stdlib, site-packages, extensions)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for entry in sys.path:
        if entry and ("site-packages" in entry or "dist-packages" in entry or entry.startswith(sys.base_prefix)):
            paths.add(entry)
    return sorted(p for p in paths if p and os.path.exists(p))


def apply(plan: ConfinementPlan, only=None) -> list:
    """Apply the plan's layers (or those of them in `only`); return the names of those in force."""
    layers = []
    wanted = [layer for layer in plan.layers if only is None or layer in only]
    for layer in wanted:
        if layer == "no-capabilities":
            drop_capabilities()
        elif layer == "rlimits":
            limit_resources(plan)
        elif layer == "one-cpu" and not pin_to_cpu(plan.cpu):  # noqa: SIM114 - a layer a line, as applied
            continue
        elif layer == "landlock" and not landlock(plan.landlock):  # noqa: SIM114
            continue
        elif layer == "seccomp" and not seccomp_filter(plan.seccomp):
            continue
        layers.append(layer)
    return layers
