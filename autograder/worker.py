"""Run student code in sandboxed worker processes; the judge never imports it.

Judge side, one submission at a time per Worker:

    with Worker(submission_dir, memory_bytes) as worker:   # the worker starts booting here
        for observation in worker.observe([(check, inputs, timeout, forbidden), ...]):
            ...                                              # each one as soon as it arrives

Workers come from the worker server (autograder/fork_server.py), which imports this module once
(torch with one thread, every checks module, the fake CUDA device warmed up), so each worker is a
cheap fork of a process that has never seen the reference or the known mistakes. A worker holds a
socket to the judge and an output file the judge made, nothing else; it sets up its private
scratch and confines itself (autograder/sandbox.py) before the judge sends it the submission's
files. One is forked ahead of need for each Worker open (a spare), so the next submission does
not wait for a fork; no worker ever gets a second submission. A worker sends back nothing but
plain data (autograder/wire.py). The judge enforces
each check's time limit by killing the worker, and a worker that dies (a crash, os._exit, a kill
for time or memory) costs only the check it was running: a fresh worker takes the next one.
"""
import math
import os
import socket
import select
import signal
import struct
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

import torch

torch.set_num_threads(1)  # before any parallel op: forked children of a multi-threaded parent can hang

from . import messages, wire  # noqa: E402
from .check import Fail  # noqa: E402
from .checks import step_modules  # noqa: E402
from .fork_server import WorkerServer  # noqa: E402
from .runner import Observation, observe  # noqa: E402
from .sandbox import close_other_fds, confine, private_scratch  # noqa: E402 - loaded in the server
from .submission import SOURCE_LIMIT, Package, refusal  # noqa: E402

GRACE = 1.0  # seconds the judge waits past a check's limit before killing (the worker's own alarm comes first)
OUTPUT_LIMIT = 8 * 1024 * 1024  # bytes a worker may write (its printing included)
SHOWN_OUTPUT = 4000  # characters of a student's printing kept in the result
SCRATCH_BYTES = 64 << 20  # bytes: the size of a worker's private scratch file system
THREADS = 16  # tasks (threads) a worker may run at once: torch with one thread needs a few
CLEAN_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# ---------------------------------------------------------------------------- in the worker


def _exercise(x, mask, ids, table, linear):
    """Run the ops attention code typically uses, so that their first-call costs are paid once
    in the fork server (this is op coverage, not a solution)."""
    q = linear(x).view(2, 4, 2, 4).transpose(1, 2)  # (B, H, L, d_k)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, q) / 2.0 + q @ q.transpose(-2, -1)
    scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min).softmax(dim=-1)
    out = torch.nn.functional.dropout(scores, 0.1, training=True) @ q
    out = out.transpose(1, 2).contiguous().view(2, 4, 8).reshape(2, 4, 8)
    parts = torch.cat(out.split(4, dim=-1), dim=-1).chunk(2, dim=-1)
    torch.stack(parts, dim=1).sum()
    torch.nn.functional.embedding(ids, table, padding_idx=0)
    torch.ones(4, 4, dtype=torch.bool, device=x.device).triu(1) | torch.zeros(4, 4, dtype=torch.bool, device=x.device).tril()
    (ids == 0)[:, None, None, :]
    torch.where(mask, torch.full_like(scores, -1e9), scores).amax(-1, keepdim=True).exp()


def warm_up():
    """Done once in the fork server (autograder/worker_preload.py), so every worker starts warm."""
    from .fake_cuda import Simulation, simulated_device

    linear = torch.nn.Linear(8, 8).double()
    args = (torch.randn(2, 4, 8, dtype=torch.float64), torch.ones(4, 4, dtype=torch.bool).triu(1),
            torch.tensor([[1, 2, 0, 0]]), torch.randn(5, 3, dtype=torch.float64))
    _exercise(*args, linear)
    linear(args[0]).sum().backward()
    try:
        simulated_device()
        simulation = Simulation.shared()
        fake_linear = simulation.module(torch.nn.Linear(8, 8).double())
        fake_args = [simulation.tensor(a) for a in args]
        with simulation:
            _exercise(*fake_args, fake_linear)
        _warm_fake_shapes(simulation)
    except Exception:  # noqa: BLE001 - the simulated device is optional; the checks report it
        pass


