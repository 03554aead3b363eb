"""`python -m autograder release DIR`, `gradescope ZIP` and `secret`: what leaves the instructor's kit
(publish/), and the course secret the hidden checks draw from, made once and never shown.
"""

import sys

from autograder.engine.course import config as grading_config
from autograder.engine.course import secret as course_secret
from autograder.engine.course.secret import source
from autograder.publish.gradescope import gradescope_zip
from autograder.publish.release import release as write_release

PRIVATE_GONE = (
    "error: --classroom private is gone. It gave a token that reads the private kit (the reference, the "
    "hidden checks) to a workflow in each student's repository, and a student who can push can change what "
    "that workflow runs: print the kit, write any result. No workflow a student can edit is given a secret. "
    "For the grade of record, collect the repositories (`gh classroom clone student-repos`) and grade them "
    "here: `python -m autograder grade <repositories> --out grades` (docs/classroom.md)"
)


def run(args):
    if args.command == "secret":
        note = course_secret_note()
        print(note or f"this course's secret is set: {source()} (nothing changed)")
        return 0
    if args.command == "release" and args.out.exists():
        print(f"error: {args.out} already exists", file=sys.stderr)
        return 2
    if args.command == "release" and args.classroom == "private":
        print(PRIVATE_GONE, file=sys.stderr)
        return 2
    note = course_secret_note()  # before the zip: it carries the secret
    written = (
        write_release(args.out, args.classroom, args.assignment, lang=args.lang)
        if args.command == "release"
        else gradescope_zip(args.out, args.assignment)
    )
    print(f"wrote {written} ({which_assignment(args.assignment, every=args.command == 'release')})")
    if note:
        print(note, file=sys.stderr)
    return 0


def course_secret_note() -> str:
    """Make the course secret where there is none (`release`, `gradescope`, `secret`); what to
    tell the instructor about it (never the secret): that it was made, where, and what to do with
    it; that grading.yml's `defaults.seed` overrides it; that its file is not private."""
    notes = []
    try:
        _, made = course_secret.ensure_secret()
    except OSError as error:  # the release itself can still be made: say what is missing
        made = False
        notes.append(
            f"warning: no course secret could be made in {course_secret.course_dir()} ({error.strerror or error}): "
            "the hidden checks' inputs stay the public ones. Make it where you can write (MHA_LAB_COURSE_DIR), "
            "or set MHA_LAB_COURSE_SECRET"
        )
    if made:
        notes.append(
            f"made this course's secret, {course_secret.source()}: the hidden checks draw their inputs from it. "
            "Keep it private (it is git-ignored) and back it up; copy it to every machine that grades this course "
            "(or set MHA_LAB_COURSE_SECRET there): without it, they draw other inputs"
        )
    if any(config.seed is not None for config in grading_config.load_all()):
        notes.append(
            "warning: grading.yml sets defaults.seed: the hidden checks draw their inputs from that number, not "
            "from the course secret, so anyone who reads this grading.yml can compute them. It is left out of "
            "what students get; remove it to use the course secret"
        )
    exposed = course_secret.exposure()
    if exposed:
        notes.append(f"warning: the course secret's file is not private: {exposed} (chmod 600 it, 700 its folder)")
    return "\n".join(notes)


def which_assignment(chosen, every=False) -> str:
    """Which assignment of grading.yml a command took, in words: the one `chosen`, else the first
    (or, where `every`, all of them), with how to choose another."""
    ids = [config.id for config in grading_config.load_all()]
    if chosen:
        return f"assignment {chosen}"
    if every:
        return f"assignments {', '.join(ids)}" + ("; --assignment ID for one" if len(ids) > 1 else "")
    if len(ids) == 1:
        return f"assignment {ids[0]}"
    return f"assignment {ids[0]}, the first of {len(ids)} in grading.yml; --assignment ID for another ({', '.join(ids[1:])})"
