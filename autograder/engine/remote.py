"""Grading's side of the sandbox: what the worker server preloads and runs, and the judge's
executor that sends checks to a sandboxed worker and turns its answers into Observations.

    with RemoteExecutor(submission_dir, "mha") as executor:      # files read, worker booting
        for observation in executor.observe([(check, inputs, timeout, forbidden), ...]):
            ...                                                 # each one as soon as it arrives

autograder/sandbox/ runs the process; this module says what runs in it. The worker server
imports this module once (PRELOAD): torch with one thread, every assignment's checks, the fake
CUDA device warmed up, each assignment's own warm-up; never the reference or the known mistakes.
"""

import functools
import os
import signal
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)  # before any parallel op: forked children of a multi-threaded parent can hang

from autograder.engine import assignment as assignments  # noqa: E402
from autograder.engine import messages  # noqa: E402
from autograder.engine.check import Fail  # noqa: E402
from autograder.engine.runner import HangGuard, Observation, observe  # noqa: E402
from autograder.engine.submission import SOURCE_LIMIT, Package, refusal  # noqa: E402
from autograder.sandbox import wire  # noqa: E402
from autograder.sandbox.worker import Worker, WorkerGone, encoded  # noqa: E402

PRELOAD = __name__  # the module the worker server imports: this one


# ---------------------------------------------------------------------------- in the worker server


def warm_up() -> None:
    """Done once in the worker server, so every worker starts warm: every assignment's checks
    imported, the simulated CUDA device set up, and each assignment's own warm-up run (its
    usual ops, on the CPU and on the simulated device)."""
    import gc

    simulation = None
    try:
        from autograder.engine.fake_cuda import Simulation, simulated_device

        simulated_device()
        simulation = Simulation.shared()
    except Exception:  # noqa: BLE001 - the simulated device is optional; the checks report it
        pass
    checks_by_key()  # now: a confined worker cannot list the assignments' folders
    for assignment_id in assignments.known():
        try:
            assignments.warm_up(assignment_id, simulation)
        except Exception:  # noqa: BLE001 - a warm-up only saves time
            pass
    gc.collect()
    gc.freeze()


@functools.lru_cache(maxsize=None)
def checks_by_key() -> dict:
    """(assignment, step, check id) -> check, for every assignment the kit holds."""
    table = {}
    for assignment_id in assignments.known():
        for step_id, module in assignments.step_modules(assignment_id).items():
            for check in [*module.CHECKS, *module.PROBES]:
                table[(assignment_id, step_id, check.id or check.diagnosis)] = check
    return table


def serve(conn, scratch, setup) -> None:
    """In a confined worker: load the package from scratch and run the checks the judge sends,
    answering each with its observation (plain data)."""
    checks = checks_by_key()
    student = Package.load(scratch, setup["package"])
    while True:
        try:
            tasks = wire.loads(conn.recv_bytes())
        except EOFError:
            return
        for assignment_id, step_id, check_id, inputs, timeout, forbidden in tasks:
            observation = observe(
                checks[(assignment_id, step_id, check_id)], student, inputs, timeout, tuple(forbidden), private=True
            )
            sys.stdout.flush()
            sys.stderr.flush()
            error = (
                None
                if observation.error is None
                else {"message_id": observation.error.message_id, "params": observation.error.params}
            )
            conn.send_bytes(
                wire.dumps({"values": observation.values, "error": error, "forbidden": list(observation.forbidden)})
            )


# ---------------------------------------------------------------------------- in the judge


def submission_files(submission, package):
    """{file name: bytes} of the regular .py files in submission/<package> (no links, nothing
    huge), read through descriptors that refuse to follow a link."""
    files = {}
    try:
        directory = os.open(Path(submission) / package, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
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


def reported_failure(error):
    """The Fail a worker reports, if the grader can word it (student code that has taken over
    its worker can send anything; what cannot be worded is a malformed message)."""
    fail = Fail(str(error["message_id"]), dict(error["params"]))
    try:
        messages.render(fail.message_id, **fail.params)
    except Exception:  # noqa: BLE001 - an unknown id, missing or mistyped parameters
        raise wire.WireError(f"a failure report the grader cannot word ({fail.message_id[:40]!r})") from None
    return fail


class RemoteExecutor:
    """Runs a submission's checks in sandboxed workers (one at a time, a fresh one after a crash)."""

    def __init__(self, submission, package: str, memory_bytes: int = 2 << 30):
        has_package = (Path(submission) / package).is_dir()
        files = submission_files(submission, package) if has_package else {}
        self.worker = Worker(files, package, PRELOAD, memory_bytes)
        self.hangs = HangGuard(submission)

    def __enter__(self):
        self.worker.__enter__()
        return self

    def __exit__(self, *exc):
        self.worker.__exit__(*exc)

    @property
    def layers(self) -> list:
        return self.worker.layers

    def output(self) -> str:
        return self.worker.output()

    def observe(self, tasks):
        """Run (check, inputs, timeout, forbidden) tasks in order: an iterator of one Observation
        per task, each yielded as soon as the worker sends it (consume it to the end before
        calling observe again). Once a check has hung, its worker is killed and the rest of
        that step's checks (and probes) are not sent again (runner.HangGuard): one time limit
        per hung step."""
        done = 0
        while done < len(tasks):
            rest = range(done, len(tasks))
            sent = {i for i in rest if self.hangs.skipped(tasks[i][0]) is None}
            if sent:
                self.worker.send(
                    wire.dumps_encoded(
                        [
                            (c.assignment, c.step, c.id or c.diagnosis, encoded(i), t, list(f))
                            for c, i, t, f in (tasks[j] for j in sorted(sent))
                        ]
                    )
                )
            for index in rest:
                check, _, timeout, _ = tasks[index]
                done += 1
                if index not in sent:
                    yield self.hangs.skipped(check)
                    continue
                observation = self._receive(check, timeout)
                if self.hangs.note(check, observation) and self.worker.alive:
                    self.worker.stop()  # its own alarm stopped the code; the batch it holds has more of the step
                yield observation
                if not self.worker.alive:  # it died or was killed: a fresh one for the rest
                    break

    def _receive(self, check, timeout):
        """The next observation; or, if the worker overran or died, the Fail that says so."""
        try:
            message = self.worker.receive(timeout)
            error = message["error"]
            return Observation(
                values=message["values"],
                forbidden=tuple(message["forbidden"]),
                error=None if error is None else reported_failure(error),
            )
        except TimeoutError:
            return Observation(error=Fail("timeout", {"seconds": timeout, "where": f"step {check.step}"}))
        except WorkerGone as gone:
            if gone.exitcode is not None and gone.exitcode < 0:
                number = -gone.exitcode
                name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number)
                return Observation(error=Fail("worker_crashed", {"signal": name, "step": check.step}))
            return Observation(error=Fail("worker_exited", {"code": gone.exitcode, "step": check.step}))
        except (wire.WireError, KeyError, TypeError, ValueError) as error:
            self.worker.stop()
            return Observation(error=Fail("bad_worker_message", {"step": check.step, "detail": str(error)}))
