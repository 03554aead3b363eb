"""Command line: `python -m autograder grade [PATH ...]` and `python -m autograder skeleton`.

    grade                  grade assignments/ with the public and hidden checks
    grade PATH --json F    grade one submission (a directory holding mha/), write JSON to F
    grade P1 P2 --out DIR  grade a batch in parallel: DIR/<name>.json for each and DIR/grades.csv

Student code runs in sandboxed worker processes (autograder/worker.py) unless --in-process.
    skeleton [--check]     regenerate assignments/mha and solutions/mha.ipynb from solutions/mha
    fingerprints [--check] regenerate autograder/fingerprints.json (the release's diagnosis)
    nbgrader COURSE_DIR    write an nbgrader course: nbgrader_config.py, source/mha/mha.ipynb
"""
import argparse
import random
import sys
import warnings
from pathlib import Path

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
    grade.add_argument("--workers", type=int, help="batch: submissions graded at once (default: cores; --in-process: 1)")
    grade.add_argument("--force", action="store_true", help="batch: grade again what --out already has")
    grade.add_argument("--in-process", action="store_true",
                       help="run student code in this process (no sandbox: only for code you trust)")

    grade.add_argument("--gradescope", type=Path, metavar="RESULTS_JSON",
                       help="write Gradescope's results.json (the submission may be the step files themselves)")

    release = commands.add_parser("release", help="write what students get (no reference, no hidden checks)")
    release.add_argument("out", type=Path, help="a directory that does not exist yet")
    release.add_argument("--classroom", choices=["command", "fractional"], default="command",
                         help="GitHub Classroom workflow: all-or-nothing per step, or fractional scores")
    gradescope = commands.add_parser("gradescope", help="write a Gradescope autograder zip")
    gradescope.add_argument("out", type=Path, help="the zip file to write")

    nbgrader = commands.add_parser("nbgrader", help="write an nbgrader course (config and source notebook)")
    nbgrader.add_argument("course_dir", type=Path, help="the course directory (created if needed)")

    skeleton = commands.add_parser("skeleton", help="regenerate assignments/mha and solutions/mha.ipynb from solutions/mha")
    skeleton.add_argument("--check", action="store_true", help="only report whether they are up to date")

    fingerprints = commands.add_parser(
        "fingerprints", help="regenerate autograder/fingerprints.json: the known mistakes on the public checks")
    fingerprints.add_argument("--check", action="store_true", help="only report whether it is up to date")

    args = parser.parse_args(argv)
    if args.command == "fingerprints":
        return run_fingerprints(args)
    if args.command == "skeleton":
        return run_skeleton(args)
    if args.command == "nbgrader":
        return run_nbgrader(args)
    if args.command in ("release", "gradescope"):
        from .release import gradescope_zip, release as write_release
        if args.command == "release" and args.out.exists():
            print(f"error: {args.out} already exists", file=sys.stderr)
            return 2
        written = write_release(args.out, args.classroom) if args.command == "release" else gradescope_zip(args.out)
        print(f"wrote {written}")
        return 0
    return run_grade(args)


def run_grade(args):
    if not args.in_process:
        from . import fork_server
        fork_server.start()  # it imports torch while this process does: seconds saved
    from . import config as grading_config
    from .batch import grade_batch
    from .checks import step_modules
    from .runner import grade

    try:
        config = grading_config.load(args.config, known_steps=step_modules())
    except grading_config.ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    paths = args.paths or [KIT / "assignments"]
    if len(paths) > 1 and not args.out:
        print("error: several submissions need --out DIR (one JSON each and grades.csv)", file=sys.stderr)
        return 2
    reference = None if args.public_only else args.reference
    if reference is not None and not (Path(reference) / "mha").is_dir():
        print(f"error: no reference mha/ in {reference} (use --public-only without one)", file=sys.stderr)
        return 2
    isolate = not args.in_process
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    warnings.simplefilter("ignore")  # warnings from torch or student code never reach our stderr
    if args.out:
        graded = grade_batch(paths, config, args.out, workers=args.workers, reference=reference, seed=seed,
                             force=args.force, isolate=isolate)
        failed = [name for name, result in graded.items() if result is None]
        print(f"graded {len(graded) - len(failed)} submissions into {args.out}/ (grades.csv, one JSON each)")
        if failed:
            print(f"error: the grader failed on {len(failed)} submission(s): {', '.join(failed)}; "
                  "run the same command again to grade them", file=sys.stderr)
            return 1
        return 0
    if args.gradescope:
        return run_gradescope(paths[0], config, reference, seed, isolate, args.gradescope)
    result = grade(paths[0], config, reference=reference, seed=seed, isolate=isolate)
    print(results.table(result))
    if result.output:
        print("\nwhat the submission printed (cut):\n" + result.output)
    if args.json:
        results.write_json(result, args.json)
    return 0


def run_gradescope(upload, config, reference, seed, isolate, results_path):
    """Grade a Gradescope upload and write its results.json (and the table, for the log)."""
    import json
    import time

    from .release import gradescope_results
    from .runner import grade

    started = time.monotonic()
    result = grade(upload, config, reference=reference, seed=seed, isolate=isolate)
    print(results.table(result))
    data = gradescope_results(result, time.monotonic() - started)
    Path(results_path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return 0


def run_nbgrader(args):
    from . import config as grading_config
    from .checks import step_modules
    from .course import write_course

    try:
        written = write_course(args.course_dir, grading_config.load(known_steps=step_modules()))
    except FileExistsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    print(f"next: cd {args.course_dir} && nbgrader generate_assignment {written[1].parent.name} --create")
    return 0


def run_skeleton(args):
    from . import config as grading_config
    from .checks import step_modules
    from .course import write_course_notebook
    from .skeleton import write_skeletons

    changed = write_skeletons(KIT / "solutions" / "mha", KIT / "assignments" / "mha", dry_run=args.check)
    try:
        changed += write_course_notebook(grading_config.load(known_steps=step_modules()), dry_run=args.check)
    except ImportError:  # nbformat comes with the instructor extra
        print("solutions/mha.ipynb left as it is: pip install -e .[instructor] to regenerate it", file=sys.stderr)
    for path in changed:
        print(f"{'out of date' if args.check else 'wrote'}: {path.relative_to(KIT)}")
    if args.check and changed:
        print("run `python -m autograder skeleton` to regenerate", file=sys.stderr)
        return 1
    return 0


def run_fingerprints(args):
    import json

    from . import fingerprints

    fresh = json.loads(json.dumps(fingerprints.generate()))  # as it reads back from the file
    if args.check:
        current = fingerprints.load()
        if fingerprints.same(current, fresh):
            return 0
        print("out of date: autograder/fingerprints.json; run `python -m autograder fingerprints`", file=sys.stderr)
        return 1
    fingerprints.write(fresh)
    print(f"wrote {fingerprints.PATH.relative_to(KIT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
