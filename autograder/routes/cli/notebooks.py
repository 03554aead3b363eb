"""`python -m autograder nbgrader COURSE_DIR` and `student-notebook OUT`: the nbgrader course and the
self-contained student notebook (publish/ writes them).
"""

import sys

from autograder.engine.course import config as grading_config
from autograder.engine.judge import result_files
from autograder.publish.nbgrader_course import notebook_text, write_course
from autograder.publish.student_notebook import student_notebook
from autograder.routes.cli.release import which_assignment


def run(args):
    if args.command == "nbgrader":
        return run_nbgrader(args)
    return run_student_notebook(args)


def run_nbgrader(args):
    try:
        written = write_course(args.course_dir, grading_config.load_all())
    except FileExistsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    print(f"next: cd {args.course_dir} && nbgrader generate_assignment {written[1].parent.name} --create")
    return 0


def run_student_notebook(args):
    try:
        config = grading_config.load(assignment=args.assignment)
    except grading_config.ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:  # whole or not at all, its folder made where it is missing
        result_files.write_atomically(args.out, notebook_text(student_notebook(config)), sync=False)
    except result_files.WriteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.out} ({which_assignment(args.assignment)})")
    return 0
