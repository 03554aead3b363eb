"""Batch grading speed: our sandboxed grader vs executing one notebook per submission.

    python benchmarks/batch_grading.py [--submissions 20] [--workers N]

Makes N submissions (the reference and planted mistakes, mixed), then prints in one run:
`import torch` time; per-submission grading time (median, p95) and throughput in-process, and
sandboxed at 1 and N workers (all checks: public, hidden, simulated cuda, diagnosis); the
isolation overhead; and, on the same machine, `nbgrader autograde` time per notebook on the kit's
own course (autograder/course.py) filled with the same submissions (needs the instructor extra:
nbgrader; skipped without it).
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
    from autograder.checks import step_modules
    from autograder.mistakes import mistakes_of

    mistakes = [m for step in step_modules() for m in mistakes_of(step)]
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


def summary(times):
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered), p95


def timed_grades(paths, config, isolate):
    from autograder.runner import grade

    times = []
    for path in paths:
        start = time.perf_counter()
        grade(path, config, reference=KIT / "solutions", seed=7, isolate=isolate)
        times.append(time.perf_counter() - start)
    return times


def nbgrader_times(paths, count, config):
    """Seconds per notebook of `nbgrader autograde` on the kit's course notebook filled with the
    first `count` submissions (wall time of the whole command / count), or None without nbgrader."""
    import importlib.util

    if importlib.util.find_spec("nbgrader") is None:
        return None
    import nbformat
    from autograder.course import fill_notebook, write_course

    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        write_course(course, config)
        env = {**os.environ, "PYTHONPATH": str(KIT),
               "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])}
        command = [sys.executable, "-m", "nbgrader"]
        subprocess.run([*command, "generate_assignment", "mha", "--create"], cwd=course, env=env, check=True,
                       capture_output=True)
        released = nbformat.read(str(course / "release" / "mha" / "mha.ipynb"), as_version=4)
        for path in paths[:count]:
            files = {p.name: p.read_text() for p in (path / "mha").glob("*.py")}
            target = course / "submitted" / path.name / "mha"
            target.mkdir(parents=True)
            nbformat.write(fill_notebook(released, files), str(target / "mha.ipynb"))
        start = time.perf_counter()
        subprocess.run([*command, "autograde", "mha", "--create"], cwd=course, env=env, check=True,
                       capture_output=True)
        return (time.perf_counter() - start) / count


def main():
    from autograder import config as grading_config
    from autograder.batch import grade_batch
    from autograder.checks import step_modules
    from autograder.runner import grade

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=20)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--notebooks", type=int, default=4, help="notebooks nbgrader autogrades for the comparison")
    parser.add_argument("--cuda-mode", default=None, choices=["auto", "simulated", "off"],
                        help="override the cuda step's mode (off: leave the simulated device out)")
    args = parser.parse_args()
    config = grading_config.load(known_steps=step_modules())
    if args.cuda_mode:
        config.step("cuda").options["mode"] = args.cuda_mode
    rows = []
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    torch_time = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_submissions(Path(tmp), args.submissions)
        grade(paths[0], config, reference=KIT / "solutions", seed=7)  # warm caches
        grade(paths[0], config, reference=KIT / "solutions", seed=7, isolate=True)  # start the fork server
        in_process = timed_grades(paths, config, isolate=False)
        isolated = timed_grades(paths, config, isolate=True)
        for name, times in (("in-process, 1 at a time", in_process), ("sandboxed, 1 worker", isolated)):
            median, p95 = summary(times)
            rows.append((name, median, p95, len(times) / sum(times)))
        out = Path(tmp) / "out"
        start = time.perf_counter()
        grade_batch(paths, config, out, workers=args.workers, reference=KIT / "solutions", seed=7, force=True,
                    log=open(os.devnull, "w"))
        wall = time.perf_counter() - start
        rows.append((f"sandboxed batch, {args.workers} workers", wall / len(paths), float("nan"), len(paths) / wall))
        notebook = nbgrader_times(paths, args.notebooks, config) if args.notebooks else None
    print(f"machine: {os.cpu_count()} cores; {args.submissions} submissions (half with a planted mistake); "
          f"cuda step mode: {config.step('cuda').options['mode']}")
    label = "python -c 'import torch'"
    print(f"{label:42s} {torch_time:8.2f} s")
    print(f"{'grading':42s} {'median s':>9s} {'p95 s':>7s} {'subs/s':>8s}")
    for name, median, p95, rate in rows:
        print(f"{name:42s} {median:9.3f} {p95:7.3f} {rate:8.2f}")
    overhead = statistics.median(isolated) / statistics.median(in_process) - 1
    print(f"{'isolation overhead (median, 1 worker)':42s} {overhead * 100:8.1f} %   (target <= 25 %)")
    if notebook:
        batch_rate = rows[-1][3]
        print(f"{'nbgrader autograde, per notebook':42s} {notebook:9.3f} {'':>7s} {1 / notebook:8.2f}")
        print(f"{'speed-up of our batch over nbgrader':42s} {batch_rate * notebook:8.1f} x  (target >= 30 x)")
    else:
        print("nbgrader comparison skipped: pip install -e .[instructor]")


if __name__ == "__main__":
    main()
