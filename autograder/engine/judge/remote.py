"""The judge's executor for sandboxed workers: it sends checks to a worker and reads its reports.

    with RemoteExecutor(submission_dir, "mha", "mha", budget=120) as executor:  # a worker boots
        for observation in executor.observe([(check, inputs, timeout, forbidden), ...]):
            ...                                                               # one per task, as it comes

Student code runs only in the worker (autograder/harness/serve.py, preloaded by the worker
server of autograder/sandbox/). What comes back is untrusted: each message is size-checked
before it is read (a byte budget per check, from its inputs, and one per submission), decoded
without running code (sandbox/wire.py) and read against the judge's own facts
(engine/judge/observation.py). A submission also has a wall-clock budget: once it is spent, the worker
is killed and every check not yet observed fails, saying so.
"""

import signal
from pathlib import Path

from autograder.engine.checks.check import Fail
from autograder.engine.checks.text import printable
from autograder.engine.course import assignment as assignments
from autograder.engine.judge.budget import Budget
from autograder.engine.judge.observation import Facts, Hang, Observation, malformed, read_report
from autograder.engine.scan.source_reader import lookup_rule
from autograder.engine.scan.submission import submission_files
from autograder.harness import phases
from autograder.sandbox import wire
from autograder.sandbox.worker import GRACE, Worker, WorkerGone, encoded

PRELOAD = "autograder.harness.serve"  # the module the worker server imports
OBSERVATION_BASE = 256 * 1024  # bytes every check's report may take, plus ...
OBSERVATION_FACTOR = 16  # ... this many times the bytes of its inputs
SUBMISSION_BYTES = 16 * 1024 * 1024  # bytes of reports one submission may send in all (the reference: 0.17 MiB)


def observer_id(check) -> str:
    """'<step module>.<function>': how a worker finds a check's observer (harness.serve.observers)."""
    observer = type(check).observer
    return f"{observer.__module__.rsplit('.', 1)[-1]}.{observer.__name__}"


def budget_spent(seconds) -> Fail:
    return Fail("budget_spent", {"seconds": seconds})


