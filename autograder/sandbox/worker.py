"""Run student code in sandboxed worker processes; the judge never imports it.

Judge side, one submission at a time per Worker:

    with Worker(files, "mha", preload="autograder.harness.serve") as worker:  # it starts booting here
        worker.send(wire.dumps(...))                        # a message for the preload's serve()
        reply = worker.receive(seconds)                     # its answer, or TimeoutError / WorkerGone

Workers come from the worker server (fork_server.py), which imports the `preload` module once
(for grading: torch with one thread, every checks module, the fake CUDA device warmed up), so
each worker is a cheap fork of a process that has never seen the reference or the known
mistakes. A worker holds a socket to the judge and an output file the judge made, nothing else;
in the fork (worker_process.py) it takes its own uid and sets up its private scratch, then receives the submission's files,
writes and seals them, and confines itself (confine.py) before any student code loads. Where a
real GPU is planned (Worker(gpu=...); by default wherever the machine has one), the judge gives
each worker one GPU, round-robin, and the worker initialises CUDA after the fork and before its
confinement. One is forked ahead of need for each Worker open (a spare), so the next
submission does not wait for a fork; no worker ever gets a second submission. A worker sends
back nothing but plain data (wire.py). The judge enforces a time limit on every answer by
killing the worker; a worker that dies costs only what it was doing: a fresh one takes the rest.

This module knows nothing of checks or grades: the preload module does (autograder/harness/serve.py).
"""

import os
import select
import socket
import struct
import threading
import time
from multiprocessing.connection import Connection

from autograder.sandbox import wire
from autograder.sandbox.confine import gpu_ordinals, machine_facts
from autograder.sandbox.fork_server import WorkerServer

GRACE = 1.0  # seconds the judge waits past a check's limit before killing (the worker's own alarm comes first)
SHOWN_OUTPUT = 4000  # characters of a student's printing kept in the result

_encoded = {}  # id(inputs) -> (inputs, their wire form); holding inputs keeps the id theirs


def encoded(inputs):
    """wire.Encoded(inputs), once per inputs object (a batch sends the same inputs to every worker)."""
    entry = _encoded.get(id(inputs))
    if entry is None or entry[0] is not inputs:
        if len(_encoded) > 5_000:
            _encoded.clear()
        entry = _encoded[id(inputs)] = (inputs, wire.Encoded(inputs))
    return entry[1]


_spares = []  # [(process, connection, output fd)]: workers forked ahead of need, not yet given a submission
_spares_forking = [0]  # spares being forked in the background
_open_workers = [0]  # Workers open now (how many spares a batch can use at once)
_spares_lock = threading.Lock()
_cpu_load = {}  # cpu -> open Workers pinned to it
_gpu_load = {}  # CUDA_VISIBLE_DEVICES entry -> open Workers given that GPU


def fork_worker(preload):
    """A fresh worker process from the worker server, waiting for its setup message: (its
    handle, the judge's end of its channel, the output file it writes to)."""
    judge_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    output = os.memfd_create("mha-lab-output", os.MFD_CLOEXEC)
    try:
        process = WorkerServer.shared(preload).fork(worker_end.fileno(), output)
    except BaseException:
        judge_end.close()
        os.close(output)
        raise
    finally:
        worker_end.close()
    return process, Connection(judge_end.detach()), output


def take_worker(preload):
    """A spare worker if one is waiting, else a freshly forked one; either way, a spare is forked
    in the background for the next submission, so its fork is off the judge's critical path.
    A spare has run nothing but the fork server's warm-up: no submission ever shares a worker."""
    with _spares_lock:
        taken = None
        while _spares and taken is None:
            process, conn, output = _spares.pop()
            if process.is_alive():
                taken = process, conn, output
            else:
                conn.close()
                os.close(output)
        wanted = _open_workers[0] - len(_spares) - _spares_forking[0]
        if wanted > 0:
            _spares_forking[0] += 1
            threading.Thread(target=_fork_spare, args=(preload,), daemon=True).start()
    return taken or fork_worker(preload)


