"""CPU time per phase of grading, recorded only where a benchmark asks for it.

    MHA_LAB_PHASES=/tmp/phases.jsonl python -m autograder grade ... --out out
    python benchmarks/phases.py --baseline REF     # runs that, two trees side by side

The judge's side: each grading thread's CPU (time.thread_time, so that two submissions graded
at once are told apart) is split among the phases it passes through (`phase("scan")`, nested:
an inner phase pauses the outer one). The workers' side: a worker whose setup asks
(`"phases": true`) adds to each answer the CPU it spent (serve.py, `worker_cpu`), which the
judge pops before reading the answer and books under the phase that asked for it. Each grading
appends one JSON line {"judge": {phase: s}, "workers": {phase: s}, "submissions": 1} to the
file; the batch adds its writing of results.

Without the variable nothing is recorded: `phase` costs a thread-local lookup; the workers'
counters (`worker_cpu`) are two clock reads per run of an integration step's module.
"""

import functools
import json
import os
import threading
import time

ENV = "MHA_LAB_PHASES"
WORKER_KEY = "phases_cpu"  # the key of a worker's answer that holds its CPU per phase

_local = threading.local()
_lock = threading.Lock()

# The worker's own counters, seconds of its CPU (time.process_time) since they were last sent:
# what harness/earlier.py spends probing the earlier steps and running the module written out.
worker_cpu = {"earlier-step probes": 0.0, "written-out runs": 0.0}


def wanted() -> bool:
    """Whether this process records phases (the variable names a file)."""
    return bool(os.environ.get(ENV))


class Record:
    """One submission's CPU per phase: the judge's (its grading thread) and its workers'."""

    def __init__(self):
        self.judge, self.workers = {}, {}
        self.current, self.asker = "staging", "observing"
        self.mark = time.thread_time()

    def switch(self, name: str) -> str:
        """Book the judge's CPU since the last switch to the current phase; enter `name`."""
        now = time.thread_time()
        self.judge[self.current] = self.judge.get(self.current, 0.0) + now - self.mark
        previous, self.current, self.mark = self.current, name, now
        return previous

    def add_workers(self, cpu) -> None:
        """A worker's answer's CPU ({phase: s}, untrusted numbers: only ever summed here):
        "observing" goes to the judge's phase that asked for the answer."""
        if not isinstance(cpu, dict):
            return
        for name, seconds in list(cpu.items())[:8]:
            if isinstance(name, str) and isinstance(seconds, float) and 0 <= seconds < 1e6:
                name = self.asker if name == "observing" else name[:40]
                self.workers[name] = self.workers.get(name, 0.0) + seconds


def begin() -> Record | None:
    """Start this thread's record of a submission (None where none is wanted)."""
    record = Record() if wanted() else None
    _local.record = record
    return record


def current() -> Record | None:
    return getattr(_local, "record", None)


def end(**extra) -> None:
    """Close this thread's record and append it to the file."""
    record = current()
    _local.record = None
    if record is not None:
        record.switch(record.current)
        write({"judge": record.judge, "workers": record.workers, "submissions": 1, **extra})


def write(line: dict) -> None:
    path = os.environ.get(ENV)
    if path:
        with _lock, open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps(line) + "\n")


class phase:
    """`with phase("scan"):` books this thread's CPU in the block to "scan" (nothing without a
    record). `asks`: the workers' answers received in the block are this phase's."""

    __slots__ = ("name", "asks", "record", "previous", "asker")

    def __init__(self, name: str, asks: bool = False):
        self.name, self.asks = name, asks

    def __enter__(self):
        record = self.record = getattr(_local, "record", None)
        if record is not None:
            self.previous = record.switch(self.name)
            if self.asks:
                self.asker, record.asker = record.asker, self.name

    def __exit__(self, *exc):
        record = self.record
        if record is not None:
            record.switch(self.previous)
            if self.asks:
                record.asker = self.asker


class worker_phase:
    """`with worker_phase("written-out runs"):` adds the worker's CPU in the block to its counter;
    `@worker_phase(name)` a function's."""

    __slots__ = ("name", "start")

    def __init__(self, name: str):
        self.name = name

    def __call__(self, function):
        @functools.wraps(function)
        def timed(*args, **kwargs):
            with worker_phase(self.name):
                return function(*args, **kwargs)

        return timed

    def __enter__(self):
        self.start = time.process_time()

    def __exit__(self, *exc):
        worker_cpu[self.name] += time.process_time() - self.start


def take_worker_cpu() -> dict:
    """The worker's counters since the last call (and zeroed)."""
    taken = dict(worker_cpu)
    for name in worker_cpu:
        worker_cpu[name] = 0.0
    return taken


class separately:
    """`with separately("writing results"):` this thread's CPU in the block, as a line of its own
    (work done for a submission outside its grading thread: the batch writing its files)."""

    __slots__ = ("name", "start")

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.start = time.thread_time() if wanted() else None

    def __exit__(self, *exc):
        if self.start is not None:
            write({"judge": {self.name: time.thread_time() - self.start}})