class RemoteExecutor:
    """Runs a submission's checks in sandboxed workers (one at a time, a fresh one after a crash
    or a time-out), within the submission's time and byte budgets."""

    def __init__(
        self,
        submission,
        assignment: str,
        package: str,
        memory_bytes: int = 2 << 30,
        budget: float = None,
        gpu: bool = False,
    ):
        has_package = (Path(submission) / package).is_dir()
        files = submission_files(submission, package) if has_package else {}
        self.package = package
        self.files = frozenset(files)
        self.hangs = {}  # (file, function) -> Hang: sent as traps to every later worker
        self.hung_steps = {}  # step -> Hang, where the place is unknown: the rest of that step is not run
        self.worker = Worker(
            files,
            package,
            PRELOAD,
            memory_bytes,
            setup={
                "assignment": assignment,
                "traps": [],
                "lookups": lookup_rule(),
                **({"phases": True} if phases.wanted() else {}),  # its CPU with each answer (phases.py)
            },
            gpu=gpu,
        )
        self.budget = budget if isinstance(budget, Budget) else Budget(budget)  # seconds, or one already begun
        self.visible_output = None  # what the public phase printed, once hide() ended it
        self.hidden_from = None  # the first worker of the hidden phase (Worker.outputs' index)

    def __enter__(self):
        self.worker.__enter__()
        return self

    def __exit__(self, *exc):
        self.worker.__exit__(*exc)

    @property
    def layers(self) -> list:
        return self.worker.layers

    def has_gpu(self) -> bool:
        """Whether the worker could initialise CUDA (it says so among its layers once ready)."""
        if self.worker.booting:
            self.worker.wait_ready()
        return "cuda" in self.worker.layers

    def output(self) -> str:
        """What the student's code printed before any hidden input reached it (all of it where
        no hidden check ran), cut, with its control characters escaped."""
        if self.visible_output is not None:
            return self.visible_output
        return printable(self.worker.output())

    def hidden_output(self) -> str:
        """What the student's code printed once hidden inputs reached it (the hidden phase's
        workers), cut and escaped: "" where no hidden check ran."""
        if self.hidden_from is None:
            return ""
        return printable(self.worker.output(self.hidden_from))

    def hide(self) -> None:
        """End the public phase: what it printed is kept as it is now, and its worker is
        stopped, so that the hidden checks run in a fresh worker (from the same files) that
        knows nothing the public phase's code kept (module globals, caches) and whose doings
        nothing visible is made from. The hangs found so far go with it as traps."""
        self.visible_output = self.output()
        self.worker.stop()
        self.hidden_from = len(self.worker.outputs)

    def facts(self, check, timeout, forbidden) -> Facts:
        contract = assignments.contract_failures(getattr(check, "assignment", None))
        return Facts(self.package, self.files, check.step, timeout, tuple(forbidden), self.hangs, contract)

    def observe(self, tasks):
        """Run (check, inputs, timeout, forbidden) tasks in order: an iterator of one Observation
        per task, each yielded as soon as the worker sends it (consume it to the end before
        calling observe again)."""
        done = 0
        while done < len(tasks):
            rest = range(done, len(tasks))
            sent = [i for i in rest if self._unsent(tasks[i]) is None]
            if sent and self._time_left() > 0:
                with phases.phase("wire"):
                    message = wire.dumps(
                        [
                            {
                                "observer": observer_id(c),
                                "inputs": encoded(i),
                                "arguments": dict(c.arguments),
                                "timeout": t,
                                "forbidden": list(f),
                            }
                            for c, i, t, f in (tasks[j] for j in sent)
                        ]
                    )
                self.worker.send(message)
            for index in rest:
                check, inputs, timeout, forbidden = tasks[index]
                done += 1
                skipped = self._unsent(tasks[index])
                if skipped is not None:
                    yield skipped
                    continue
                with phases.phase("wire"):  # waiting costs no CPU: what this books is reading
                    observation = self._receive(check, inputs, timeout, forbidden)
                self._note_hang(check, timeout, observation)
                yield observation
                if not self.worker.alive:  # it died or was killed: a fresh one for the rest
                    break

    def _unsent(self, task):
        """The Observation that stands for a task not sent to a worker (its step hung somewhere
        unknown, or the budget is spent), or None."""
        check = task[0]
        if self._time_left() <= 0:
            return Observation(error=budget_spent(self.budget.seconds))
        hang = self.hung_steps.get(check.step)
        if hang is not None:
            return Observation(
                error=Fail("skipped_after_hang", {"seconds": hang.seconds, "where": hang.where, "check": hang.check})
            )
        return None

    @property
    def bytes_left(self) -> int:
        return SUBMISSION_BYTES - self.worker.received

    def _time_left(self) -> float:
        return self.budget.left()

    def _note_hang(self, check, timeout, observation):
        """A time-out in the student's code: trapped in every later worker (its own alarm
        stopped it: it trapped it itself). One the judge had to stop by killing the worker
        happened somewhere unknown: the rest of that step is not run."""
        error = observation.error
        if error is None or error.message_id != "timeout":
            return
        hang = Hang(check.id or check.diagnosis, check.step, timeout, error.params["where"])
        if observation.hung is not None:
            self.hangs.setdefault(observation.hung, hang)
            self.worker.setup["traps"] = [list(key) for key in self.hangs]
        elif observation.overran:
            self.hung_steps.setdefault(check.step, hang)

    def _receive(self, check, inputs, timeout, forbidden):
        """The next report, read as an Observation; or, if the worker overran, died or sent too
        much, the Fail that says so (the worker is then gone)."""
        left = self._time_left()
        limit = min(OBSERVATION_BASE + OBSERVATION_FACTOR * encoded(inputs).size, self.bytes_left)
        if limit <= 0:
            return Observation(error=Fail("submission_bytes_spent", {"limit_mib": SUBMISSION_BYTES >> 20}))
        facts = self.facts(check, timeout, forbidden)
        try:
            message = self.worker.receive(min(timeout, max(left - GRACE, 0)), limit)
        except TimeoutError:
            if self._time_left() <= 0:
                return Observation(error=budget_spent(self.budget.seconds))
            return Observation(error=Fail("timeout", {"seconds": timeout, "where": f"step {check.step}"}), overran=True)
        except WorkerGone as gone:
            if gone.exitcode is not None and gone.exitcode < 0:
                number = -gone.exitcode
                name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number)
                return Observation(error=Fail("worker_crashed", {"signal": name, "step": check.step}))
            return Observation(error=Fail("worker_exited", {"code": gone.exitcode, "step": check.step}))
        except wire.TooLarge as error:
            if error.limit >= self.bytes_left:  # the submission's own budget, not the check's
                return Observation(error=Fail("submission_bytes_spent", {"limit_mib": SUBMISSION_BYTES >> 20}))
            return Observation(
                error=Fail("report_too_large", {"size_kib": error.size >> 10, "limit_kib": error.limit >> 10})
            )
        except wire.WireError as error:
            return Observation(error=malformed(check.step, str(error)))
        record = phases.current()
        if record is not None and isinstance(message, dict):
            record.add_workers(message.pop(phases.WORKER_KEY, None))
        return read_report(message, facts)
