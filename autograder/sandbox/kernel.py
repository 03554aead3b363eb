"""A Jupyter kernel confined before it runs a student's notebook (nbgrader autograde's kernel).

    python -I -c "<put the kit on sys.path>; from autograder.sandbox.kernel import main; main()" \
        NOTEBOOK_DIR SCRATCH COURSE -f CONNECTION_FILE

routes/nbgrader_kernel.py starts it so (`-I`: no PYTHONPATH, no user site, not the current
folder, where a student's files could shadow a module). Before ipykernel starts, this process:

* makes SCRATCH (an empty folder of its kernel manager's) a tmpfs of SCRATCH_BYTES, seen by it
  alone (user and mount namespaces, where the machine allows them: else the folder stays on
  disk), copies its notebook's folder into SCRATCH/work (links as links) and moves there: the
  kernel works on that copy, so nothing it writes reaches the course, where nbgrader writes the
  executed notebook back;
* limits itself: files of at most FILE_LIMIT bytes, MEMORY_BYTES of address space beyond what it
  maps now, no core files;
* confines itself with Landlock, for itself and everything it starts (`!` commands included):
  it may read only the Python installation, a few system files, its own /proc entry, the
  connection file and SCRATCH (the copy it works in, HOME, TMPDIR), write only SCRATCH (files
  and folders; no links, no devices, nothing moved in from elsewhere), bind only its own ports
  (those of its connection file, and ephemeral ones for ipykernel's own pipes) and connect
  nowhere;
* checks that the kit (its grading.yml, a reference file) and the course (its gradebook, a
  source notebook) are now unreadable, and refuses to start otherwise (exit 3, saying why),
  unless the instructor set MHA_LAB_UNCONFINED_KERNEL=1 knowingly;
* runs the kernel as the first process of a pid namespace of its own (where the machine allows
  it), and waits for it: when the kernel ends, every process the student's code started ends
  with it, even one that left the kernel's process group;
* holds no terminal (nbgrader run from a shell hands it one: a terminal signals its foreground
  job), and adds a seccomp filter (`guards`) for what Landlock leaves open: sockets are TCP
  (and netlink's routes, which ZeroMQ reads), local socket pairs streams only, no connect() at
  all (nor TCP Fast Open, SCTP, io_uring), no port shared (SO_REUSEPORT), no System V IPC, POSIX
  message queues, keyrings or file events (inotify, fanotify), no signal on I/O, no lease, no
  ptrace, no child of its manager; and where it has no pid namespace, no signal, priority,
  limit or affinity set on another process, and no new session or process group (Landlock
  scopes signals only from ABI 6, the rest not at all): it refuses to start if the filter does
  not load;
* forgets the kit: its import paths and an editable install's finders go, its loaded modules
  too, so that `import autograder` finds nothing and the notebook's setup cell unpacks the grader
  it carries (public checks only).
"""

import json
import os
import resource
import shutil
import signal
import sys
from pathlib import Path

from autograder import KIT
from autograder.sandbox.confine import (
    PathRule,
    SyscallRule,
    landlock,
    landlock_abi,
    libc,
    mapped_bytes,
    private_scratch,
    python_paths,
    seccomp_filter,
)

UNCONFINED = "MHA_LAB_UNCONFINED_KERNEL"  # the instructor's knowing opt-out
REFUSED = 3  # the exit code of a kernel that could not be confined
FILE_LIMIT = 256 << 20  # bytes: the largest file a cell may write
SCRATCH_BYTES = 1 << 30  # bytes: all a kernel may write (its copy of the notebook's folder included)
MEMORY_BYTES = 8 << 30  # address space beyond what the kernel maps before ipykernel starts
# What the kernel may read besides the Python installation, its notebook and its scratch.
SYSTEM_READS = (
    "/usr",
    "/lib",
    "/lib64",
    "/bin",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/mime.types",
    "/etc/fonts",
    "/etc/matplotlibrc",
    "/dev/urandom",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/sys/devices/system/cpu",
)
READ = frozenset({"execute", "read_file", "read_dir"})
WRITE = READ | frozenset({"write_file", "truncate", "make_reg", "make_dir", "remove_file", "remove_dir"})
WORK = "work"  # SCRATCH/work: the copy of the notebook's folder the kernel works in
PORTS = ("shell_port", "iopub_port", "stdin_port", "hb_port", "control_port")


