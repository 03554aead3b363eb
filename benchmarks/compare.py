"""Two trees side by side, in one run, on the same submissions: the batch's steady throughput,
its first pass, the isolation overhead and the student's loop, as ratios to a baseline.

    python benchmarks/compare.py --baseline REF [--submissions 81] [--pairs 2] [--workers 2]

REF is any git revision (e.g. 6478c76): it is checked out once as a detached worktree under
the temporary folder and run with this interpreter, its own tree first on the path. Every figure
comes from the command line a TA runs (`python -m autograder grade --out`), the one interface
every revision shares, so internals may differ freely between the trees.

Per tree and per pair of runs, interleaved (baseline, this, this, baseline, ...) so that a noisy
machine slows both alike:
- t(N): N submissions (benchmarks/batch_grading.py makes them: half carry a planted mistake,
  across every step), a fresh `grade --out`: the first pass, start-up and cold caches included;
- t(2N): the same N and N copies under other names in one run; steady throughput is
  N / (t(2N) - t(N)): what a class-sized batch gets once started;
- the same two with `--in-process` (no sandbox, one process): the isolation overhead is the
  sandboxed steady throughput over the in-process one times the workers (all the cores that an
  in-process grader could use, were it parallel);
- the student loop: `pytest assignments/` on the complete solution minus `python -c "import torch"`.
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
sys.path.insert(0, str(KIT / "benchmarks"))


def baseline_tree(ref: str, root: Path) -> Path:
    """A detached worktree of `ref`, made once and kept (a second run reuses it)."""
    commit = subprocess.run(
        ["git", "-C", str(KIT), "rev-parse", "--short", ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = root / f"mha-lab-baseline-{commit}"
    if not (tree / "autograder").is_dir():
        subprocess.run(["git", "-C", str(KIT), "worktree", "add", "--detach", str(tree), commit], check=True)
    return tree


def run(tree: Path, command: list, cwd: Path) -> float:
    """Wall seconds of one command run against `tree`'s code."""
    env = {**os.environ, "PYTHONPATH": str(tree), "MHA_LAB_LANG": "en"}
    # A student's or a TA's Python writes bytecode; a machine set not to (this one is) would bill
    # every run for compiling the kit again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if completed.returncode not in (0, 1):  # grade and pytest exit 1 when a check fails
        print(completed.stdout[-1500:], completed.stderr[-1500:], file=sys.stderr)
        raise SystemExit(f"{tree}: {' '.join(map(str, command[:4]))} ... exited {completed.returncode}")
    return wall


def grade(tree: Path, folder: Path, out: Path, workers: int, in_process: bool) -> float:
    shutil.rmtree(out, ignore_errors=True)
    paths = sorted(str(p) for p in folder.iterdir())
    command = [sys.executable, "-m", "autograder", "grade", *paths, "--out", str(out), "--seed", "7"]
    command += ["--in-process"] if in_process else ["--workers", str(workers)]
    return run(tree, command, tree)


def two_sets(folder: Path, count: int) -> tuple:
    """(folder/n: `count` submissions, folder/2n: the same and a copy of each under another name)."""
    from batch_grading import make_submissions

    single, double = folder / "n", folder / "2n"
    single.mkdir()
    for path in make_submissions(single, count):
        shutil.copytree(path, double / path.name)
        shutil.copytree(path, double / f"{path.name}-again")
    return single, double


def interleaved(trees: dict, pairs: int):
    """(pair, tree name): baseline, this, this, baseline, then the other way round, so that a
    noisy machine slows both alike."""
    for pair in range(pairs):
        order = list(trees) if pair % 2 == 0 else list(trees)[::-1]
        for name in order + order[::-1]:
            yield pair, name


def trees_of(ref: str) -> dict:
    """{"baseline": a worktree of `ref`, "this": this tree}, said on the first lines printed."""
    trees = {"baseline": baseline_tree(ref, Path(tempfile.gettempdir())), "this": KIT}
    print(f"baseline {ref} ({trees['baseline']}) vs this tree ({KIT})")
    print(f"machine: {len(os.sched_getaffinity(0))} usable cores, load average {os.getloadavg()[0]:.1f} at start")
    return trees


