"""What the worker server preloads (`PRELOAD`), and the loop a confined worker runs.

    warm_up()                       in the worker server, once: torch, the observers, the watch
    serve(conn, scratch, setup)     in each forked worker: load the package, answer tasks

The judge sends a worker tasks, each naming an observer (`"<step module>.<function>"` of an
assignment's observers/ package), its inputs, fixed arguments, time limit and forbidden calls; the
worker answers each with the report of harness/observe.py, encoded by sandbox/wire.py. The
server never loads the judge (checks, oracles, hidden checks, known mistakes, the reference).

Before the student's package loads, the loop binds everything it needs and takes the grader's
modules out of `sys.modules`: student code finds nothing of the grader by name.
"""

import gc
import importlib
import pkgutil
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)  # before any parallel op: forked children of a multi-threaded parent can hang

from autograder.harness import answers, earlier, fake_cuda, phases  # noqa: E402
from autograder.harness.lookups import LookupRule  # noqa: E402
from autograder.harness.observe import observe, trap  # noqa: E402
from autograder.harness.package import Package  # noqa: E402
from autograder.harness.watch import install  # noqa: E402
from autograder.sandbox import wire  # noqa: E402

PRELOAD = __name__  # the module the worker server imports: this one
ASSIGNMENTS = Path(__file__).resolve().parents[1] / "assignments"
PACKAGE = "autograder.assignments"


def assignment_ids() -> list:
    """The assignments whose observers this kit holds (folders with an observers/ package)."""
    return sorted(p.parent.parent.name for p in ASSIGNMENTS.glob("*/observers/__init__.py"))


def observers() -> dict:
    """{(assignment id, "<module>.<function>"): function} for every public function defined in
    the assignments' observers/ modules."""
    table = {}
    for assignment_id in assignment_ids():
        package = importlib.import_module(f"{PACKAGE}.{assignment_id}.observers")
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, value in vars(module).items():
                if (
                    callable(value)
                    and getattr(value, "__module__", None) == module.__name__
                    and not name.startswith("_")
                ):
                    table[(assignment_id, f"{info.name}.{name}")] = value
    return table


_TABLE = {}  # filled by warm_up in the worker server; forks inherit it


def warm_up(real_gpu: bool = False) -> None:
    """Done once in the worker server, so every worker starts warm: the observers imported (and the
    earlier steps written out, in the instructor's kit), the watch's kernels installed, the simulated CUDA device set up (not where a real GPU will be
    used: nothing may touch CUDA before a fork) and each assignment's own warm-up run."""
    _TABLE.update(observers())
    for assignment_id in assignment_ids():  # read before any confinement: the earlier steps written
        earlier.versions(assignment_id)  # out (the instructor's kit), or the stored answers (a release)
        answers.load(assignment_id)
    install(every_thread=True)
    simulation = None
    if not real_gpu:
        try:
            fake_cuda.simulated_device()
            simulation = fake_cuda.Simulation.shared()
        except Exception:  # noqa: BLE001 - the simulated device is optional; the cuda checks report it
            simulation = None
    for assignment_id in assignment_ids():
        name = f"{PACKAGE}.{assignment_id}.warmup"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        try:
            module.warm_up(simulation, real_gpu=real_gpu)
        except Exception:  # noqa: BLE001 - a warm-up only saves time
            pass
    gc.collect()
    gc.freeze()


def forget_grader() -> None:
    """Take the grader's modules out of the registry student code sees. What the loop needs is
    bound already; the functions keep their own globals."""
    for name in [m for m in sys.modules if m == "autograder" or m.startswith("autograder.")]:
        del sys.modules[name]


def serve(conn, scratch, setup) -> None:
    """In a confined worker: load the package from scratch and answer the judge's tasks. Where
    the setup asks ("phases"), each answer says what CPU the worker spent since the last one, by
    phase (harness/phases.py); the first, what its fork, confinement and loading took."""
    receive, send, loads, dumps = conn.recv_bytes, conn.send_bytes, wire.loads, wire.dumps
    run, set_trap, table, flush = observe, trap, dict(_TABLE), (sys.stdout.flush, sys.stderr.flush)
    clock, taken, cpu_key, timed = time.process_time, phases.take_worker_cpu, phases.WORKER_KEY, setup.get("phases")
    booted = clock()  # a fork's CPU clock starts at 0: writing the files, confining itself
    rule = LookupRule.from_data(setup["lookups"]) if setup.get("lookups") else None
    student = Package.load(scratch, setup["package"], rule=rule)
    spent = {"fork and confinement": booted, "loading the package": clock() - booted}
    pending = [tuple(t) for t in setup.get("traps", ())]  # functions that hung in an earlier worker
    forget_grader()

    def with_traps(observer):
        def run_observer(package, **kwargs):
            while pending:  # inside the first task's time limit: setting a trap imports a file
                set_trap(package, *pending.pop())
            return observer(package, **kwargs)

        return run_observer

    while True:
        try:
            data = receive()
        except EOFError:
            return
        start = clock()
        tasks = loads(data)
        spent["wire"] = spent.get("wire", 0.0) + clock() - start
        for task in tasks:
            start = clock()
            observer = table.get((setup["assignment"], task["observer"]))
            if observer is None:
                report = {"kind": "unknown_observer", "forbidden": []}
            else:
                report = run(
                    with_traps(observer),
                    student,
                    task["inputs"],
                    task["timeout"],
                    tuple(task["forbidden"]),
                    task["arguments"],
                    private=True,
                )
                if report["kind"] == "timeout" and report["where"]:  # its own alarm stopped it: no second wait
                    set_trap(student, report["where"][0], report["where"][2])
            for flush_one in flush:
                flush_one()
            if timed:
                inner = taken()
                spent["observing"] = clock() - start - sum(inner.values())
                report[cpu_key] = {**spent, **inner}
                start = clock()
                data = dumps(report)
                spent = {"wire": clock() - start}  # sent with the next answer
            else:
                data = dumps(report)
            send(data)
