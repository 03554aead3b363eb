"""Confine a worker process before it imports student code (Linux; each layer optional).

Threat model: the code being confined is hostile. It may try to read the reference or other
students' work, change anything outside its scratch directory, reach another process (the judge,
the worker server, a neighbouring worker), open a network connection, start processes, or exhaust
the machine. The layers below, applied in this order in a freshly forked, single-threaded worker,
are each meant to stop all of that on their own where the kernel offers them:

* descriptors: every one is closed but the channel to the judge and the output file the judge
  made (`close_range`), so nothing inherited is left to misuse;
* namespaces (kernel user namespaces): a private mount namespace with a size-capped tmpfs as
  scratch, which no other process can see and which vanishes with the worker; the worker server
  itself runs under bubblewrap in its own pid, network, ipc and uts namespaces (fork_server.py);
* no privilege: started as root, the worker server runs as an unprivileged uid with no
  capabilities and no supplementary groups; a worker keeps no capability and cannot gain one;
* resource limits: address space (what the process already maps + a budget), file size (so a
  flood of output stops), threads (RLIMIT_NPROC, counted per worker in its user namespace), no
  core dumps, and one CPU core (so a busy worker slows only itself);
* Landlock (kernel 5.13+): the worker may read only the Python installation and a few system
  paths, read and write only its scratch directory, open no TCP connection, and signal no
  process outside itself;
* seccomp, an allow-list built with libseccomp: the system calls Python and torch make while
  computing, nothing else. Any call from a foreign ABI (i386 `int 0x80`, x32) kills the
  process; process creation, sockets, memfd_create, mknod, bpf, ptrace, mount, namespaces,
  priority changes, keyrings and the rest fail with EPERM; signals may only go to the worker
  itself.

`confine()` applies what the system supports and returns the names of the layers in force.
"""

import ctypes
import errno
import os
import resource
import signal
import struct
import sys
from pathlib import Path

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24

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


def drop_to_unprivileged_user(uid=SANDBOX_UID, gid=SANDBOX_GID):
    """From root: no supplementary groups, the unprivileged uid/gid (all three of each), which
    also clears every capability. Does nothing when not root."""
    if os.geteuid() != 0:
        return False
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    return True


def drop_capabilities():
    """No capability now or ever: bounding set emptied, capability sets zeroed, no new privileges."""
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability: harmless

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2 words, all zero
    libc.capset(ctypes.byref(header), data)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


# ---------------------------------------------------------------------------- namespaces

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_NOSUID, MS_NODEV = 2, 4
INNER_ID = 1000  # the worker's uid/gid inside its user namespace


def private_scratch(mount_point, size_bytes):
    """Enter new user and mount namespaces and mount a tmpfs of `size_bytes` on `mount_point`,
    seen by this process alone. Must run single-threaded. False if the kernel refuses."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS  # network and ipc: the server's own (bubblewrap), and seccomp bans sockets
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # /proc/self/*_map are writable only while dumpable
    try:
        if libc.unshare(flags) != 0:
            return False
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{INNER_ID} {uid} 1"),
            ("gid_map", f"{INNER_ID} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        options = f"size={size_bytes},mode=0700,uid={INNER_ID},gid={INNER_ID}".encode()
        if libc.mount(b"mha-lab-scratch", str(mount_point).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
            raise OSError(ctypes.get_errno(), "mount of the scratch tmpfs failed")
        return True
    finally:
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no process of the same uid may read this one


# ---------------------------------------------------------------------------- resource limits


def mapped_bytes():
    """The process's current virtual size (VmSize)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def limit_resources(memory_bytes, output_bytes, threads):
    extra = mapped_bytes() + memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (extra, extra))
    resource.setrlimit(resource.RLIMIT_FSIZE, (output_bytes, output_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (threads, threads))
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
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_ALL_V1 = (1 << 13) - 1  # execute ... make_sym
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV


def landlock_abi():
    abi = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    return abi if abi > 0 else 0


def landlock(read_only, read_write, files_read_write=()):
    """Allow only these paths (read_only / read_write directories, files_read_write files)."""
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

        def allow(path, rights):
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                return
            try:
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights & handled, fd), 12)
                libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, 1, rule, 0)  # LANDLOCK_RULE_PATH_BENEATH
            finally:
                os.close(fd)

        for path in read_only:
            allow(path, READ if os.path.isdir(path) else FS_EXECUTE | FS_READ_FILE)
        for path in read_write:
            allow(path, handled)
        for path in files_read_write:
            allow(path, FILE_RIGHTS)
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        return libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) == 0
    finally:
        os.close(ruleset)


