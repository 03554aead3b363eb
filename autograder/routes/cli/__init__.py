"""Command line: `python -m autograder grade [PATH ...]` and the instructor's commands.

    grade                  grade assignments/ with the public and hidden checks
    grade PATH --json F    grade one submission (a directory holding e.g. mha/), write JSON to F
    grade P1 P2 --out DIR  grade a batch in parallel: DIR/<name>.json for each and DIR/grades.csv
    grade ... --shard K/N  grade only shard K of N of the batch (a stable split, for many machines)
    grade --class-list F --out DIR   a batch of the submissions a frozen class list names
    class-list PATHS...    print a frozen class list of PATHS (one absolute path a line)
    merge D1 D2 --out DIR  merge batch out directories into one (JSONs and one grades.csv), if complete
    report D1 [D2] --html F  a class report (misconceptions, per step, similarity) as HTML / JSON
    skeleton [--check]     regenerate assignments/<id>/ and solutions/<id>.ipynb from solutions/<id>/
    fingerprints [--check] regenerate each assignment's fingerprints.json (the release's diagnosis)
    generate [--check]     every generated file: message templates and compiled catalogs,
                           fingerprints, skeletons (engine/generate/generated.py)
    nbgrader COURSE_DIR    write an nbgrader course: nbgrader_config.py, source/<id>/<id>.ipynb
    nbgrader-sync COURSE_DIR  the grade of record of an nbgrader course: its submitted notebooks,
                           graded in the sandbox, into its gradebook (after nbgrader autograde)
    release DIR            write what students get; gradescope ZIP: a Gradescope autograder
    secret                 make this course's secret (the hidden checks' inputs) once; say where
    doctor                 check the grading machine's sandbox layer by layer (GPU or not)

Which assignment of grading.yml a submission is graded as: --assignment, else the one whose
package the submission holds. Student code runs in sandboxed worker processes
(autograder/sandbox/) unless --in-process.

This package is the parser, then a table of commands (COMMANDS): each command is a module of
it with `run(args)`, which reads the options, calls the engine or publish/, and prints. Only the
command that runs is imported (command_module), after grading.yml is checked.
"""

import argparse
import importlib
import sys
from pathlib import Path

from autograder import KIT
from autograder.engine.checks import messages
from autograder.engine.course.config import ConfigError, precheck
from autograder.engine.course.secret import SecretError

PLOTS_DEFAULT = Path("plots")  # --plots without DIR (a batch: OUT/pictures/)
# The languages of a student file's texts, the default first (engine/generate/skeleton.LANGUAGES;
# not imported here: not at the start of `python -m autograder`).
LANGUAGES = ("ko", "en")


# What the student release leaves out of this command line: the instructor's commands, and the
# grade options that need the instructor's kit (a batch, its shards, Gradescope's results).
INSTRUCTOR_COMMANDS = (
    "release",
    "gradescope",
    "nbgrader",
    "nbgrader-sync",
    "skeleton",
    "fingerprints",
    "generate",
    "merge",
    "report",
    "student-notebook",
    "doctor",
    "class-list",
    "secret",
    "adjust",
    "history",
    "lms-import",
    "lms-export",
)
INSTRUCTOR_GRADE_OPTIONS = ("--out", "--shard", "--gradescope", "--class-list", "--omit-output", "--times")


def student_kit() -> bool:
    """True in a student release: it ships the grader without the instructor's routes."""
    return not (KIT / "autograder" / "publish" / "release.py").is_file()


