"""Batch grading speed: our sandboxed grader vs executing one notebook per submission.

    python benchmarks/batch_grading.py [--submissions 20] [--workers N]

Makes N submissions (the reference and planted mistakes across all steps, mixed; every file
distinct, as a class's are), then prints in one run: `import torch` time; per-submission grading
time (median, p95) and throughput in-process and sandboxed with 1 worker (timed alternately,
submission by submission, so that a noisy machine slows both alike), and sandboxed at N workers
(all checks: public, hidden, simulated cuda, diagnosis) with the CPU it used; the same batch as
a TA runs it (`python -m autograder grade`, start-up and cold caches included); the isolation
overhead; and, on the same machine, `nbgrader autograde` time per notebook on the kit's own
course (autograder/publish/nbgrader_course.py) filled with the same submissions (needs the instructor extra:
nbgrader; skipped without it). The rows before the CLI row run with warm caches, as the bulk of
a class-sized batch does (one seed: shared inputs, expectations and known-mistake runs).
Prints figures; asserts nothing.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))
# The grader is imported inside the functions, not here: multiprocessing re-runs a script's
# top level in every worker it starts (the "safe importing of main module" rule), and the real
# entry point, `python -m autograder`, is exempt from that. Heavy imports here would bill each
# worker for them and make the figures worse than a TA's run.


def make_submissions(root, count):
    sys.path.insert(0, str(KIT / "tests"))
    from planted import PLANTED

    mistakes = [m for m in PLANTED if not m.needs_check]
    paths = []
    for i in range(count):
        path = root / f"student{i:03d}"
        shutil.copytree(KIT / "solutions" / "mha", path / "mha")
        if i % 2:  # every other one carries a planted mistake, taken across all steps
            mistake = mistakes[(i // 2 * 7) % len(mistakes)]
            target = path / "mha" / mistake.file
            target.write_text(mistake.apply(target.read_text()))
        for file in (path / "mha").glob("*.py"):  # no two students' files are the same text
            file.write_text(file.read_text() + f"# {path.name}\n")
        paths.append(path)
    return paths


def busy_cpu_seconds():
    """CPU time the whole machine has spent busy (Linux /proc/stat; NaN elsewhere)."""
    try:
        with open("/proc/stat") as f:
            user, nice, system, idle, iowait, irq, softirq = map(int, f.readline().split()[1:8])
    except (OSError, ValueError):
        return float("nan")
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def summary(times):
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered), p95


def timed_grades(paths, config, rounds):
    """Seconds per submission in-process and sandboxed, taken alternately (submission by
    submission, `rounds` times over), so that a noisy machine slows both alike."""
    from autograder.engine.judge.runner import grade

    times = {False: [], True: []}
    for _ in range(rounds):
        for path in paths:
            for isolate in (False, True):
                start = time.perf_counter()
                grade(path, config, reference=KIT / "solutions", seed=7, isolate=isolate)
                times[isolate].append(time.perf_counter() - start)
    return times[False], times[True]


def cli_batch_seconds(paths, out, workers, cuda_mode):
    """Wall time of the whole `python -m autograder grade ... --out` command: start-up (torch,
    the fork server) and cold caches included, as a TA runs it."""
    config = None
    if cuda_mode:
        config = out.parent / "grading-cli.yml"
        text = (KIT / "grading.yml").read_text()
        config.write_text(text.replace("mode: auto", f"mode: {cuda_mode}"))
    command = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        *map(str, paths),
        "--out",
        str(out),
        "--workers",
        str(workers),
        "--seed",
        "7",
        *(["--config", str(config)] if config else []),
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd=KIT)
    return time.perf_counter() - start


def nbgrader_times(paths, count, config):
    """Seconds per notebook of `nbgrader autograde` on the kit's course notebook filled with the
    first `count` submissions (wall time of the whole command / count), or None without nbgrader."""
    import importlib.util

    if importlib.util.find_spec("nbgrader") is None:
        return None
    import nbformat

    from autograder.publish.nbgrader_course import fill_notebook, write_course

    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        write_course(course, config)
        env = {
            **os.environ,
            "PYTHONPATH": str(KIT),
            "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
        }
        command = [sys.executable, "-m", "nbgrader"]
        subprocess.run(
            [*command, "generate_assignment", "mha", "--create"], cwd=course, env=env, check=True, capture_output=True
        )
        released = nbformat.read(str(course / "release" / "mha" / "mha.ipynb"), as_version=4)
        for path in paths[:count]:
            files = {p.name: p.read_text() for p in (path / "mha").glob("*.py")}
            target = course / "submitted" / path.name / "mha"
            target.mkdir(parents=True)
            nbformat.write(fill_notebook(released, files, "mha"), str(target / "mha.ipynb"))
        start = time.perf_counter()
        subprocess.run([*command, "autograde", "mha", "--create"], cwd=course, env=env, check=True, capture_output=True)
        return (time.perf_counter() - start) / count


def main():
    from autograder.engine.course import config as grading_config
    from autograder.engine.judge.runner import grade
    from autograder.engine.operations.batch import grade_batch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=20)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=2, help="passes over the submissions, one at a time")
    parser.add_argument("--notebooks", type=int, default=4, help="notebooks nbgrader autogrades for the comparison")
    parser.add_argument(
        "--cuda-mode",
        default=None,
        choices=["auto", "simulated", "off"],
        help="override the cuda step's mode (off: leave the simulated device out)",
    )
    args = parser.parse_args()
    config = grading_config.load()
    if args.cuda_mode:
        config.step("cuda").options["mode"] = args.cuda_mode
    rows = []
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    torch_time = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_submissions(Path(tmp), args.submissions)
        # A class-sized batch runs with warm caches (one seed: the inputs, the reference's
        # expectations and the known mistakes' runs are shared by every submission): warm them,
        # and start the fork server, before timing. The CLI row below is the cold case.
        for path in paths:
            grade(path, config, reference=KIT / "solutions", seed=7)
        grade(paths[0], config, reference=KIT / "solutions", seed=7, isolate=True)
        in_process, isolated = timed_grades(paths, config, args.rounds)
        for name, times in (("in-process, 1 at a time", in_process), ("sandboxed, 1 worker", isolated)):
            median, p95 = summary(times)
            rows.append((name, median, p95, len(times) / sum(times)))
        out = Path(tmp) / "out"
        busy, judge = busy_cpu_seconds(), time.process_time()
        start = time.perf_counter()
        grade_batch(
            paths,
            config,
            out,
            workers=args.workers,
            reference=KIT / "solutions",
            seed=7,
            force=True,
            log=open(os.devnull, "w"),  # noqa: SIM115 - the batch's log, closed with the process
        )
        wall = time.perf_counter() - start
        busy, judge = busy_cpu_seconds() - busy, time.process_time() - judge
        rows.append((f"sandboxed batch, {args.workers} workers", wall / len(paths), float("nan"), len(paths) / wall))
        cold = cli_batch_seconds(paths, Path(tmp) / "cli", args.workers, args.cuda_mode)
        rows.append(("  same, cold: python -m autograder grade", cold / len(paths), float("nan"), len(paths) / cold))
        notebook = nbgrader_times(paths, args.notebooks, config) if args.notebooks else None
    print(
        f"machine: {os.cpu_count()} cores; {args.submissions} submissions (half with a planted mistake); "
        f"cuda step mode: {config.step('cuda').options['mode']}"
    )
    label = "python -c 'import torch'"
    print(f"{label:42s} {torch_time:8.2f} s")
    print(f"{'grading':42s} {'median s':>9s} {'p95 s':>7s} {'subs/s':>8s}")
    for name, median, p95, rate in rows:
        print(f"{name:42s} {median:9.3f} {p95:7.3f} {rate:8.2f}")
    count = len(paths)
    print(
        f"{'  batch CPU per submission':42s} {busy / count * 1000:6.0f} ms: judge {judge / count * 1000:.0f} ms, "
        f"workers and the rest {(busy - judge) / count * 1000:.0f} ms ({busy / wall * 100:.0f} % of one core busy)"
    )
    overhead = statistics.median(isolated) / statistics.median(in_process) - 1
    print(f"{'isolation overhead (median, 1 worker)':42s} {overhead * 100:8.1f} %   (target <= 25 %)")
    if notebook:
        batch_rate, cli_rate = rows[2][3], rows[3][3]
        print(f"{'nbgrader autograde, per notebook':42s} {notebook:9.3f} {'':>7s} {1 / notebook:8.2f}")
        print(f"{'speed-up of our batch over nbgrader':42s} {batch_rate * notebook:8.1f} x  (target >= 30 x)")
        print(
            f"{'  same, both commands run cold':42s} {cli_rate * notebook:8.1f} x  "
            f"(our start-up is paid once per command, nbgrader's kernel start once per notebook)"
        )
    else:
        print("nbgrader comparison skipped: pip install -e .[instructor]")


if __name__ == "__main__":
    main()