# ---------------------------------------------------------------------------- seccomp

# What Python and torch call while importing and computing (CPU, one thread plus the few the
# runtime starts). Anything else fails with EPERM; see seccomp_allow_list() for the conditional ones.
ALLOWED_SYSCALLS = """
    read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2 lseek close
    open openat openat2 stat fstat lstat newfstatat statx access faccessat faccessat2 readlink readlinkat
    getdents64 getcwd chdir fchdir mkdir mkdirat unlink unlinkat rename renameat renameat2 rmdir
    ftruncate truncate fallocate fsync fdatasync flock fadvise64 readahead statfs fstatfs umask
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
""".split()
IOCTLS = (0x5401, 0x541B, 0x5421, 0x5450, 0x5451)  # TCGETS FIONREAD FIONBIO FIONCLEX FIOCLEX
PRCTLS = (3, 15, 16, 23, 0x53564D41)  # GET_DUMPABLE SET_NAME GET_NAME CAPBSET_READ SET_VMA
CLONE_THREAD = 0x00010000


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


def gpu_devices():
    """The NVIDIA device files of this machine (a real GPU): a worker on it needs them."""
    import glob

    return sorted(glob.glob("/dev/nvidia*"))


def seccomp_allow_list(any_ioctl=False):
    """Install the allow-list described in the module docstring; False if libseccomp is missing.
    `any_ioctl`: a real GPU's driver is driven by ioctls of its own, so they are all allowed."""
    seccomp = SECCOMP
    if seccomp is None:
        return False
    try:
        deny = seccomp.ERRNO(errno.EPERM)
        rules = seccomp.SyscallFilter(deny)
        rules.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)  # i386 and x32 calls
        for name in ALLOWED_SYSCALLS:
            try:
                rules.add_rule(seccomp.ALLOW, name)
            except (RuntimeError, ValueError, OSError):  # not a system call on this architecture
                pass
        mask = seccomp.Arg
        rules.add_rule(seccomp.ALLOW, "clone", mask(0, seccomp.MASKED_EQ, CLONE_THREAD, CLONE_THREAD))
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")  # glibc then creates threads with clone
        me = os.getpid()
        rules.add_rule(seccomp.ALLOW, "kill", mask(0, seccomp.EQ, me))
        rules.add_rule(seccomp.ALLOW, "tgkill", mask(0, seccomp.EQ, me))
        rules.add_rule(seccomp.ALLOW, "prlimit64", mask(2, seccomp.EQ, 0))  # read a limit, never set one
        if any_ioctl:
            rules.add_rule(seccomp.ALLOW, "ioctl")
        for request in () if any_ioctl else IOCTLS:
            rules.add_rule(seccomp.ALLOW, "ioctl", mask(1, seccomp.EQ, request))
        for option in PRCTLS:
            rules.add_rule(seccomp.ALLOW, "prctl", mask(0, seccomp.EQ, option))
        rules.load()
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


def confine(scratch, memory_bytes, output_bytes, threads, cpu=None, extra_read=()):
    """Apply the layers that come after the scratch set-up; return the names of those in force."""
    layers = []
    drop_capabilities()
    layers.append("no-capabilities")
    limit_resources(memory_bytes, output_bytes, threads)
    layers.append("rlimits")
    if pin_to_cpu(cpu):
        layers.append("one-cpu")
    read_only = [
        *python_paths(),
        "/usr",
        "/lib",
        "/lib64",
        "/etc/ld.so.cache",
        "/etc/localtime",
        "/dev/urandom",
        *extra_read,
    ]
    gpu = gpu_devices()  # a real GPU (not tested on one since the allow-list: see the README)
    if gpu:
        read_only += ["/proc/driver/nvidia", "/sys"]
    if landlock(read_only, [str(scratch)], files_read_write=["/dev/null", *gpu]):
        layers.append("landlock")
    if seccomp_allow_list(any_ioctl=bool(gpu)):
        layers.append("seccomp")
    return layers
