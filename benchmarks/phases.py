"""Where a sandboxed batch's CPU goes, phase by phase, for two trees side by side in one run.

    python benchmarks/phases.py --baseline REF [--submissions 81] [--pairs 1] [--workers 2]

Each tree grades N submissions (benchmarks/batch_grading.py makes them: half carry a planted
mistake, across every step), then the same N and N copies, with the command a TA runs
(`python -m autograder grade --out`, every check, sandboxed), interleaved with the other tree's
runs, with MHA_LAB_PHASES set: the grader records its CPU per phase (autograder/harness/phases.py):
the judge's grading threads and the workers' answers, each booked to the phase that asked.
A figure per submission is the steady state, (2N run - N run) / N: start-up and cold caches
cancel out. Beside the phases: the judge's whole CPU and the whole process tree's (the worker
server, every worker, bubblewrap), read from the operating system, so that what no phase
records shows as "unrecorded". A tree that records no phases (older than the record) shows
the totals only (the judge's CPU is read from /proc every 50 ms: the last moments of a
process are missed, alike in both trees). Prints figures; asserts nothing.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT / "benchmarks"))

import _procstat  # noqa: E402

JUDGE = [
    "staging",
    "scan",
    "planning",
    "fork and confinement",
    "observing public",
    "observing hidden",
    "wire",
    "judging",
    "examples",
    "diagnosis",
    "pictures",
    "scoring and results",
    "writing results",
    "other",
]
WORKERS = [
    "fork and confinement",
    "loading the package",
    "observing public",
    "observing hidden",
    "earlier-step probes",
    "written-out runs",
    "wire",
    "examples",
    "diagnosis",
]


def _full_cpu(pid):
    """(own CPU, own + reaped children's) of a process, in seconds, or None once it has gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    own = int(fields[11]) + int(fields[12])
    return own / _procstat.TICK, (own + int(fields[13]) + int(fields[14])) / _procstat.TICK


def run_sampled(tree: Path, command: list, record: Path) -> dict:
    """Run `command` with `tree`'s code, reading its process tree's CPU from /proc as it runs:
    the judge's own (the command's process) and the rest of its tree (bubblewrap, the worker
    server and every worker, those it reaped included); at each sample no process is counted
    twice, since a parent's count holds only children it has reaped, gone from the tree."""
    env = {**os.environ, "PYTHONPATH": str(tree), "MHA_LAB_LANG": "en", "MHA_LAB_PHASES": str(record)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as compare.py: a student's or a TA's Python writes bytecode
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    judge = rest = 0.0
    while process.poll() is None:
        pids = _procstat.tree(process.pid)
        mine = _full_cpu(process.pid)
        if mine is not None:
            judge = max(judge, mine[0])
        rest = max(rest, sum(cpu[1] for cpu in map(_full_cpu, pids[1:]) if cpu is not None))
        time.sleep(0.05)
    wall = time.perf_counter() - start
    out, err = process.communicate()
    if process.returncode not in (0, 1):
        print(out.decode()[-1500:], err.decode()[-1500:], file=sys.stderr)
        raise SystemExit(f"{tree}: grade exited {process.returncode}")
    return {"wall": wall, "process": judge, "cpu": judge + rest}


def grade(tree: Path, folder: Path, out: Path, workers: int) -> dict:
    """One `grade --out` of `folder` with `tree`'s code: its phases summed, its CPU and wall."""
    shutil.rmtree(out, ignore_errors=True)
    record = out.parent / "phases.jsonl"
    record.unlink(missing_ok=True)
    paths = sorted(str(p) for p in folder.iterdir())
    command = [sys.executable, "-m", "autograder", "grade", *paths, "--out", str(out), "--seed", "7"]
    figures = run_sampled(tree, command + ["--workers", str(workers)], record)
    judge, workers_cpu, submissions = {}, {}, 0
    if record.exists():
        for line in record.read_text().splitlines():
            entry = json.loads(line)
            for name, seconds in entry.get("judge", {}).items():
                judge[name] = judge.get(name, 0.0) + seconds
            for name, seconds in entry.get("workers", {}).items():
                workers_cpu[name] = workers_cpu.get(name, 0.0) + seconds
            submissions += entry.get("submissions", 0)
    figures.update(judge=judge, workers=workers_cpu, submissions=submissions)
    return figures


def steady(one: dict, two: dict, n: int) -> dict:
    """Per submission, (the 2N run - the N run) / N, of every figure."""

    def per(a, b):
        return None if a is None or b is None else (b - a) / n * 1000

    result = {"wall": per(one["wall"], two["wall"]), "cpu": per(one["cpu"], two["cpu"])}
    result["process"] = per(one["process"], two["process"])
    for side in ("judge", "workers"):
        names = set(one[side]) | set(two[side])
        result[side] = {name: per(one[side].get(name, 0.0), two[side].get(name, 0.0)) for name in names}
    result["recorded"] = bool(two["submissions"])
    return result


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def main() -> None:
    from compare import interleaved, trees_of, two_sets

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="a git revision to compare with")
    parser.add_argument("--submissions", type=int, default=81)
    parser.add_argument("--pairs", type=int, default=1, help="pairs of runs of each tree, interleaved")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    trees = trees_of(args.baseline)
    runs = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        single, double = two_sets(tmp, args.submissions)
        for pair, name in interleaved(trees, args.pairs):
            start = time.perf_counter()
            one = grade(trees[name], single, tmp / "out", args.workers)
            two = grade(trees[name], double, tmp / "out", args.workers)
            runs[name].append(steady(one, two, args.submissions))
            print(f"  pair {pair + 1} {name:8s} {time.perf_counter() - start:6.1f} s", flush=True)

    def figure(name, side, phase=None):
        if phase is None:
            return mean([r[side] for r in runs[name]])
        return mean([r[side].get(phase, 0.0) for r in runs[name] if r["recorded"]])

    def cell(value):
        return f"{value:8.1f}" if value is not None else f"{'-':>8s}"

    def ratio(b, t):
        return f"{t / b:7.2f}x" if b and t is not None and b > 0.05 else f"{'':8s}"

    print(f"\nCPU ms per submission, steady state (2N run - N run) / N, {args.workers} workers, every check")
    print(f"{'phase':34s} {'--- baseline ---':>17s} {'----- this -----':>17s} {'this/baseline':>16s}")
    print(f"{'':34s} {'judge':>8s} {'workers':>8s} {'judge':>8s} {'workers':>8s} {'judge':>8s} {'workers':>7s}")
    for phase in dict.fromkeys(JUDGE + WORKERS):
        b = figure("baseline", "judge", phase), figure("baseline", "workers", phase)
        t = figure("this", "judge", phase), figure("this", "workers", phase)
        print(
            f"{phase:34s} {cell(b[0])} {cell(b[1])} {cell(t[0])} {cell(t[1])} {ratio(b[0], t[0])} {ratio(b[1], t[1])}"
        )
    totals = {}
    for name in trees:
        judge_recorded = sum(figure(name, "judge", p) or 0.0 for p in JUDGE) if runs[name][0]["recorded"] else None
        workers_recorded = (
            sum(figure(name, "workers", p) or 0.0 for p in WORKERS) if runs[name][0]["recorded"] else None
        )
        process, cpu = figure(name, "process"), figure(name, "cpu")
        totals[name] = {
            "judge recorded": judge_recorded,
            "workers recorded": workers_recorded,
            "judge process (whole)": process,
            "worker server tree (whole)": None if process is None else cpu - process,
            "everything (judge + server tree)": cpu,
            "wall": figure(name, "wall"),
        }
    for label in totals["this"]:
        b, t = totals["baseline"][label], totals["this"][label]
        print(f"{label:34s} {cell(b):>17s} {cell(t):>17s} {ratio(b, t):>8s}")
    for name in trees:
        cpu, wall = totals[name]["everything (judge + server tree)"], totals[name]["wall"]
        if cpu and wall:
            print(
                f"  {name}: {1000 / wall:5.1f} subs/s steady; CPU-bound on {args.workers} cores: "
                f"{1000 * args.workers / cpu:5.1f} subs/s"
            )


if __name__ == "__main__":
    main()
