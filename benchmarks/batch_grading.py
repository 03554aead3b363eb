"""Batch grading speed: our sandboxed grader vs executing one notebook per submission.

    python benchmarks/batch_grading.py [--submissions 20] [--workers N]

Makes N submissions (the reference and planted mistakes, mixed), then prints in one run:
`import torch` time; per-submission grading time (median, p95) and throughput in-process, and
sandboxed at 1 and N workers (all checks: public, hidden, simulated cuda, diagnosis); the
isolation overhead; and, on the same machine, the time per notebook of executing a notebook
that imports torch and runs the same grading in a fresh Jupyter kernel, which is what
`nbgrader autograde` does per submission (needs nbclient and ipykernel; skipped without them).
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

from autograder import config as grading_config  # noqa: E402
from autograder.batch import grade_batch  # noqa: E402
from autograder.checks import step_modules  # noqa: E402
from autograder.mistakes import mistakes_of  # noqa: E402
from autograder.runner import grade  # noqa: E402


def make_submissions(root, count):
    mistakes = [m for step in step_modules() for m in mistakes_of(step)]
    paths = []
    for i in range(count):
        path = root / f"student{i:03d}"
        shutil.copytree(KIT / "solutions" / "mha", path / "mha")
        if i % 2:  # every other one carries a planted mistake
            mistake = mistakes[(i // 2) % len(mistakes)]
            target = path / "mha" / mistake.file
            target.write_text(mistake.apply(target.read_text()))
        paths.append(path)
    return paths


def summary(times):
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered), p95


def timed_grades(paths, config, isolate):
    times = []
    for path in paths:
        start = time.perf_counter()
        grade(path, config, reference=KIT / "solutions", seed=7, isolate=isolate)
        times.append(time.perf_counter() - start)
    return times


NOTEBOOK_CELLS = [
    "import torch",
    "import sys\nsys.path.insert(0, {kit!r})\n"
    "from autograder import config\nfrom autograder.checks import step_modules\nfrom autograder.runner import grade",
    "result = grade({path!r}, config.load(known_steps=step_modules()), reference={reference!r}, seed=7)\n"
    "result.score",
]


def notebook_times(paths, limit):
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError:
        return None
    times = []
    for path in paths[:limit]:
        cells = [nbformat.v4.new_code_cell(c.format(kit=str(KIT), path=str(path), reference=str(KIT / "solutions")))
                 for c in NOTEBOOK_CELLS]
        notebook = nbformat.v4.new_notebook(cells=cells)
        start = time.perf_counter()
        NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
        times.append(time.perf_counter() - start)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=20)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--notebooks", type=int, default=3, help="notebooks to execute for the comparison")
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
        notebooks = notebook_times(paths, args.notebooks)
    print(f"machine: {os.cpu_count()} cores; {args.submissions} submissions (half with a planted mistake); "
          f"cuda step mode: {config.step('cuda').options['mode']}")
    label = "python -c 'import torch'"
    print(f"{label:42s} {torch_time:8.2f} s")
    print(f"{'grading':42s} {'median s':>9s} {'p95 s':>7s} {'subs/s':>8s}")
    for name, median, p95, rate in rows:
        print(f"{name:42s} {median:9.3f} {p95:7.3f} {rate:8.2f}")
    overhead = statistics.median(isolated) / statistics.median(in_process) - 1
    print(f"{'isolation overhead (median, 1 worker)':42s} {overhead * 100:8.1f} %   (target <= 25 %)")
    if notebooks:
        median = statistics.median(notebooks)
        batch_rate = rows[-1][3]
        print(f"{'one notebook per submission (nbclient)':42s} {median:9.3f} {max(notebooks):7.3f} {1 / median:8.2f}")
        print(f"{'speed-up of our batch over notebooks':42s} {batch_rate * median:8.1f} x  (target >= 30 x)")
    else:
        print("notebook comparison skipped: pip install nbclient ipykernel")


if __name__ == "__main__":
    main()
