"""Speed and scale (issue 17): batch throughput and CPU per submission at 50/100/200/400
submissions, the memory of the judge and of the worker server as the batch grows, and the
student's loop against `python -c "import torch"`.

    python benchmarks/scale.py [--sizes 50,100,200,400] [--workers 2] [--runs 3] [--skip-loop]

Batches: grade_batch with every check (hidden ones, diagnosis, the simulated cuda step), each
submission in its own sandboxed worker, after a warm-up batch (the worker server started, the
caches of one seed warm): the steady state of a class-sized batch. Half the submissions carry a
planted mistake (benchmarks/batch_grading.py makes them). On a machine shared with other work,
wall time measures the neighbours as much as the grader: CPU time is printed beside it, the
judge's (this process) and the worker server's (its process tree, every worker included),
per submission; "CPU-bound rate" is what the cores would give at that CPU cost.

Student loop: fresh processes, interleaved, medians of --runs: `import torch`, `pytest
assignments/` on the complete solution (a student's check), and `python -m autograder grade`
of one submission (public and hidden checks, sandboxed: what a TA runs for one student).
Prints figures; asserts nothing.
"""

import argparse
import importlib.util
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))
sys.path.insert(0, str(KIT / "benchmarks"))


def batch_figures(paths, config, workers, out):
    """(wall s, judge CPU s, server CPU s) of one grade_batch over `paths`."""
    import _procstat
    from autograder.engine.operations.batch import grade_batch

    judge, server = time.process_time(), _procstat.server_cpu_seconds()
    start = time.perf_counter()
    grade_batch(
        paths,
        config,
        out,
        workers=workers,
        reference=KIT / "solutions",
        seed=7,
        force=True,
        log=open(os.devnull, "w"),  # noqa: SIM115 - closed with the process
    )
    wall = time.perf_counter() - start
    time.sleep(0.5)  # the last workers' exit reaches the server
    return wall, time.process_time() - judge, _procstat.server_cpu_seconds() - server


def batches(args):
    import _procstat
    from autograder.engine.course import config as grading_config
    from batch_grading import make_submissions

    config = grading_config.load()
    sizes = [int(n) for n in args.sizes.split(",")]
    print(
        f"{'submissions':>11s} {'wall s':>7s} {'subs/s':>7s} {'CPU ms/sub':>10s} {'judge':>6s} {'workers':>8s} "
        f"{'CPU-bound subs/s':>16s} {'judge RSS':>10s} {'server RSS':>10s}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_submissions(Path(tmp), max(sizes))
        batch_figures(paths[: args.warmup], config, args.workers, Path(tmp) / "warm")  # server up, caches warm
        for size in sizes:
            out = Path(tmp) / f"out{size}"
            wall, judge, server = batch_figures(paths[:size], config, args.workers, out)
            shutil.rmtree(out)
            cpu = (judge + server) / size
            rss = _procstat.rss_bytes(os.getpid()), _procstat.rss_bytes(_procstat.server_pid())
            print(
                f"{size:11d} {wall:7.1f} {size / wall:7.2f} {cpu * 1000:10.0f} {judge / size * 1000:6.0f} "
                f"{server / size * 1000:8.0f} {args.workers / cpu:16.2f} {rss[0] / 2**20:8.0f} MiB "
                f"{rss[1] / 2**20:8.0f} MiB"
            )
    print(
        "  CPU ms/sub = judge (this process) + workers (the worker server's tree: forks, confinement, checks); "
        "target <= 150 ms, i.e. >= 10 subs/s on 2 cores"
    )


# hypothesis is the kit's own test extra, not in a student's install; where it is installed, its
# pytest plugin imports it at the end of every run (about 0.3 s): left out, as a student has it.
HYPOTHESIS = ["-p", "no:hypothesispytest"] if importlib.util.find_spec("hypothesis") else []


def timed(command, cwd, env=None):
    """(wall s, CPU s of the command and its children) of one run; raises if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode not in (0, 1):  # grade exits 1 when a check fails; pytest too
        print(completed.stdout[-2000:], completed.stderr[-2000:])
        raise SystemExit(f"{' '.join(map(str, command))} failed ({completed.returncode})")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def student_loop(runs):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "assignments").mkdir()
        for name in ("conftest.py", "test_checks.py"):
            shutil.copy(KIT / "assignments" / name, root / "assignments" / name)
        shutil.copytree(KIT / "solutions" / "mha", root / "assignments" / "mha")
        shutil.copy(KIT / "grading.yml", root / "grading.yml")
        env = {**os.environ, "PYTHONPATH": str(KIT)}
        commands = {
            "python -c 'import torch'": ([sys.executable, "-c", "import torch"], root),
            "pytest assignments/ (complete solution)": (
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *HYPOTHESIS, "assignments"],
                root,
            ),
            "python -m autograder grade (1 submission)": (
                [sys.executable, "-m", "autograder", "grade", str(root / "assignments"), "--seed", "7"],
                KIT,
            ),
        }
        timed(commands["python -c 'import torch'"][0], root)  # warm the file cache
        times = {name: [] for name in commands}
        for _ in range(runs):
            for name, (command, cwd) in commands.items():
                times[name].append(timed(command, cwd, env))
    print(f"{'command':45s} {'wall s':>7s} {'CPU s':>7s}   (medians of {runs} runs, interleaved)")
    medians = {}
    for name, values in times.items():
        medians[name] = statistics.median(w for w, _ in values), statistics.median(c for _, c in values)
        print(f"{name:45s} {medians[name][0]:7.2f} {medians[name][1]:7.2f}")
    torch_wall, torch_cpu = medians["python -c 'import torch'"]
    for name, target in (
        ("pytest assignments/ (complete solution)", 0.5),
        ("python -m autograder grade (1 submission)", 1.5),
    ):
        wall, cpu = medians[name]
        print(
            f"  {name.split(' (')[0]:43s} import + {wall - torch_wall:5.2f} s wall, + {cpu - torch_cpu:5.2f} s CPU "
            f"(target: + {target} s)"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,100,200,400")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=20, help="submissions graded first, not counted")
    parser.add_argument("--runs", type=int, default=3, help="runs of each student-loop command")
    parser.add_argument("--skip-loop", action="store_true")
    parser.add_argument("--skip-batch", action="store_true")
    args = parser.parse_args()
    print(
        f"machine: {os.cpu_count()} cores (os.cpu_count), {len(os.sched_getaffinity(0))} usable; "
        f"load average {os.getloadavg()[0]:.1f} at start"
    )
    if not args.skip_batch:
        batches(args)
    if not args.skip_loop:
        student_loop(args.runs)


if __name__ == "__main__":
    main()
