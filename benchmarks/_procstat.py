"""CPU time and memory of the grader's processes, read from /proc (Linux; NaN elsewhere).

The worker server runs under bubblewrap, a child of the judge: its CPU (and that of every
worker it has reaped) is read from its process tree, which RUSAGE_CHILDREN would only count
once it ends. Shared by the benchmarks; asserts nothing."""

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _children(pid):
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(p) for p in task.read_text().split()]
        except OSError:
            pass
    return found


def tree(pid):
    """`pid` and its live descendants."""
    pids, todo = [], [pid]
    while todo:
        current = todo.pop(0)
        pids.append(current)
        todo += _children(current)
    return pids


def cpu_seconds(pids):
    """User + system CPU of these processes and of the children each has reaped."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return total / TICK


def rss_bytes(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return float("nan")


def server_pid(preload="autograder.harness.serve"):
    """The worker server's own Python process (under bubblewrap: bwrap's descendant), or None."""
    from autograder.sandbox.fork_server import WorkerServer

    server = WorkerServer._shared.get(preload)
    if server is None:
        return None
    for pid in tree(server.process.pid):  # parents first: the server before its workers
        try:
            if (
                Path(f"/proc/{pid}/comm").read_text().strip() != "bwrap"
                and b"fork_server_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
            ):
                return pid
        except OSError:
            pass
    return None


def server_cpu_seconds(preload="autograder.harness.serve"):
    """CPU of the worker server's whole tree (bubblewrap, the server, every worker it reaped)."""
    from autograder.sandbox.fork_server import WorkerServer

    server = WorkerServer._shared.get(preload)
    return cpu_seconds(tree(server.process.pid)) if server is not None else float("nan")