def _warm_fake_shapes(simulation):
    """Fake-tensor dispatch results are cached per op and argument shapes, for the whole process
    (and so for its forks): run common ops once on the shapes the cuda checks use."""
    query = simulation.tensor(torch.randn(2, 5, 12, dtype=torch.float64))
    pad = simulation.tensor(torch.tensor([[False] * 5, [False, False, False, True, True]]))
    layer = simulation.module(torch.nn.Linear(12, 12).double())
    heads = simulation.tensor(torch.randn(2, 3, 5, 4, dtype=torch.float64))
    q4 = simulation.tensor(torch.randn(2, 3, 4, 8, dtype=torch.float64))
    v4 = simulation.tensor(torch.randn(2, 3, 4, 5, dtype=torch.float64))
    ids = simulation.tensor(torch.tensor([[3, 1, 4, 0], [5, 0, 0, 0]]))
    table = simulation.module(torch.nn.Embedding(11, 6, padding_idx=0).double())
    with simulation:
        for x, lq in ((query, 5),):
            h = layer(x).view(2, lq, 3, 4).transpose(1, 2)  # (B, H, L, d_k)
            blocked = torch.zeros(lq, lq, dtype=torch.bool, device=x.device)
            blocked = torch.ones_like(blocked).triu(diagonal=1) | pad[:, None, None, :]
            scores = (h @ h.transpose(-2, -1) / 2.0).masked_fill(blocked, -1e9)
            weights = torch.nn.functional.dropout(torch.softmax(scores, dim=-1), 0.1, training=True)
            layer((weights @ h).transpose(1, 2).contiguous().view(2, lq, 12))
        layer(heads.transpose(1, 2).contiguous().view(2, 5, 12))
        mask = (ids == 0)[:, None, None, :] | torch.ones(4, 4, dtype=torch.bool, device=ids.device).triu(1)
        scores = (q4 @ q4.transpose(-2, -1) / 2.0).masked_fill(mask, -1e9).softmax(-1) @ v4
        table(simulation.tensor(torch.tensor([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 1, 2]])))
        # Scalar arguments are part of the cache key: the usual fill values and 1/sqrt(d_k) scales.
        causal = torch.ones(4, 4, dtype=torch.bool, device=simulation.device).triu(1)  # device as a student passes it
        for scores, masks, d_k in ((h @ h.transpose(-2, -1), (blocked,), 4), (q4 @ q4.transpose(-2, -1), (mask, causal), 8)):
            for fill in (float("-inf"), -1e9, torch.finfo(torch.float64).min):
                for blocked_keys in masks:
                    scores.masked_fill(blocked_keys, fill)
            scores / math.sqrt(d_k), scores * (1 / math.sqrt(d_k)), scores * d_k ** -0.5


step_modules()


def _checks_by_key():
    table = {}
    for step_id, module in step_modules().items():
        for check in [*module.CHECKS, *module.PROBES]:
            table[(step_id, check.id or check.diagnosis)] = check
    return table