def student_kit(tree: Path, root: Path) -> Path:
    """`tree`'s student folder with the complete solution in it."""
    kit = root / "kit"
    (kit / "assignments").mkdir(parents=True)
    for name in ("conftest.py", "test_checks.py"):
        if (tree / "assignments" / name).exists():
            shutil.copy(tree / "assignments" / name, kit / "assignments" / name)
    shutil.copytree(tree / "solutions" / "mha", kit / "assignments" / "mha")
    shutil.copy(tree / "grading.yml", kit / "grading.yml")
    return kit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="a git revision to compare with, e.g. 6478c76")
    parser.add_argument("--submissions", type=int, default=81)
    parser.add_argument("--pairs", type=int, default=2, help="pairs of runs of each tree, interleaved")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--loop-runs", type=int, default=5, help="runs of each student-loop command")
    parser.add_argument("--skip-in-process", action="store_true")
    args = parser.parse_args()
    trees = trees_of(args.baseline)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        single, double = two_sets(tmp, args.submissions)
        figures = {name: {"first": [], "steady": [], "first_ip": [], "steady_ip": []} for name in trees}
        modes = [False] if args.skip_in_process else [False, True]
        for pair, name in interleaved(trees, args.pairs):
            tree = trees[name]
            for in_process in modes:
                one = grade(tree, single, tmp / "out", args.workers, in_process)
                two = grade(tree, double, tmp / "out", args.workers, in_process)
                suffix = "_ip" if in_process else ""
                figures[name]["first" + suffix].append(one)
                figures[name]["steady" + suffix].append(args.submissions / max(two - one, 1e-9))
                print(
                    f"  pair {pair + 1} {name:8s} {'in-process' if in_process else 'sandboxed':10s} "
                    f"t(N)={one:6.1f} s t(2N)={two:6.1f} s steady={args.submissions / max(two - one, 1e-9):5.1f}"
                    " subs/s",
                    flush=True,
                )
        loop = {}
        for name, tree in trees.items():
            kit = student_kit(tree, tmp / name)
            loop[name] = {"torch": [], "pytest": []}
            run(tree, [sys.executable, "-c", "import torch"], kit)  # the file cache warm for both
        for _ in range(args.loop_runs):
            for name, tree in trees.items():
                kit = tmp / name / "kit"
                loop[name]["torch"].append(run(tree, [sys.executable, "-c", "import torch"], kit))
                # the student's own command: the kit's pytest settings are the ones it ships, no flag added
                pytest = [sys.executable, "-m", "pytest", "-q", "assignments"]
                loop[name]["pytest"].append(run(tree, pytest, kit))
    median = statistics.median
    print(f"\n{'':34s} {'baseline':>12s} {'this':>12s} {'this/baseline':>14s}")

    def row(label: str, key: str, unit: str, better_high: bool = True) -> None:
        if not figures["this"][key]:
            return
        b, t = median(figures["baseline"][key]), median(figures["this"][key])
        print(f"{label:34s} {b:9.2f} {unit:>2s} {t:9.2f} {unit:>2s} {t / b:13.2f}x")

    row("steady throughput (sandboxed)", "steady", "/s")
    row("first pass, N submissions", "first", "s")
    row("steady throughput (in-process, 1)", "steady_ip", "/s")
    if not args.skip_in_process:
        for name in trees:
            share = median(figures[name]["steady"]) / (args.workers * median(figures[name]["steady_ip"]))
            print(f"  {name}: sandboxed batch = {share:.0%} of the in-process limit on {args.workers} workers")
    for name in trees:
        extra = median(loop[name]["pytest"]) - median(loop[name]["torch"])
        print(f"  {name}: student loop = import torch ({median(loop[name]['torch']):.2f} s) + {extra:.2f} s")
    print("  targets: steady >= 20 subs/s; sandboxed >= 90 % of the in-process limit; first pass within 10 %")
    print("  of 6478c76's; student loop <= import torch + 0.3 s")


if __name__ == "__main__":
    main()
