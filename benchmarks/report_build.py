"""How long the class report takes for a class of N submissions (default 200).

    python benchmarks/report_build.py [--submissions 200] [--graded 12] [--baseline /work/main] [--keep DIR]

Makes a class of the sizes a real one has: each student the reference package with each step
file in a style of tests/styles.py drawn at random, one student in ten a copy of a classmate,
disguised (tests/disguise.py: renames, reorderings, dead code, moves across files), some in
rings of three or four; and, for a third, one planted mistake in the JSON they get. Grades `--graded` of them
for real (`python -m autograder grade --out`, sandboxed, every check); every other student gets
the JSON of a graded student (its own path, a perturbed grading time) and the code grading keeps
of its own folder (kept_code.py), as `grade --out` would write it. Then times, in this process:
reading the out directory, the aggregates, the similarity, the HTML; and the whole `python -m
autograder report` command (start-up included), of this tree and, with `--baseline`, of another
tree (its own interpreter: BASELINE/.venv/bin/python when there is one), interleaved, three
runs each. Prints figures; asserts nothing.

The gallery has 2 to 15 styles a file, so with 200 students many pairs share most of their files
as written (a style of mha.py is held by about 13 students): far more pairs are listed than a
real class gives. The figures that matter here are the times, and that every planted copy is
paired with its source.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))
sys.path.insert(0, str(KIT / "tests"))


def write_package(path: Path, files: dict) -> None:
    for name, text in files.items():
        target = path / "mha" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def make_class(cls: Path, count: int, rng: random.Random) -> dict:
    """{student id: the id of the classmate they copied, or None}: the class written under `cls`."""
    from disguise import KINDS, disguise, styles_by_file

    pool = styles_by_file()
    copied, packages = {}, {}
    for i in range(count):
        sid = f"student{i:03d}"
        if i >= 10 and rng.random() < 0.1:
            source = rng.choice(sorted(sid for sid in packages if copied[sid] is None))
            files = disguise(packages[source], rng, rng.sample(KINDS, rng.randint(2, len(KINDS))))
            copied[sid] = source
        else:
            files = {name: rng.choice(texts) for name, texts in pool.items()}
            copied[sid] = None
        packages[sid] = files
        write_package(cls / sid, files)
    return copied


def report_command(python: str, tree: Path, out: Path, html: Path) -> float:
    started = time.perf_counter()
    completed = subprocess.run(
        [
            python,
            "-m",
            "autograder",
            "report",
            out,
            "--html",
            html,
            "--json",
            html.with_suffix(".json"),
            "--lang",
            "ko",
        ],
        cwd=tree,
        capture_output=True,
        text=True,
    )
    if completed.returncode:
        sys.exit(f"{tree}: {completed.stderr}")
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=200)
    parser.add_argument("--graded", type=int, default=12, help="students graded for real (the rest copy their JSON)")
    parser.add_argument("--baseline", type=Path, help="another checkout of the kit, timed on the same class")
    parser.add_argument("--keep", type=Path, help="write the class, grades and report here (kept)")
    args = parser.parse_args()
    from autograder.engine.judge import kept_code
    from autograder.engine.judge.grades_csv import write_csv
    from autograder.engine.judge.result_files import load_result
    from autograder.engine.scan.submission import submission_files
    from planted import PLANTED

    rng = random.Random(16)
    root = args.keep or Path(tempfile.mkdtemp(prefix="report-bench-"))
    cls, out = root / "class", root / "grades"
    copied = make_class(cls, args.submissions, rng)
    ids = sorted(copied)
    mistakes = [m for m in PLANTED if not m.needs_check]
    graded = ids[: args.graded]
    for sid in graded[1:]:  # a planted mistake in each graded student but the first
        mistake = rng.choice(mistakes)
        target = cls / sid / "mha" / mistake.file
        try:
            target.write_text(mistake.apply(target.read_text()))
        except ValueError:
            pass  # the mistake's lines are not in this student's style of the file
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", *(cls / sid for sid in graded), "--out", out, "--seed", "16"],
        cwd=KIT,
        capture_output=True,
        text=True,
    )
    if completed.returncode:
        sys.exit(completed.stderr)
    grading = time.perf_counter() - started
    for sid in ids[args.graded :]:
        data = json.loads((out / f"{rng.choice(graded)}.json").read_text())
        data["submission"] = str(cls / sid)
        data["duration_s"] = round(data.get("duration_s", 1.0) * rng.uniform(0.7, 1.5), 3)
        data["code"] = kept_code.write(out, sid, kept_code.keep(submission_files(cls / sid, "mha")))
        (out / f"{sid}.json").write_text(json.dumps(data, indent=2))
    write_csv([load_result(out / f"{sid}.json") for sid in ids], ids, out / "grades.csv", [str(cls / s) for s in ids])

    from autograder.publish.report import data as report
    from autograder.publish.report import reading, similarity
    from autograder.publish.report.html import render
    from autograder.routes.cli.report import graded_assignment, skeleton_files

    timings = {}
    t = time.perf_counter()
    entries = reading.load_out_dirs([out])
    timings["read the out directory (results, kept code)"] = time.perf_counter() - t
    t = time.perf_counter()
    config = graded_assignment(entries)
    skeleton = KIT / "assignments" / config.package
    docs = report.skeleton_paragraphs(skeleton, {s: list(m.FILES) for s, m in config.step_modules().items()})
    data = report.build(entries, docs)
    timings["aggregates"] = time.perf_counter() - t
    t = time.perf_counter()
    data["similarity"] = similarity.find_similar(entries, skeleton_files(skeleton))
    timings["similarity (normalise, k-grams, all pairs)"] = time.perf_counter() - t
    t = time.perf_counter()
    html = render(data, "en", [out])
    (root / "report.html").write_text(html, encoding="utf-8")
    timings["HTML rendering"] = time.perf_counter() - t

    trees = {"this tree": (sys.executable, KIT)}
    if args.baseline:
        python = args.baseline / ".venv" / "bin" / "python"
        trees["baseline"] = (str(python) if python.exists() else sys.executable, args.baseline)
    runs = {name: [] for name in trees}
    for _ in range(3):
        for name, (python, tree) in trees.items():
            runs[name].append(report_command(python, tree, out, root / f"{name.replace(' ', '_')}.html"))

    print(
        f"class report benchmark: {args.submissions} submissions, {os.cpu_count()} cores "
        f"({args.graded} graded for real in {grading:.1f} s, the rest copy their JSON)"
    )
    for name, seconds in timings.items():
        print(f"  {name:<52} {seconds:7.2f} s")
    for name, seconds in runs.items():
        figures = ", ".join(f"{s:.2f}" for s in seconds)
        print(f"  whole `report` command, {name:<27} {statistics.median(seconds):7.2f} s (median of {figures})")
    found = data["similarity"]
    rings = {}
    for sid, source in copied.items():
        if source is not None:
            rings.setdefault(source, {source}).add(sid)
    every = similarity.find_similar(entries, skeleton_files(skeleton), limit=10**6)["pairs"]  # not timed
    listed = {(pair["a"], pair["b"]) for pair in every}
    caught = sum(1 for sid, source in copied.items() if source and tuple(sorted((sid, source))) in listed)
    print(
        f"  similarity: {found['compared']} submissions, {found['compared'] * (found['compared'] - 1) // 2} pairs, "
        f"{len(found['pairs']) + found['more']} at or above {found['threshold']:.0%} ({len(found['pairs'])} listed), "
        f"in {len(found['clusters'])} clusters (largest: {max((len(c['members']) for c in found['clusters']), default=0)}); "
        f"{caught} of {sum(1 for s in copied.values() if s)} planted copies paired with their source"
    )
    print(f"  HTML: {len(html) / 1e6:.1f} MB; misconceptions: {len(data['misconceptions'])}")
    print(f"  written under {root}" + ("" if args.keep else " (a temporary directory)"))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
