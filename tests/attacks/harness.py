"""Run a command as a child subreaper and report what it left running.

    python tests/attacks/harness.py SPEC_JSON

SPEC: {"argv": [...], "cwd": ..., "env": {...}, "timeout": s, "grace": s, "report": path}.
Every process the command starts, however it detaches (double fork, setsid), is re-parented to
this process when its own parent ends, so after the command exits (or is killed at `timeout`)
the processes still alive here after `grace` seconds are exactly those that outlived it. They are
reported, then killed and reaped, so that no test leaves anything behind.
Report: {"rc", "timed_out", "survivors": [{"pid", "cmdline"}], "maxrss_kb", "stdout", "stderr"}.
"""

import ctypes
import json
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def children() -> list[int]:
    pids = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return pids


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:300]
    except OSError:
        return "?"


def main() -> None:
    spec = json.loads(sys.argv[1])
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("harness: cannot become a child subreaper")
    with open(spec["report"] + ".out", "wb") as out, open(spec["report"] + ".err", "wb") as err:
        process = subprocess.Popen(
            spec["argv"], cwd=spec["cwd"], env=spec["env"], stdout=out, stderr=err, stdin=subprocess.DEVNULL
        )
        timed_out = False
        deadline = time.monotonic() + spec["timeout"]
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                timed_out = True
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.05)
    rc = os.waitstatus_to_exitcode(status)
    # The grader's helpers (fork server, resource tracker, workers) end when it does; what is
    # still here after the grace period outlived it.
    end = time.monotonic() + spec["grace"]
    while True:
        reap()
        alive = [pid for pid in children() if cmdline(pid) != "?"]
        if not alive or time.monotonic() > end:
            break
        time.sleep(0.1)
    survivors = [{"pid": pid, "cmdline": cmdline(pid)} for pid in alive]
    for _ in range(50):  # kill what outlived the grader (and what those leave when they die)
        pids = children()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
        reap()
    with open(spec["report"] + ".out", "rb") as f:
        stdout = f.read()[-20000:].decode(errors="replace")
    with open(spec["report"] + ".err", "rb") as f:
        stderr = f.read()[-20000:].decode(errors="replace")
    with open(spec["report"], "w") as f:
        json.dump(
            {
                "rc": rc,
                "timed_out": timed_out,
                "survivors": survivors,
                "maxrss_kb": usage.ru_maxrss,
                "stdout": stdout,
                "stderr": stderr,
            },
            f,
        )


if __name__ == "__main__":
    main()