def instructor_only(argv: list):
    """The instructor's command (or `grade` option) that `argv` asks for, or None."""
    words = [word for word in argv if not word.startswith("-")]
    if words and words[0] in INSTRUCTOR_COMMANDS:
        return words[0]
    if words and words[0] == "grade":
        for word in argv:
            option = word.split("=", 1)[0]
            for full in INSTRUCTOR_GRADE_OPTIONS:  # argparse also takes a prefix (--grades)
                if len(option) > 2 and option.startswith("--") and full.startswith(option):
                    return f"grade {full}"
    return None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if student_kit() and instructor_only(argv):
        print(messages.render("student_kit_command", command=instructor_only(argv)), file=sys.stderr)
        return 2
    args = command_line().parse_args(argv)
    args.argv = argv  # a batch records the command that runs it again (its manifest)
    try:
        precheck(getattr(args, "config", None))  # before any process starts or torch loads
        return run(args)
    except (ConfigError, SecretError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def command_line() -> argparse.ArgumentParser:
    """The parser of every command and option (tests/test_day_one.py reads its paths)."""
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    grade = commands.add_parser("grade", help="grade submissions (directories that hold an assignment's package)")
    grade.add_argument("paths", nargs="*", type=Path, help="submissions (default: assignments/)")
    grade.add_argument("--json", type=Path, help="write the result of one submission as JSON")
    grade.add_argument("--out", type=Path, help="batch: write DIR/<name>.json and DIR/grades.csv")
    grade.add_argument("--config", type=Path, help="grading.yml to use (default: the kit's)")
    grade.add_argument(
        "--assignment", help="the assignment of grading.yml to grade as (default: found from the submission)"
    )
    grade.add_argument(
        "--reference",
        type=Path,
        default=None if student_kit() else KIT / "solutions",
        help="directory holding the reference package (default: solutions/; none in the student kit)",
    )
    grade.add_argument("--public-only", action="store_true", help="skip the hidden checks")
    grade.add_argument(
        "--seed",
        type=int,
        help="seed for the hidden checks (default: grading.yml's defaults.seed, else one made from the assignment id)",
    )
    grade.add_argument(
        "--workers", type=int, help="batch: submissions graded at once (default: cores; --in-process: 1)"
    )
    grade.add_argument(
        "--plots",
        type=Path,
        metavar="DIR",
        nargs="?",
        const=PLOTS_DEFAULT,
        help="where attention fails, save pictures of your weights next to the expected ones in DIR "
        "(default plots/; batch: DIR/<id>/, by default OUT/pictures/<id>/, which the report shows)",
    )
    grade.add_argument("--force", action="store_true", help="batch: grade again what --out already has")
    grade.add_argument("--shard", metavar="K/N", help="batch: grade only shard K of N (stable split by submission id)")
    grade.add_argument(
        "--class-list",
        type=Path,
        metavar="FILE",
        help="batch: grade the submissions FILE lists, one path a line (written once, e.g. by "
        "`python -m autograder class-list submissions/* > FILE`, so every shard grades the same class)",
    )
    grade.add_argument(
        "--omit-output",
        action="store_true",
        help="batch: leave what the student's code printed out of the JSONs (results that travel, e.g. CI artifacts)",
    )
    grade.add_argument(
        "--times",
        metavar="FILE|git",
        help="batch: when each was handed in, for grading.yml's late policy: a CSV with the columns "
        "submission,submitted_at (the instructor's, trusted), or `git` (each repository's head commit: "
        "its date is the student's to write)",
    )
    grade.add_argument(
        "--in-process",
        action="store_true",
        help="run student code in this process (no sandbox: only for code you trust)",
    )

    grade.add_argument(
        "--lang",
        choices=["en", "ko"],
        help="language of the messages, the table and the JSON's messages "
        "(default: MHA_LAB_LANG, else the locale, else en)",
    )
    grade.add_argument(
        "--gradescope",
        type=Path,
        metavar="RESULTS_JSON",
        help="write Gradescope's results.json (the submission may be the step files themselves)",
    )

    release = commands.add_parser("release", help="write what students get (no reference, no hidden checks)")
    release.add_argument("out", type=Path, help="a directory that does not exist yet")
    release.add_argument(
        "--classroom",
        choices=["command", "fractional", "private"],
        default="command",
        help="GitHub Classroom workflow (feedback on every push): all-or-nothing per step, or fractional "
        "scores ('private' is gone: see docs/classroom.md)",
    )
    release.add_argument("--assignment", help="release only this assignment (default: every one in grading.yml)")
    release.add_argument(
        "--lang",
        choices=LANGUAGES,
        help="the one language of the skeletons' docstrings and TODOs (default: assignments/ as it is, ko)",
    )
    gradescope = commands.add_parser("gradescope", help="write a Gradescope autograder zip")
    gradescope.add_argument("out", type=Path, help="the zip file to write")
    gradescope.add_argument("--assignment", help="the assignment it grades (default: the first in grading.yml)")

    nbgrader = commands.add_parser("nbgrader", help="write an nbgrader course (config and source notebook)")
    nbgrader.add_argument("course_dir", type=Path, help="the course directory (created if needed)")
    sync = commands.add_parser(
        "nbgrader-sync",
        help="grade an nbgrader course's submitted notebooks in the sandbox and write the scores into its gradebook",
    )
    sync.add_argument("course_dir", type=Path, help="the course directory (where nbgrader_config.py is)")
    sync.add_argument("--assignment", help="only this assignment (default: every one of grading.yml in the gradebook)")
    sync.add_argument("--workers", type=int, help="submissions graded at once (default: cores)")
    sync.add_argument(
        "--force", action="store_true", help="grade every submission again (after a change of grading.yml or the kit)"
    )
    sync.add_argument(
        "--lang", choices=["en", "ko"], help="language of what the check cells get (default: MHA_LAB_LANG, the locale)"
    )

    skeleton = commands.add_parser(
        "skeleton", help="regenerate assignments/<id>/ and solutions/<id>.ipynb from solutions/<id>/"
    )
    skeleton.add_argument("--check", action="store_true", help="only report whether they are up to date")
    skeleton.add_argument(
        "--lang",
        choices=LANGUAGES,
        default=LANGUAGES[0],
        help=f"the one language of the skeletons' docstrings and TODOs (default: {LANGUAGES[0]})",
    )

    fingerprints = commands.add_parser(
        "fingerprints", help="regenerate each assignment's fingerprints.json: the known mistakes on the public checks"
    )
    fingerprints.add_argument("--check", action="store_true", help="only report whether it is up to date")

    generate = commands.add_parser(
        "generate", help="write every generated file: catalog templates, compiled catalogs, fingerprints, skeletons"
    )
    generate.add_argument("--check", action="store_true", help="only report what is out of date")

    merge = commands.add_parser("merge", help="merge batch out directories (e.g. shards) into one")
    merge.add_argument("dirs", nargs="+", type=Path, help="out directories of grade --out")
    merge.add_argument("--out", type=Path, required=True, help="the merged directory")
    merge.add_argument(
        "--allow-missing",
        action="store_true",
        help="write what there is even where submissions of the class have no result (empty rows)",
    )
    class_list = commands.add_parser(
        "class-list", help="print a frozen class list (one absolute path a line) for grade --class-list"
    )
    class_list.add_argument("paths", nargs="+", type=Path, help="the submissions (e.g. submissions/*)")
    report = commands.add_parser("report", help="class report from batch out directories")
    report.add_argument("dirs", nargs="+", type=Path, help="out directories of grade --out")
    report.add_argument("--html", type=Path, help="write the self-contained HTML report here")
    report.add_argument("--json", type=Path, help="write the report's data as JSON here")
    report.add_argument("--lang", choices=["en", "ko"], default="en", help="language of the report")
    report.add_argument("--threshold", type=float, default=0.6, help="similarity above which a pair is listed")
    report.add_argument("--assignment", help="the assignment of grading.yml the results are of (default: from them)")

    notebook = commands.add_parser(
        "student-notebook", help="write the students' notebook of an assignment (Jupyter, Colab): public checks only"
    )
    notebook.add_argument("out", type=Path, help="the .ipynb to write")
    notebook.add_argument("--assignment", help="the assignment (default: the first in grading.yml)")

    adjust = commands.add_parser(
        "adjust", help="add or subtract points for one submission of a --out folder, with a comment"
    )
    adjust.add_argument("out", type=Path, help="the folder of grade --out")
    adjust.add_argument("submission", help="the submission's id (its row in grades.csv)")
    adjust.add_argument("points", type=float, help="points to add (negative: to subtract)")
    adjust.add_argument("comment", help="why (shown in the JSON, grades.csv, the report and exports)")
    adjust.add_argument("--step", help="the step it counts in (kept within the step's maximum); default: the total")
    adjust.add_argument("--config", type=Path, help="grading.yml to use (default: the kit's)")
    history = commands.add_parser("history", help="every grading of submissions in a --out folder: who, when, score")
    history.add_argument("out", type=Path, help="the folder of grade --out")
    history.add_argument("submissions", nargs="*", help="ids (default: all)")

    lms_import = commands.add_parser(
        "lms-import", help="an LMS's bulk download (Canvas submissions.zip, Moodle's) into a folder per student"
    )
    lms_import.add_argument("lms", choices=["canvas", "moodle"])
    lms_import.add_argument("download", type=Path, help="the download: its zip, or the folder it was unzipped to")
    lms_import.add_argument("--out", type=Path, required=True, help="where each student's folder goes (and lms.csv)")
    lms_import.add_argument(
        "--roster", type=Path, help="CSV: id,name,email[,canvas_id][,moodle_id] (or Canvas's export)"
    )
    lms_import.add_argument(
        "--worksheet", type=Path, help="moodle: its grading worksheet (in English), for each submission's time"
    )
    lms_import.add_argument(
        "--timezone", help="moodle: the course's time zone the worksheet's times are in (e.g. Asia/Seoul)"
    )
    lms_export = commands.add_parser("lms-export", help="a --out folder's grades as the LMS's gradebook import CSV")
    lms_export.add_argument("lms", choices=["canvas", "moodle"])
    lms_export.add_argument("grades", type=Path, help="the folder of grade --out")
    lms_export.add_argument("--roster", type=Path, required=True, help="the roster the ids come from")
    lms_export.add_argument("--out", type=Path, required=True, help="the CSV to write")
    lms_export.add_argument(
        "--column", help="Canvas: the assignment's column, as Canvas names it: 'Title (assignment id)'"
    )

    commands.add_parser("doctor", help="check this machine's sandbox, layer by layer (GPU or not): run it first")
    commands.add_parser(
        "secret",
        help="make this course's secret (what the hidden checks' inputs are drawn from) if it has none; "
        "say where it is (never what)",
    )
    return parser


# Each command's module of this package (its `run(args)`), imported only when the command runs.
COMMANDS = {
    "grade": "grade",
    "class-list": "class_list",
    "merge": "report",
    "report": "report",
    "release": "release",
    "gradescope": "release",
    "secret": "release",
    "nbgrader": "notebooks",
    "student-notebook": "notebooks",
    "nbgrader-sync": "nbgrader_sync",
    "skeleton": "make",
    "fingerprints": "make",
    "generate": "make",
    "adjust": "gradebook",
    "history": "gradebook",
    "lms-import": "gradebook",
    "lms-export": "gradebook",
    "doctor": "doctor",
}
SPEAKING = ("grade", "nbgrader-sync")  # commands whose --lang is the language of what they print


def command_module(command: str):
    """The module that runs `command` (COMMANDS): the one lazy import of the command line."""
    return importlib.import_module(f"{__name__}.{COMMANDS[command]}")


def run(args):
    module = command_module(args.command)
    if args.command in SPEAKING:
        with messages.speaking(args.lang):  # this process and a batch's processes (MHA_LAB_LANG)
            return module.run(args)
    return module.run(args)