def worker_main(channel_fd, output_fd, server_layers, fallback_scratch):
    """Entry point of a worker process, forked by the worker server (fork_server.py) with two
    descriptors from the judge: its channel and its output file. Sets up a private scratch, waits
    for its submission (a worker may be forked before it is needed), confines itself, then runs
    the checks the judge sends."""
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.lseek(1, 0, os.SEEK_END)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    close_other_fds([channel_fd])
    conn = Connection(channel_fd)
    # The directory the server made for this worker becomes a private tmpfs where the kernel
    # allows it (seen by this process alone); else it stays a plain directory, kept apart by Landlock.
    scratch = fallback_scratch
    private = private_scratch(scratch, SCRATCH_BYTES)
    try:
        setup = wire.loads(conn.recv_bytes())
    except EOFError:
        return
    os.chdir(scratch)
    os.mkdir("mha", 0o700)
    for name, data in setup["files"].items():
        fd = os.open(os.path.join("mha", name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    os.environ.clear()
    os.environ.update(CLEAN_ENV, HOME=scratch)
    checks = _checks_by_key()
    layers = [*server_layers, *(["private-scratch"] if private else []),
              *confine(scratch, setup["memory_bytes"], OUTPUT_LIMIT, THREADS, setup.get("cpu"))]
    conn.send_bytes(wire.dumps({"ready": layers}))
    mha = Package.load(scratch)
    while True:
        try:
            tasks = wire.loads(conn.recv_bytes())
        except EOFError:
            return
        for step_id, check_id, inputs, timeout, forbidden in tasks:
            observation = observe(checks[(step_id, check_id)], mha, inputs, timeout, tuple(forbidden), private=True)
            sys.stdout.flush()
            sys.stderr.flush()
            error = None if observation.error is None else {
                "message_id": observation.error.message_id, "params": observation.error.params}
            conn.send_bytes(wire.dumps({"values": observation.values, "error": error,
                                        "forbidden": list(observation.forbidden)}))


# ---------------------------------------------------------------------------- in the judge

_encoded = {}  # id(inputs) -> (inputs, their wire form); holding inputs keeps the id theirs


def encoded(inputs):
    """wire.encode(inputs), once per inputs object (a batch sends the same inputs to every worker)."""
    entry = _encoded.get(id(inputs))
    if entry is None or entry[0] is not inputs:
        if len(_encoded) > 5_000:
            _encoded.clear()
        entry = _encoded[id(inputs)] = (inputs, wire.encode(inputs))
    return entry[1]


_spares = []  # [(process, connection, output fd)]: workers forked ahead of need, not yet given a submission
_spares_forking = [0]  # spares being forked in the background
_open_workers = [0]  # Workers open now (how many spares a batch can use at once)
_spares_lock = threading.Lock()
_cpu_load = {}  # cpu -> open Workers pinned to it


def fork_worker():
    """A fresh worker process from the worker server, waiting for its setup message: (its
    handle, the judge's end of its channel, the output file it writes to)."""
    judge_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    output = os.memfd_create("mha-lab-output", os.MFD_CLOEXEC)
    try:
        process = WorkerServer.shared().fork(worker_end.fileno(), output)
    except BaseException:
        judge_end.close()
        os.close(output)
        raise
    finally:
        worker_end.close()
    return process, Connection(judge_end.detach()), output


def take_worker():
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
            threading.Thread(target=_fork_spare, daemon=True).start()
    return taken or fork_worker()


def _fork_spare():
    try:
        spare = fork_worker()
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


def submission_files(submission):
    """{file name: bytes} of the regular .py files in submission/mha (no links, nothing huge),
    read through descriptors that refuse to follow a link."""
    files = {}
    try:
        directory = os.open(Path(submission) / "mha", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return files
    try:
        for name in sorted(os.listdir(directory)):
            if not name.endswith(".py") or "/" in name:
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as f:
                if refusal(os.fstat(f.fileno())) is None:  # what refused_files reports, staging skips
                    files[name] = f.read(SOURCE_LIMIT + 1)[:SOURCE_LIMIT]
    finally:
        os.close(directory)
    return files


def read_message(conn, seconds):
    """The next message a worker sends on `conn`, whole within `seconds`, or TimeoutError.

    multiprocessing's recv_bytes waits for ever once a message has begun, and a worker that
    student code has taken over could begin one and stop; this reads the same framing (a 4-byte
    big-endian length, then the bytes) with a deadline."""
    deadline = time.monotonic() + seconds
    size, = struct.unpack("!i", _read_exactly(conn.fileno(), 4, deadline))
    if not 0 <= size <= wire.MAX_MESSAGE:
        raise wire.WireError("message too large")
    return _read_exactly(conn.fileno(), size, deadline)


def _read_exactly(fd, count, deadline):
    chunks = []
    while count:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise TimeoutError
        chunk = os.read(fd, min(count, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def reported_failure(error):
    """The Fail a worker reports, if the grader can word it (student code that has taken over
    its worker can send anything; what cannot be worded is a malformed message)."""
    fail = Fail(str(error["message_id"]), dict(error["params"]))
    try:
        messages.render(fail.message_id, **fail.params)
    except Exception:  # noqa: BLE001 - an unknown id, missing or mistyped parameters
        raise wire.WireError(f"a failure report the grader cannot word ({fail.message_id[:40]!r})") from None
    return fail


class Worker:
    """The judge's handle on the sandboxed worker process(es) of one submission."""

    def __init__(self, submission, memory_bytes=2 << 30):
        self.submission = Path(submission)
        self.memory_bytes = memory_bytes
        self.files = None
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
        if (self.submission / "mha").is_dir():
            self.launch()  # it boots while the judge scans the files and makes the inputs
        return self

    def __exit__(self, *exc):
        self.close()

    def launch(self):
        """Start a fresh worker on a fresh copy of the submission; wait_ready() before use."""
        self.stop()
        if self.files is None:
            self.files = submission_files(self.submission)
        setup = wire.dumps({"files": self.files, "memory_bytes": self.memory_bytes, "cpu": self.cpu})
        for attempt in range(3):  # a spare that died while it waited: take the next one
            self.process, self.conn, output = take_worker()
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
        for attempt in range(3):
            if not self.booting:
                return
            if not self.conn.poll(120):
                break
            try:
                self.layers = wire.loads(read_message(self.conn, 10))["ready"]
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

    def output(self):
        """What the student's code printed (cut to SHOWN_OUTPUT characters), read from the
        files the judge made: never from a path the worker could have made."""
        data = b"".join(os.pread(fd, 4 * SHOWN_OUTPUT + 4, 0) for fd in self.outputs)
        text = data.decode("utf-8", errors="replace")
        return text[:SHOWN_OUTPUT] + ("\n[... output cut ...]" if len(text) > SHOWN_OUTPUT else "")

    def observe(self, tasks):
        """Run (check, inputs, timeout, forbidden) tasks in order: an iterator of one Observation
        per task, each yielded as soon as the worker sends it (consume it to the end before
        calling observe again)."""
        done = 0
        while done < len(tasks):
            if self.process is None or not self.process.is_alive():
                self.launch()
            self.wait_ready()
            pending = tasks[done:]
            self.conn.send_bytes(wire.dumps_encoded(
                [(c.step, c.id or c.diagnosis, encoded(i), t, list(f)) for c, i, t, f in pending]))
            for check, _, timeout, _ in pending:
                observation = self._receive(check, timeout)
                done += 1
                yield observation
                if self.process is None:  # it died or was killed: restart for the rest
                    break

    def _receive(self, check, timeout):
        """The next observation; or, if the worker overran or died, the Fail that says so."""
        try:
            message = wire.loads(read_message(self.conn, timeout + GRACE))
            error = message["error"]
            return Observation(values=message["values"], forbidden=tuple(message["forbidden"]),
                               error=None if error is None else reported_failure(error))
        except TimeoutError:
            # Overran: its own alarm did not stop it (a long native call, say), or a message
            # stalled half-way (student code that took over the worker's pipe).
            self.stop()
            return Observation(error=Fail("timeout", {"seconds": timeout, "where": f"step {check.step}"}))
        except (EOFError, OSError):
            self.process.join(5)  # it is dying: wait for its exit status
        except (wire.WireError, KeyError, TypeError, ValueError) as error:
            self.stop()
            return Observation(error=Fail("bad_worker_message", {"step": check.step, "detail": str(error)}))
        self.stop()
        if self.exitcode is not None and self.exitcode < 0:
            number = -self.exitcode
            name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number)
            return Observation(error=Fail("worker_crashed", {"signal": name, "step": check.step}))
        return Observation(error=Fail("worker_exited", {"code": self.exitcode, "step": check.step}))
