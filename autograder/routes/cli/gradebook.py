"""`python -m autograder adjust`, `history`, `lms-import` and `lms-export`: the instructor's word on
a --out folder's gradebook (engine/operations/gradebook.py), every grading of a student shown, and
the LMS's download in and gradebook out (engine/operations/lms.py)."""

import difflib
import sys
import zoneinfo

from autograder.engine.course import config as grading_config
from autograder.engine.judge.result_files import load_result
from autograder.engine.operations import gradebook, lms
from autograder.engine.operations.folder_lock import BatchBusy, holding
from autograder.engine.operations.shard import ShardError, read_manifest


def run(args) -> int:
    if args.command == "lms-import":
        return run_lms_import(args)
    if args.command == "lms-export":
        return run_lms_export(args)
    if not args.out.is_dir():
        print(f"error: {args.out}: no such folder (the --out of `grade`)", file=sys.stderr)
        return 2
    if args.command == "history":
        return run_history(args)
    return run_adjust(args)


def run_history(args) -> int:
    found = gradebook.history(args.out, args.submissions or None)
    unknown = [name for name in args.submissions if name not in found]
    sys.stdout.write(gradebook.history_text(args.out, args.submissions or None))
    if unknown:
        print(f"error: {', '.join(unknown)}: never graded in {args.out}{_close(args.out, unknown[0])}", file=sys.stderr)
        return 2
    return 0


def run_adjust(args) -> int:
    path = args.out / f"{args.submission}.json"
    if not path.is_file():
        print(
            f"error: {args.out} has no submission {args.submission!r}{_close(args.out, args.submission)}",
            file=sys.stderr,
        )
        return 2
    result = load_result(path)
    steps = [step.id for step in result.steps]
    if args.step is not None and args.step not in steps:
        print(f"error: --step {args.step}: {result.assignment} has the steps {', '.join(steps)}", file=sys.stderr)
        return 2
    if "\n" in args.comment or "\r" in args.comment:
        print("error: the comment must be one line", file=sys.stderr)
        return 2
    try:
        manifest = read_manifest(args.out)
        graded = grading_config.load_all(args.config, deep=False)  # its late policy: no torch
        config = grading_config.choose(graded, manifest.assignment if manifest else result.assignment, args.config)
    except ShardError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        with holding(args.out):
            gradebook.read_adjustments(args.out)  # the file as it is reads, or nothing is added
            gradebook.add_adjustment(
                args.out, gradebook.Adjustment(args.submission, args.points, args.comment, args.step)
            )
            settled = gradebook.apply(args.out, config, manifest.class_ids if manifest else ())
            event = {**gradebook.run_stamp(), "event": "adjust", "points": args.points, "comment": args.comment}
            gradebook.record_history(args.out, {args.submission: settled[args.submission]}, stamp=event)
    except BatchBusy as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except gradebook.GradebookError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    new = settled[args.submission]
    last = new.adjustments[-1]
    why = f" ({last['why']})" if last.get("why") else ""
    print(
        f"{args.submission}: {last['counted']:+g} of {args.points:+g}{why}; total {new.grade:.2f} / "
        f"{new.max_score:.2f} (score {new.score:.2f}); {args.out / gradebook.ADJUSTMENTS} and grades.csv updated"
    )
    return 0


def _close(out, name) -> str:
    names = sorted(path.stem for path in out.glob("*.json"))
    near = difflib.get_close_matches(name, names, n=1)
    return f" (did you mean {near[0]}?)" if near else ""


def run_lms_import(args) -> int:
    if not args.download.exists():
        print(f"error: {args.download}: no such file or folder", file=sys.stderr)
        return 2
    if (args.worksheet is None) != (args.timezone is None) or (args.worksheet and args.lms != "moodle"):
        print("error: --worksheet and --timezone go together, for moodle", file=sys.stderr)
        return 2
    try:
        roster = lms.read_roster(args.roster) if args.roster else None
        if args.lms == "canvas":
            imported, skipped = lms.import_canvas(args.download, args.out, roster)
        else:
            times = lms.worksheet_times(args.worksheet, _zone(args.timezone)) if args.worksheet else None
            imported, skipped = lms.import_moodle(args.download, args.out, roster, times)
    except lms.LmsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for name, why in skipped:
        print(f"skipped {name}: {why}", file=sys.stderr)
    late = sum(bool(entry.late) for entry in imported)
    print(
        f"{len(imported)} submissions into {args.out}/ ({late} marked late by {args.lms}); "
        f"{args.out / lms.LMS_CSV} says who is who. Next: python -m autograder grade {args.out}/* --out grades/ "
        f"--times {args.out / lms.LMS_CSV}"
    )
    if roster is not None:
        missing = sorted({student.id for student in roster} - {entry.id for entry in imported})
        if missing:
            print(f"no submission from {len(missing)} on the roster: {', '.join(missing)}", file=sys.stderr)
    return 0


def _zone(name: str):
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise lms.LmsError(f"--timezone {name}: not a time zone (e.g. Asia/Seoul, Europe/Berlin, UTC)") from None


def run_lms_export(args) -> int:
    if not args.grades.is_dir():
        print(f"error: {args.grades}: no such folder (the --out of `grade`)", file=sys.stderr)
        return 2
    try:
        roster = lms.read_roster(args.roster)
    except lms.LmsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    results = {}
    for path in sorted(args.grades.glob("*.json")):
        try:
            results[path.stem] = load_result(path)
        except (ValueError, KeyError, TypeError, OSError):
            continue  # not a result (another JSON in the folder)
    if not results:
        print(f"error: {args.grades} holds no graded submission", file=sys.stderr)
        return 2
    maximum = max(result.max_score for result in results.values())
    if args.lms == "canvas":
        text = lms.canvas_csv(results, roster, args.column or next(iter(results.values())).assignment, maximum)
    else:
        text = lms.moodle_csv(results, roster, maximum)
    gradebook.write_atomically(args.out, text)
    listed = {name for student in roster for name in (student.id, lms.safe_id(student.id)) if name in results}
    listed |= {student.id for student in roster if lms.result_of(results, student) is None}
    unlisted = sorted(set(results) - listed)
    ungraded = sorted(listed - set(results))
    print(f"wrote {args.out}: {len(listed & set(results))} grades for {args.lms}'s import")
    if ungraded:
        print(f"no grade for {len(ungraded)} on the roster (empty cells): {', '.join(ungraded)}", file=sys.stderr)
    if unlisted:
        print(
            f"error: {len(unlisted)} graded submissions are not on the roster and are not in {args.out}: "
            f"{', '.join(unlisted)}",
            file=sys.stderr,
        )
        return 1
    return 0