def kernel_rules(scratch: str, connection_file: str, pid: int) -> list:
    """The Landlock rules of a kernel whose scratch folder is `scratch`."""
    return [
        *(PathRule(path, READ) for path in python_paths()),
        *(PathRule(path, READ) for path in SYSTEM_READS),
        PathRule(f"/proc/{pid}", READ, "its own status, limits and descriptors (`pid` as /proc names it)"),
        PathRule("/dev/null", frozenset({"read_file", "write_file"})),
        PathRule(connection_file, frozenset({"read_file"}), "the ports and key the kernel serves on"),
        PathRule(scratch, WRITE, "the copy of the notebook's folder, HOME and TMPDIR (the grader is unpacked there)"),
    ]


def secrets_of(course: str | None) -> list:
    """Files the confined kernel must not be able to read: the kit's (its grading.yml, a
    reference file) and, where known, the course's gradebook and a source notebook."""
    found = [KIT / "grading.yml", *sorted((KIT / "solutions").glob("*/*.py"))[:1]]
    if course:
        found += [Path(course) / "gradebook.db", *sorted(Path(course).glob("source/*/*.ipynb"))[:1]]
    return [str(path) for path in found if path.is_file()]


def readable(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            handle.read(1)
        return True
    except OSError:
        return False


def leave_terminals() -> list:
    """Put /dev/null in place of every descriptor of a terminal this process inherited (nbgrader
    run from a shell gives the kernel its stdout and stderr): a terminal signals its foreground
    group (the instructor's shell job) on a window size set or on input with O_ASYNC. Returns
    the descriptors replaced."""
    replaced = []
    null = os.open(os.devnull, os.O_RDWR)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd != null and os.isatty(fd):
            os.dup2(null, fd)
            replaced.append(fd)
    os.close(null)
    return replaced


def work_in_scratch(notebook_dir: str, scratch: str) -> bool:
    """SCRATCH as a private tmpfs where the machine allows it (True), then SCRATCH/work, a copy of
    the notebook's folder, as the current folder, and SCRATCH/home, SCRATCH/tmp."""
    capped = private_scratch(scratch, SCRATCH_BYTES)
    work = os.path.join(scratch, WORK)
    shutil.copytree(notebook_dir, work, symlinks=True)
    for name in ("home", "tmp"):
        os.makedirs(os.path.join(scratch, name), exist_ok=True)
    os.chdir(work)
    return capped


def confine(scratch: str, connection_file: str, course: str | None) -> list:
    """Confine this process (the kernel to be) and everything it starts; returns what is still
    readable of secrets_of(course): empty where the confinement holds."""
    with open(connection_file, encoding="utf-8") as handle:
        info = json.load(handle)
    memory = mapped_bytes() + MEMORY_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
    secrets = secrets_of(course)
    rules = kernel_rules(scratch, connection_file, int(os.readlink("/proc/self")))
    if not landlock(rules, bind_ports=[0, *(int(info[key]) for key in PORTS)]):
        return secrets or ["(Landlock did not apply)"]
    return [path for path in secrets if readable(path)]


INT = 0xFFFFFFFF  # an int argument's bits (the register's upper half is not the kernel's)
AF_INET, AF_INET6, AF_NETLINK, SOCK_STREAM = 2, 10, 16, 1  # ZeroMQ lists interfaces over NETLINK_ROUTE
# Calls that act on another process named by its pid: harmless in a pid namespace of the kernel's
# own, where no other process has a pid; without one, only the caller may be named (argument,
# the one value allowed). ptrace-like calls are Landlock's (scoped to its domain since ABI 1).
OTHER_PROCESS = (
    ("prlimit64", 0, 0),
    ("sched_setaffinity", 0, 0),
    ("sched_setparam", 0, 0),
    ("sched_setscheduler", 0, 0),
    ("sched_setattr", 0, 0),
    ("migrate_pages", 0, 0),
    ("move_pages", 0, 0),
    ("setpriority", 0, 0),  # PRIO_PROCESS: not a process group's, nor every process of the user
    ("setpriority", 1, 0),
    ("ioprio_set", 0, 1),  # IOPRIO_WHO_PROCESS
    ("ioprio_set", 1, 0),
)
SELF_SIGNALS = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")  # argument 0: the process
SYSV_IPC = (
    "shmget",
    "shmat",
    "shmctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
)
POSIX_MQ = ("mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr")
KEYS = ("add_key", "request_key", "keyctl")
WATCHES = ("inotify_init", "inotify_init1", "fanotify_init")
IPPROTO_TCP, F_SETFL, O_ASYNC, F_SETLEASE = 6, 4, 0o20000, 1024
SOL_SOCKET, SO_REUSEPORT, CLONE_PARENT = 1, 15, 0x00008000
# A file's owner gets SIGIO/SIGURG from the kernel: setting it to another process signals that one.
SET_OWNER = (
    ("fcntl", 1, 10),  # F_SETSIG: which signal the owner gets
    ("fcntl", 1, 8),
    ("fcntl", 1, 15),
    ("ioctl", 1, 0x8901),
    ("ioctl", 1, 0x8902),
)  # F_SETOWN(_EX), FIOSETOWN, SIOCSPGRP
MSG_FASTOPEN = 0x20000000  # sendto/sendmsg with it connects a TCP socket without connect()


def guards(abi: int, pid_namespace: bool, pid: int) -> list:
    """The seccomp rules (over a default of allow) that close what Landlock leaves open for a
    kernel whose Landlock ABI is `abi` and whose own pid is `pid`. libseccomp takes one condition
    per argument in a rule, so "anything but" is written as the parts of what is refused."""
    tcp_only = "sockets: TCP only (Landlock decides the ports); no local, UDP or raw socket"
    others = (0, 1, *range(3, AF_INET6), *range(AF_INET6 + 1, AF_NETLINK))
    rules = [
        *(SyscallRule("socket", "EPERM", ((0, INT, family),), tcp_only) for family in others),
        SyscallRule("socket", "EPERM", ((0, "gt", AF_NETLINK),), tcp_only),
        SyscallRule("socket", "EPERM", ((0, INT, AF_NETLINK), (2, "ne", 0)), "netlink: reading routes only"),
        *(
            SyscallRule("socket", "EPERM", ((0, INT, family), (1, 0xF, kind)), tcp_only)
            for family in (AF_INET, AF_INET6)
            for kind in range(16)
            if kind != SOCK_STREAM
        ),
        *(  # a stream socket's protocol: 0 or TCP, not SCTP or MPTCP (they connect past connect())
            SyscallRule("socket", "EPERM", ((0, INT, family), (2, *protocol)), tcp_only)
            for family in (AF_INET, AF_INET6)
            for protocol in ((INT, 1), (INT, 2), (INT, 3), (INT, 4), (INT, 5), ("gt", IPPROTO_TCP))
        ),
        *(  # a local datagram pair sends to any address (path or abstract): stream pairs only
            SyscallRule("socketpair", "EPERM", ((1, 0xF, kind),), "local socket pairs: streams only")
            for kind in range(16)
            if kind != SOCK_STREAM
        ),
        SyscallRule("connect", "EPERM", (), "a kernel serves on its ports and connects nowhere (any Landlock ABI)"),
        *(
            SyscallRule(call, "EPERM", ((index, MSG_FASTOPEN, MSG_FASTOPEN),), "TCP Fast Open connects too")
            for call, index in (("sendto", 3), ("sendmsg", 2), ("sendmmsg", 3))
        ),
        SyscallRule("io_uring_setup", "EPERM", (), "io_uring connects and opens past seccomp"),
        *(SyscallRule(call, "EPERM", (), "System V IPC: the user's segments and queues") for call in SYSV_IPC),
        *(SyscallRule(call, "EPERM", (), "POSIX message queues: the user's, by name") for call in POSIX_MQ),
        *(SyscallRule(call, "EPERM", (), "keyrings: the instructor's session keyring is inherited") for call in KEYS),
        *(SyscallRule(call, "EPERM", (), "file events: names made elsewhere, unreadable") for call in WATCHES),
        SyscallRule("setsockopt", "EPERM", ((1, INT, SOL_SOCKET), (2, INT, SO_REUSEPORT)), "no port shared"),
        SyscallRule("fcntl", "EPERM", ((1, INT, F_SETLEASE),), "a lease stalls another process's open"),
        SyscallRule("ptrace", "EPERM", (), "PTRACE_TRACEME: the manager would read a stop as the end"),
        SyscallRule("clone", "EPERM", ((0, CLONE_PARENT, CLONE_PARENT),), "no child of the kernel's manager"),
        SyscallRule("clone3", "ENOSYS", (), "its flags are in a struct: libc falls back to clone"),
        *(  # a file's owner (a terminal's: its foreground group) gets SIGIO, or the signal F_SETSIG names
            SyscallRule(call, "EPERM", ((index, INT, value),), "no signal on I/O") for call, index, value in SET_OWNER
        ),
        SyscallRule("fcntl", "EPERM", ((1, INT, F_SETFL), (2, O_ASYNC, O_ASYNC)), "no signal on I/O"),
    ]
    if pid_namespace:
        return rules
    if abi < 6:  # Landlock scopes signals from ABI 6
        itself = "signals to itself only (no pid namespace, no Landlock signal scope)"
        rules += [SyscallRule(call, "EPERM", ((0, "ne", pid),), itself) for call in SELF_SIGNALS]
        rules += [SyscallRule(call, "EPERM", (), itself) for call in ("tkill", "pidfd_send_signal")]
        # A process of the kernel's that left its process group would outlive the kernel (its
        # manager ends the group) and keep the filter, allowing signals to the kernel's pid: a
        # number the next process may get. So no new session or group.
        rules += [SyscallRule(call, "EPERM", (), itself) for call in ("setsid", "setpgid")]
    rules += [
        SyscallRule(call, "EPERM", ((index, "ne", allowed),), "no other process's limits or scheduling")
        for call, index, allowed in OTHER_PROCESS
    ]
    return rules


CLONE_NEWPID = 0x20000000


def own_pid_namespace() -> bool:
    """Whether the next child of this process is the first of a pid namespace of its own."""
    return libc.unshare(CLONE_NEWPID) == 0


def forget_the_kit():
    """Take the kit out of this interpreter: its import paths and an editable install's finders
    and path entries, its loaded modules. Afterwards `import autograder` finds nothing."""
    kit = os.path.abspath(KIT)
    hooks = [finder for finder in sys.meta_path if _finds_the_kit(finder, kit)]
    sys.meta_path[:] = [finder for finder in sys.meta_path if finder not in hooks]
    sys.path[:] = [
        entry for entry in sys.path if entry and os.path.abspath(entry) != kit and "__editable__" not in entry
    ]
    sys.path_importer_cache.clear()
    for name in [name for name in sys.modules if name == "autograder" or name.startswith("autograder.")]:
        del sys.modules[name]


def _finds_the_kit(finder, kit: str) -> bool:
    """An editable install's finder (setuptools' __editable__ finders map names to folders)."""
    module = sys.modules.get(getattr(finder, "__module__", "") or "")
    mapping = getattr(module, "MAPPING", None)
    return isinstance(mapping, dict) and any(os.path.dirname(os.path.abspath(p)) == kit for p in mapping.values())


def main(argv=None):
    """NOTEBOOK_DIR SCRATCH COURSE -f CONNECTION_FILE [ipykernel's options]."""
    argv = sys.argv[1:] if argv is None else list(argv)
    notebook_dir, scratch, course, *kernel_args = argv
    connection_file = os.path.abspath(kernel_args[kernel_args.index("-f") + 1])
    unconfined = os.environ.pop(UNCONFINED, "") == "1"
    leave_terminals()
    work_in_scratch(notebook_dir, scratch)
    # The pid namespace and its fork come before Landlock, whose rules name the kernel's own
    # /proc entry by its pid (the child's, as /proc names it).
    pid_namespace = own_pid_namespace()
    if pid_namespace:
        child = os.fork()
        if child:  # the kernel's parent: it waits, and its end (or a SIGKILL) ends them all
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is the kernel's (its process group's)
            os._exit(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) & 0xFF)
    left = confine(scratch, connection_file, course or None)
    if left and not unconfined:
        sys.stderr.write(
            "MHA Lab: this kernel could not be confined (Landlock: Linux 5.13 or later), so the "
            f"student's code could read {left[0]} and write the gradebook: it does not start. "
            f"Set {UNCONFINED}=1 for nbgrader autograde to run it anyway, knowingly.\n"
        )
        sys.exit(REFUSED)
    if not seccomp_filter(guards(landlock_abi(), pid_namespace, os.getpid()), default="allow") and not unconfined:
        sys.stderr.write(
            "MHA Lab: this kernel's seccomp filter did not load (libseccomp: pip install pyseccomp), so the "
            "student's code could connect to the instructor's services or signal their processes: it does not "
            f"start. Set {UNCONFINED}=1 for nbgrader autograde to run it anyway, knowingly.\n"
        )
        sys.exit(REFUSED)
    forget_the_kit()
    # IPython leaves the notebook's folder off sys.path under -I; put it back where a kernel has
    # it (before site-packages), so that `import <package>` finds the files the cells wrote.
    where = next((i for i, entry in enumerate(sys.path) if entry.endswith(("site-packages", "dist-packages"))), 0)
    sys.path.insert(where, "")
    from ipykernel import kernelapp, kernelbase

    # ipykernel ends its children at shutdown by listing /proc, which it may not read here: its
    # kernel manager kills the kernel's process group instead (routes/nbgrader_kernel.py).
    kernelbase.Kernel._process_children = lambda self: []
    kernelapp.launch_new_instance(argv=kernel_args)