def _fork_spare(preload):
    try:
        spare = fork_worker(preload)
    except Exception:  # noqa: BLE001 - shutting down, say: the next submission forks its own
        spare = None
    with _spares_lock:
        _spares_forking[0] -= 1
        if spare is not None:
            _spares.append(spare)


def _take_cpu():
    """The core with the fewest open Workers on it (this process's cores), or None."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    with _spares_lock:
        cpu = min(cpus, key=lambda c: _cpu_load.get(c, 0))
        _cpu_load[cpu] = _cpu_load.get(cpu, 0) + 1
    return cpu


def _release_cpu(cpu):
    if cpu is not None:
        with _spares_lock:
            _cpu_load[cpu] -= 1


def _take_gpu(gpus):
    """The GPU (a CUDA_VISIBLE_DEVICES entry) with the fewest open Workers on it, or None."""
    if not gpus:
        return None
    with _spares_lock:
        gpu = min(gpus, key=lambda g: _gpu_load.get(g, 0))
        _gpu_load[gpu] = _gpu_load.get(gpu, 0) + 1
    return gpu


def _release_gpu(gpu):
    if gpu is not None:
        with _spares_lock:
            _gpu_load[gpu] -= 1


def read_message(conn, seconds, limit=wire.MAX_MESSAGE):
    """The next message a worker sends on `conn`, whole within `seconds`, or TimeoutError; a
    message over `limit` bytes is refused (wire.WireError) before any of it is read.

    multiprocessing's recv_bytes waits for ever once a message has begun, and a worker that
    student code has taken over could begin one and stop; this reads the same framing (a 4-byte
    big-endian length, then the bytes) with a deadline."""
    deadline = time.monotonic() + seconds
    (size,) = struct.unpack("!i", bytes(_read_exactly(conn.fileno(), 4, deadline)))
    if size < 0:
        raise wire.WireError("a negative message size")
    if size > min(limit, wire.MAX_MESSAGE):
        raise wire.TooLarge(size, min(limit, wire.MAX_MESSAGE))
    return _read_exactly(conn.fileno(), size, deadline)


def _read_exactly(fd, count, deadline) -> bytearray:
    """`count` bytes read from `fd` straight into one buffer (wire.loads then makes its tensors
    in place: the bytes are copied nowhere on the way)."""
    data = bytearray(count)
    view, got = memoryview(data), 0
    while got < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise TimeoutError
        read = os.readv(fd, [view[got : got + (1 << 20)]])
        if not read:
            raise EOFError
        got += read
    return data


class WorkerGone(Exception):
    """The worker ended (or was killed) before it answered: `exitcode` says how (negative: a signal)."""

    def __init__(self, exitcode):
        super().__init__(exitcode)
        self.exitcode = exitcode


class Worker:
    """The judge's handle on the sandboxed worker process(es) of one submission.

    `files` ({name: bytes}) become the package `package/` in the worker's scratch; `preload`
    names the module the worker server imports once (its warm_up() and its serve(conn, scratch,
    setup), which answers the judge's messages). `setup` holds what else the preload's serve()
    reads from its setup message; it may change before a fresh worker is launched."""

    def __init__(
        self,
        files: dict,
        package: str,
        preload: str,
        memory_bytes: int = 2 << 30,
        setup: dict = None,
        gpu: bool | None = None,
    ):
        self.files, self.package, self.preload = files, package, preload
        self.memory_bytes = memory_bytes
        self.setup = dict(setup or {})
        self.received = 0  # bytes of messages read from this submission's workers
        self.gpu = gpu  # a real GPU for its checks; None: wherever the machine has one (machine_facts)
        self.gpu_device = None
        self.process = None
        self.conn = None
        self.outputs = []  # the output file of every worker this submission had, in order
        self.layers = []
        self.exitcode = None
        self.booting = False
        self.counted = False  # in _open_workers
        self.cpu = None

    def __enter__(self):
        if not self.counted:
            self.counted = True
            with _spares_lock:
                _open_workers[0] += 1
            self.cpu = _take_cpu()
            facts = machine_facts()
            if self.gpu or (self.gpu is None and facts.real_gpu):
                self.gpu_device = _take_gpu(gpu_ordinals(facts))
        if self.files:
            self.launch()  # it boots while the judge scans the files and makes the inputs
        return self

    def __exit__(self, *exc):
        self.close()

    def launch(self):
        """Start a fresh worker on a fresh copy of the submission; wait_ready() before use."""
        self.stop()
        setup = wire.dumps(
            {
                **self.setup,
                "files": self.files,
                "package": self.package,
                "memory_bytes": self.memory_bytes,
                "cpu": self.cpu,
                "gpu": self.gpu_device,
            }
        )
        for attempt in range(3):  # a spare that died while it waited: take the next one
            self.process, self.conn, output = take_worker(self.preload)
            self.outputs.append(output)
            try:
                self.conn.send_bytes(setup)
                break
            except OSError:
                self.conn.close()
                if attempt == 2:
                    raise RuntimeError("a grading worker did not start") from None
        self.booting = True

    def wait_ready(self):
        """Wait until the worker is confined and ready; one that dies before it has run any
        student code (killed from outside, say) is replaced."""
        for _attempt in range(3):
            if not self.booting:
                return
            if not self.conn.poll(120):
                break
            try:
                # Sent before any student code loads; still read as untrusted: short names only.
                ready = wire.loads(read_message(self.conn, 10, 4096), 4096)["ready"]
                self.layers = [str(layer)[:40] for layer in ready if isinstance(layer, str)][:20]
                self.booting = False
            except (EOFError, OSError, TimeoutError, wire.WireError, KeyError, TypeError):
                self.launch()
        if self.booting:
            raise RuntimeError("a grading worker did not start")

    def stop(self, wait=True):
        """Kill the worker if it still runs; with `wait`, wait for it and remember how it ended."""
        if self.process is not None:
            if self.process.is_alive():
                self.process.kill()
            if wait:
                self.process.join(5)
                self.exitcode = self.process.exitcode
            self.conn.close()
            self.process = None
            self.booting = False

    def close(self):
        # Not waiting: the exit status of a worker killed after its last task tells nothing.
        self.stop(wait=False)
        for output in self.outputs:
            os.close(output)
        self.outputs = []
        if self.counted:
            self.counted = False
            with _spares_lock:
                _open_workers[0] -= 1
            _release_cpu(self.cpu)
            _release_gpu(self.gpu_device)
            self.gpu_device = None

    def output(self, first: int = 0):
        """What the student's code printed (cut to SHOWN_OUTPUT characters), read from the
        files the judge made: never from a path the worker could have made. `first`: from the
        first-th worker of this submission on (len(self.outputs) before a launch: what the
        workers launched since then printed)."""
        data = b"".join(os.pread(fd, 4 * SHOWN_OUTPUT + 4, 0) for fd in self.outputs[first:])
        text = data.decode("utf-8", errors="replace")
        return text[:SHOWN_OUTPUT] + ("\n[... output cut ...]" if len(text) > SHOWN_OUTPUT else "")

    def send(self, message) -> None:
        """Send one message (wire.dumps'd bytes) to the worker, starting a fresh one first if the
        last has gone."""
        if self.process is None or not self.process.is_alive():
            self.launch()
        self.wait_ready()
        self.conn.send_bytes(message)

    def receive(self, seconds: float, limit: int = wire.MAX_MESSAGE):
        """The worker's next message (decoded), whole within `seconds` (+ GRACE) and at most
        `limit` bytes. On overrun, the worker is killed and TimeoutError raised; if it ended,
        WorkerGone; if what it sent is malformed or too large, it is killed and wire.WireError
        raised."""
        try:
            data = read_message(self.conn, seconds + GRACE, limit)
            self.received += len(data)
            return wire.loads(data, limit)
        except TimeoutError:
            # Overran: its own alarm did not stop it (a long native call, say), or a message
            # stalled half-way (student code that took over the worker's pipe).
            self.stop()
            raise
        except (EOFError, OSError):
            self.process.join(5)  # it is dying: wait for its exit status
        except wire.WireError:
            self.stop()
            raise
        self.stop()
        raise WorkerGone(self.exitcode)

    @property
    def alive(self) -> bool:
        return self.process is not None
