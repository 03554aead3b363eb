"""`python -m autograder skeleton`, `fingerprints` and `generate` [--check]: the files made from their
sources (engine/generate/), written or checked.
"""

import json
import sys

from autograder import KIT
from autograder.engine.course import config as grading_config
from autograder.engine.generate import fingerprint_build, generated
from autograder.engine.generate.skeleton import DEFAULT_LANGUAGE, write_skeletons
from autograder.engine.mistakes import fingerprints
from autograder.publish.nbgrader_course import write_course_notebook


def run(args):
    if args.command == "fingerprints":
        return run_fingerprints(args)
    if args.command == "skeleton":
        return run_skeleton(args)
    return run_generate(args)


def run_skeleton(args):
    changed = []
    for config in grading_config.load_all():
        changed += write_skeletons(
            KIT / "solutions" / config.package,
            KIT / "assignments" / config.package,
            dry_run=args.check,
            lang=getattr(args, "lang", DEFAULT_LANGUAGE),  # `generate` writes what `skeleton` does by default
        )
        try:
            changed += write_course_notebook(config, dry_run=args.check)
        except ImportError:  # nbformat comes with the instructor extra
            print(
                f"solutions/{config.package}.ipynb left as it is: pip install -e .[instructor] to regenerate it",
                file=sys.stderr,
            )
    for path in changed:
        print(f"{'out of date' if args.check else 'wrote'}: {path.relative_to(KIT)}")
    if args.check and changed:
        print("run `python -m autograder skeleton` to regenerate", file=sys.stderr)
        return 1
    if not changed and args.command == "skeleton":  # `generate` says so for all it makes
        print("skeletons up to date: assignments/ and solutions/*.ipynb match solutions/ (nothing written)")
    return 0


def run_fingerprints(args):
    stale = []
    for config in grading_config.load_all():
        fresh = json.loads(json.dumps(fingerprint_build.generate(config)))  # as it reads back from the file
        path = fingerprints.path_of(config.id)
        if fingerprints.same(fingerprints.load(config.id), fresh):  # BLAS's last bits are no change
            print(f"up to date: {path.relative_to(KIT)} (nothing written)")
        elif args.check:
            stale.append(path)
        else:
            fingerprints.write(fresh, path)
            print(f"wrote {path.relative_to(KIT)}")
    for path in stale:
        print(f"out of date: {path.relative_to(KIT)}; run `python -m autograder fingerprints`", file=sys.stderr)
    return 1 if stale else 0


def run_generate(args):
    """Every generated file from its sources (engine/generate/generated.py), then the skeletons."""
    changed = generated.stale() if args.check else generated.generate()
    for path in changed:
        print(f"{'out of date' if args.check else 'wrote'}: {path}")
    if not changed:
        print("generated files up to date (nothing written)")
    skeleton_status = run_skeleton(args)
    if args.check and changed:
        print("run `python -m autograder generate` to regenerate", file=sys.stderr)
        return 1
    return skeleton_status
