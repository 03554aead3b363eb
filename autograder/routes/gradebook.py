"""`python -m autograder adjust` and `history`: the instructor's word on a --out folder's gradebook
(engine/operations/gradebook.py), and every grading of a student shown."""

import difflib
import sys

from autograder.engine.course import config as grading_config
from autograder.engine.judge.results import load_result
from autograder.engine.operations import gradebook
from autograder.engine.operations.folder_lock import BatchBusy, holding
from autograder.engine.operations.shard import ShardError, read_manifest


def run(args) -> int:
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
