"""How long the class report takes for a class of N submissions (default 200).

    python benchmarks/report_build.py [--submissions 200] [--graded 12] [--keep DIR]

Makes a class: N submission directories, each the reference with a random set of the correct
rewrites of tests/variants.py (so no two students' code is the same, as in a real class) and,
for about a third, one planted mistake (tests/planted.py). Grades `--graded` of them for real
(`python -m autograder grade --out`, sandboxed, every check); every other student gets the JSON
of the graded student it was made from (same mistake), with its own submission path and a
perturbed grading time. Then times, in this process: reading the out directory, the aggregates,
copydetect's similarity over all pairs, the HTML rendering, and the whole `python -m autograder
report` command (start-up included). Prints figures; asserts nothing.
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))
sys.path.insert(0, str(KIT / "tests"))


def make_student(path, rng, mistake):
    from variants import VARIANTS

    shutil.copytree(KIT / "solutions" / "mha", path / "mha")
    for rewrite in rng.sample(VARIANTS, k=min(len(VARIANTS), rng.randint(1, 6))):
        target = path / "mha" / rewrite.file
        try:
            target.write_text(rewrite.apply(target.read_text()))
        except ValueError:
            pass  # an earlier rewrite of the same lines: skip this one
    if mistake is not None:
        target = path / "mha" / mistake.file
        try:
            target.write_text(mistake.apply(target.read_text()))
        except ValueError:
            mistake = None
    for file in (path / "mha").glob("*.py"):
        file.write_text(file.read_text() + f"# {path.name}\n")
    return mistake


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=200)
    parser.add_argument("--graded", type=int, default=12, help="students graded for real (the rest copy their JSON)")
    parser.add_argument("--keep", type=Path, help="write the class, grades and report here (kept)")
    args = parser.parse_args()
    from planted import PLANTED

    rng = random.Random(16)
    root = args.keep or Path(tempfile.mkdtemp(prefix="report-bench-"))
    cls, out = root / "class", root / "grades"
    mistakes = [m for m in PLANTED if not m.needs_check]
    bases = [None] + [rng.choice(mistakes) for _ in range(args.graded - 1)]
    base_of = {}
    for i in range(args.submissions):
        base = i if i < args.graded else rng.randrange(args.graded)
        base_of[f"student{i:03d}"] = f"student{base:03d}"
        make_student(cls / f"student{i:03d}", rng, bases[base])

    started = time.perf_counter()
    graded = [cls / f"student{i:03d}" for i in range(args.graded)]
    completed = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", *graded, "--out", out, "--seed", "16"],
        cwd=KIT,
        capture_output=True,
        text=True,
    )
    if completed.returncode:
        sys.exit(completed.stderr)
    grading = time.perf_counter() - started
    for sid, base in base_of.items():
        data = json.loads((out / f"{base}.json").read_text())
        data["submission"] = str(cls / sid)
        data["duration_s"] = round(data.get("duration_s", 1.0) * rng.uniform(0.7, 1.5), 3)
        (out / f"{sid}.json").write_text(json.dumps(data, indent=2))
    # grades.csv as the grader writes it, from the JSONs
    from autograder.engine.operations.batch import load_result
    from autograder.engine.judge.results import write_csv

    ids = sorted(base_of)
    write_csv(
        [load_result(out / f"{sid}.json") for sid in ids],
        ids,
        out / "grades.csv",
        paths=[str(cls / sid) for sid in ids],
    )

    from autograder.routes.report import data as report, similarity
    from autograder.routes.report.cli import graded_assignment
    from autograder.routes.report.html import render

    timings = {}
    t = time.perf_counter()
    entries = report.load_out_dirs([out])
    timings["read the out directory"] = time.perf_counter() - t
    t = time.perf_counter()
    config = graded_assignment(entries)
    skeleton = KIT / "assignments" / config.package
    docs = report.skeleton_paragraphs(skeleton, {s: list(m.FILES) for s, m in config.step_modules().items()})
    data = report.build(entries, docs)
    timings["aggregates"] = time.perf_counter() - t
    t = time.perf_counter()
    data["similarity"] = similarity.find_similar(entries, skeleton)
    timings["similarity (copydetect, all pairs)"] = time.perf_counter() - t
    t = time.perf_counter()
    html = render(data, "en", [out])
    (root / "report.html").write_text(html, encoding="utf-8")
    timings["HTML rendering"] = time.perf_counter() - t
    t = time.perf_counter()
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograder",
            "report",
            out,
            "--html",
            root / "cli.html",
            "--json",
            root / "cli.json",
            "--lang",
            "ko",
        ],
        cwd=KIT,
        capture_output=True,
        text=True,
    )
    if completed.returncode:
        sys.exit(completed.stderr)
    timings["whole `report` command (start-up, JSON and HTML)"] = time.perf_counter() - t

    print(
        f"class report benchmark: {args.submissions} submissions, {os.cpu_count()} cores "
        f"({args.graded} graded for real in {grading:.1f} s, the rest copy their JSON)"
    )
    for name, seconds in timings.items():
        print(f"  {name:<52} {seconds:7.2f} s")
    pairs = data["similarity"]
    print(
        f"  similarity: {pairs['compared']} submissions, {pairs['compared'] * (pairs['compared'] - 1) // 2} pairs, "
        f"{len(pairs['pairs']) + pairs['more']} at or above {pairs['threshold']:.0%} ({len(pairs['pairs'])} listed), "
        f"in {len(pairs['clusters'])} clusters (largest: {max((len(c['members']) for c in pairs['clusters']), default=0)})"
    )
    print(f"  HTML: {len(html) / 1e6:.1f} MB; misconceptions: {len(data['misconceptions'])}")
    print(f"  written under {root}" + ("" if args.keep else " (a temporary directory)"))


if __name__ == "__main__":
    main()
