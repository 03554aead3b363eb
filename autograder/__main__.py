"""Command line: `python -m autograder grade [PATH ...]` and `python -m autograder skeleton`.

    grade                  grade assignments/ with the public and hidden checks
    grade PATH --json F    grade one submission (a directory holding mha/), write JSON to F
    grade P1 P2 --out DIR  grade a batch: DIR/<name>.json for each and DIR/grades.csv
    skeleton [--check]     regenerate assignments/mha from solutions/mha (--check: only compare)
"""
import argparse
import sys
from pathlib import Path

from . import config as grading_config
from . import results

KIT = Path(__file__).resolve().parent.parent


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    grade = commands.add_parser("grade", help="grade submissions (directories that hold mha/)")
    grade.add_argument("paths", nargs="*", type=Path, help="submissions (default: assignments/)")
    grade.add_argument("--json", type=Path, help="write the result of one submission as JSON")
    grade.add_argument("--out", type=Path, help="batch: write DIR/<name>.json and DIR/grades.csv")
    grade.add_argument("--config", type=Path, help="grading.yml to use (default: the kit's)")
    grade.add_argument("--reference", type=Path, default=KIT / "solutions",
                       help="directory holding the reference mha/ (default: solutions/)")
    grade.add_argument("--public-only", action="store_true", help="skip the hidden checks")
    grade.add_argument("--seed", type=int, help="seed for the hidden checks (default: random)")

    skeleton = commands.add_parser("skeleton", help="regenerate assignments/mha from solutions/mha")
    skeleton.add_argument("--check", action="store_true", help="only report whether it is up to date")

    args = parser.parse_args(argv)
    if args.command == "skeleton":
        return run_skeleton(args)
    return run_grade(args)


def run_grade(args):
    from .checks import step_modules
    from .runner import grade

    try:
        config = grading_config.load(args.config, known_steps=step_modules())
    except grading_config.ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    paths = args.paths or [KIT / "assignments"]
    if args.json and len(paths) > 1:
        print("error: --json takes one submission; use --out DIR for a batch", file=sys.stderr)
        return 2
    reference = None if args.public_only else args.reference
    graded = []
    for path in paths:
        result = grade(path, config, reference=reference, seed=args.seed)
        graded.append(result)
        print(results.table(result))
        print()
    if args.json:
        results.write_json(graded[0], args.json)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        names = unique_names(paths)
        for name, result in zip(names, graded):
            results.write_json(result, args.out / f"{name}.json")
        results.write_csv(graded, names, args.out / "grades.csv")
    return 0


def unique_names(paths):
    """A file-name-safe name per submission: its directory name, numbered where names repeat."""
    names, seen = [], {}
    for path in paths:
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(path).resolve().name) or "submission"
        seen[name] = seen.get(name, 0) + 1
        names.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return names


def run_skeleton(args):
    from .skeleton import write_skeletons

    changed = write_skeletons(KIT / "solutions" / "mha", KIT / "assignments" / "mha", dry_run=args.check)
    for path in changed:
        print(f"{'out of date' if args.check else 'wrote'}: {path.relative_to(KIT)}")
    if args.check and changed:
        print("run `python -m autograder skeleton` to regenerate", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
