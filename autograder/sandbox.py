"""Confine a worker process before it imports student code (Linux; each layer optional).

* resource limits: address space (what the process already maps + a budget), file size (so a
  flood of output stops), no core dumps;
* Landlock (kernel 5.13+, unprivileged, also binds root): the worker may read only the Python
  installation and a few system paths, read and write only its scratch directory, open no TCP
  connection, and signal no process outside itself;
* seccomp: no new processes (fork, vfork, clone without CLONE_THREAD; clone3 answers ENOSYS so
  threads fall back to clone), no ptrace.

`confine()` applies what the kernel supports and returns the names of the layers in force.
"""
import ctypes
import os
import platform
import resource
import signal
import struct
import sys
from pathlib import Path

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

# ---------------------------------------------------------------------------- resource limits


def mapped_bytes():
    """The process's current virtual size (VmSize)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def limit_resources(memory_bytes, output_bytes):
    extra = mapped_bytes() + memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (extra, extra))
    resource.setrlimit(resource.RLIMIT_FSIZE, (output_bytes, output_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing


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
    handled = FS_ALL_V1 | (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0) | \
        (FS_IOCTL_DEV if abi >= 5 else 0)
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

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
SYSCALLS = {  # name -> number, per architecture
    "x86_64": {"clone": 56, "fork": 57, "vfork": 58, "ptrace": 101, "clone3": 435},
    "aarch64": {"clone": 220, "ptrace": 117, "clone3": 435},
}
CLONE_THREAD = 0x00010000
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
EPERM, ENOSYS = 1, 38


def _bpf(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


def seccomp_no_new_processes():
    """Install the filter described in the module docstring; False if unsupported here."""
    machine = platform.machine()
    if machine not in AUDIT_ARCH:
        return False
    numbers = SYSCALLS[machine]
    LD, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06
    denied = [numbers[name] for name in ("fork", "vfork", "ptrace") if name in numbers]
    program = [_bpf(LD, 0, 0, 4), _bpf(JEQ, 1, 0, AUDIT_ARCH[machine]), _bpf(RET, 0, 0, RET_ALLOW),
               _bpf(LD, 0, 0, 0)]
    # After the load of the syscall number: clone3 -> ENOSYS, denied -> EPERM, clone -> inspect flags.
    tail = len(denied) + 5  # instructions after the clone3 test, up to the EPERM/ENOSYS returns
    program.append(_bpf(JEQ, tail + 1, 0, numbers["clone3"]))            # -> RET ENOSYS
    for i, number in enumerate(denied):
        program.append(_bpf(JEQ, tail - 1 - i, 0, number))                # -> RET EPERM
    program += [_bpf(JEQ, 1, 0, numbers["clone"]),                        # clone: check flags
                _bpf(RET, 0, 0, RET_ALLOW),
                _bpf(LD, 0, 0, 16),                                       # args[0], low half
                _bpf(JSET, 0, 1, CLONE_THREAD),                           # a thread: allow
                _bpf(RET, 0, 0, RET_ALLOW),
                _bpf(RET, 0, 0, RET_ERRNO | EPERM),
                _bpf(RET, 0, 0, RET_ERRNO | ENOSYS)]
    filters = b"".join(program)
    buffer = ctypes.create_string_buffer(filters, len(filters))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(program), ctypes.cast(buffer, ctypes.c_void_p))
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0


# ---------------------------------------------------------------------------- all together


def python_paths():
    """Where this interpreter reads its own code from (stdlib, site-packages, extensions)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for entry in sys.path:
        if entry and ("site-packages" in entry or "dist-packages" in entry or entry.startswith(sys.base_prefix)):
            paths.add(entry)
    return sorted(p for p in paths if p and os.path.exists(p))


def confine(scratch, memory_bytes, output_bytes, extra_read=()):
    """Apply every available layer; return the names of those in force."""
    layers = []
    limit_resources(memory_bytes, output_bytes)
    layers.append("rlimits")
    read_only = [*python_paths(), "/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/localtime",
                 "/dev/urandom", *extra_read]
    if landlock(read_only, [str(scratch)], files_read_write=["/dev/null"]):
        layers.append("landlock")
    if seccomp_no_new_processes():
        layers.append("seccomp")
    return layers
