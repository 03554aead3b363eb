"""`python -m autograder merge ...` and `python -m autograder report ...` (the CLI's hooks).

merge OUT1 OUT2 ... --out MERGED                 shards (grade --shard K/N) back into one
report OUT1 [OUT2 ...] --html r.html [--json r.json] [--lang ko] [--threshold 0.6]
"""

import json
import sys

from autograder import KIT
from autograder.engine.course import config as grading_config
from autograder.engine.judge.result_files import WriteError, write_atomically
from autograder.engine.operations.shard import IncompleteMerge, ShardError, merge
from autograder.publish.report import data as report
from autograder.publish.report import reading, similarity
from autograder.publish.report.html import localised, render
from autograder.publish.report.reading import ReportError


def run(args) -> int:
    if args.command == "merge":
        return run_merge(args)
    return run_report(args)


def run_merge(args) -> int:
    try:
        merged = merge(args.dirs, args.out, allow_missing=getattr(args, "allow_missing", False))
    except IncompleteMerge as error:  # not a mistake in the command: something to grade first
        print(f"error: {error}", file=sys.stderr)
        return 1
    except ShardError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except WriteError as error:
        print(f"error: {error}; make room and merge again", file=sys.stderr)
        return 1
    print(
        f"merged {len(merged)} results from {len(args.dirs)} directories into {args.out}/ (grades.csv, one JSON each)"
    )
    return 0


def build_report(dirs: list, threshold: float = 0.6, assignment: str = None) -> dict:
    """The report's data from the out directories alone (reading.py: never the submissions):
    report.build with the skeleton's paragraphs and the similarity of the code grading kept.
    `assignment`: its id in grading.yml (default: the one whose title the results carry)."""
    entries = reading.load_out_dirs(dirs)
    config = graded_assignment(entries, assignment)
    skeleton = KIT / "assignments" / config.package
    files = {step_id: list(module.FILES) for step_id, module in config.step_modules().items()}
    similar = similarity.find_similar(entries, skeleton_files(skeleton), threshold)
    data = report.build(entries, report.skeleton_paragraphs(skeleton, files), similar)
    data["assignment"] = {"id": config.id, "title": config.title}  # its titles' ids in the catalogs
    return data


def skeleton_files(skeleton) -> dict:
    """{path in the package: text} of the kit's skeleton package (what students were given)."""
    return {
        path.relative_to(skeleton).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(skeleton.rglob("*.py"))
    }


def graded_assignment(entries: list, assignment: str = None):
    """The Assignment of grading.yml the results are of: `assignment`, else the one whose title
    the results carry, else the first."""
    graded = grading_config.load_all()
    if assignment is not None:
        return grading_config.choose(graded, assignment, grading_config.default_path())
    titles = {(entry.get("result") or {}).get("assignment") for entry in entries}
    return next((config for config in graded if config.title in titles), graded[0])


def run_report(args) -> int:
    if not args.html and not args.json:
        print("error: nothing to write: give --html FILE and/or --json FILE", file=sys.stderr)
        return 2
    try:
        data = build_report(args.dirs, args.threshold, getattr(args, "assignment", None))
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not data["students"]:
        print(
            f"error: no results in {', '.join(map(str, args.dirs))} (expected grade --out directories)", file=sys.stderr
        )
        return 2
    if not getattr(args, "assignment", None):
        print(f"assignment: {data['assignment']['id']} (from the results; --assignment ID to choose)")
    said = localised(data, args.lang) if args.json else None  # the texts for people in --lang, as the HTML's
    written = [(args.json, lambda: json.dumps(said, indent=1, ensure_ascii=False) + "\n")] if args.json else []
    written += [(args.html, lambda: render(data, args.lang, args.dirs))] if args.html else []
    for path, text in written:  # whole or not at all, the folder made where it is missing
        try:
            write_atomically(path, text(), sync=False)
        except WriteError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        print(f"wrote {path}")
    return 0
