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

One module, though long: each subcommand is one `run_*` function after the argument parser (the
commands are listed above); the work is done in the modules they call.
"""

import argparse
import sys
import warnings
from pathlib import Path

from autograder import KIT
from autograder.engine.checks import messages
from autograder.engine.judge import results
from autograder.engine.judge.grades_csv import tampering_summary

PLOTS_DEFAULT = Path("plots")  # --plots without DIR (a batch: OUT/pictures/)
# The languages of a student file's texts (engine/generate/skeleton.LANGUAGES; not imported here:
# not at the start of `python -m autograder`).
LANGUAGES = ("ko", "en")
LANG_HELP = "the one language of the student files' docstrings and TODOs (default: both, as solutions/ has them)"
PRIVATE_GONE = (
    "error: --classroom private is gone. It gave a token that reads the private kit (the reference, the "
    "hidden checks) to a workflow in each student's repository, and a student who can push can change what "
    "that workflow runs: print the kit, write any result. No workflow a student can edit is given a secret. "
    "For the grade of record, collect the repositories (`gh classroom clone student-repos`) and grade them "
    "here: `python -m autograder grade <repositories> --out grades` (docs/classroom.md)"
)
NO_SECRET = (
    "warning: this course has no secret: the hidden checks draw their inputs from a checksum of the "
    "assignment id, which anyone with the kit can compute. Make one once with `python -m autograder "
    "secret` (`release` makes one too), keep it, and copy it to every machine that grades this course "
    "(docs/instructors.md, 'Hidden inputs')"
)


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
    from autograder.engine.course.config import (
        ConfigError,
        precheck,
    )  # late: not at the start of `python -m autograder`

    from autograder.engine.course.secret import SecretError  # late: not at the start of `python -m autograder`

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
    release.add_argument("--lang", choices=LANGUAGES, help=LANG_HELP)
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
    skeleton.add_argument("--lang", choices=LANGUAGES, help=LANG_HELP)

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


def run(args):
    if args.command == "doctor":
        from autograder.routes.doctor import run as run_doctor  # late: not at the start of `python -m autograder`

        return run_doctor(args)
    if args.command in ("adjust", "history", "lms-import", "lms-export"):
        from autograder.routes import gradebook  # late: not at the start of `python -m autograder`

        return gradebook.run(args)
    if args.command == "class-list":
        return run_class_list(args)
    if args.command == "student-notebook":
        return run_student_notebook(args)
    if args.command in ("merge", "report"):
        from autograder.routes.report.cli import (
            run as run_report_command,
        )  # late: not at the start of `python -m autograder`

        return run_report_command(args)
    if args.command == "fingerprints":
        return run_fingerprints(args)
    if args.command == "skeleton":
        return run_skeleton(args)
    if args.command == "generate":
        return run_generate(args)
    if args.command == "nbgrader":
        return run_nbgrader(args)
    if args.command == "nbgrader-sync":
        from autograder.routes.nbgrader_sync import run as run_sync  # late: not at the start of `python -m autograder`

        with messages.speaking(args.lang):
            return run_sync(args)
    if args.command in ("release", "gradescope"):
        from autograder.publish.gradescope import gradescope_zip  # late: not at the start of `python -m autograder`
        from autograder.publish.release import (
            release as write_release,
        )  # late: not at the start of `python -m autograder`

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
    if args.command == "secret":
        from autograder.engine.course.secret import source  # late: not at the start of `python -m autograder`

        note = course_secret_note()
        print(note or f"this course's secret is set: {source()} (nothing changed)")
        return 0
    with messages.speaking(args.lang):  # this process and the batch's processes (MHA_LAB_LANG)
        return run_grade(args)


def course_secret_note() -> str:
    """Make the course secret where there is none (`release`, `gradescope`, `secret`); what to
    tell the instructor about it (never the secret): that it was made, where, and what to do with
    it; that grading.yml's `defaults.seed` overrides it; that its file is not private."""
    from autograder.engine.course import config as grading_config  # late: not at the start of `python -m autograder`
    from autograder.engine.course import secret as course_secret  # late: not at the start of `python -m autograder`

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


def run_student_notebook(args):
    from autograder.engine.course import config as grading_config  # late: not at the start of `python -m autograder`
    from autograder.publish.nbgrader_course import notebook_text  # late: not at the start of `python -m autograder`
    from autograder.publish.student_notebook import student_notebook  # late: not at the start of `python -m autograder`

    try:
        config = grading_config.load(assignment=args.assignment)
    except grading_config.ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:  # whole or not at all, its folder made where it is missing
        results.write_atomically(args.out, notebook_text(student_notebook(config)), sync=False)
    except results.WriteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.out} ({which_assignment(args.assignment)})")
    return 0


def which_assignment(chosen, every=False) -> str:
    """Which assignment of grading.yml a command took, in words: the one `chosen`, else the first
    (or, where `every`, all of them), with how to choose another."""
    from autograder.engine.course import config as grading_config  # late: not at the start of `python -m autograder`

    ids = [config.id for config in grading_config.load_all()]
    if chosen:
        return f"assignment {chosen}"
    if every:
        return f"assignments {', '.join(ids)}" + ("; --assignment ID for one" if len(ids) > 1 else "")
    if len(ids) == 1:
        return f"assignment {ids[0]}"
    return f"assignment {ids[0]}, the first of {len(ids)} in grading.yml; --assignment ID for another ({', '.join(ids[1:])})"


def run_grade(args):
    shard = None
    if args.shard:
        from autograder.engine.operations.shard import (
            ShardError,
            parse_shard,
        )  # late: not at the start of `python -m autograder`

        try:
            shard = parse_shard(args.shard)
        except ShardError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        if not args.out:
            print("error: --shard needs --out DIR", file=sys.stderr)
            return 2
    if args.class_list is not None:
        from autograder.engine.operations.shard import (
            ShardError,
            read_class_list,
        )  # late: not at the start of `python -m autograder`

        if args.paths or not args.out:
            print("error: --class-list FILE takes the place of the paths, and needs --out DIR", file=sys.stderr)
            return 2
        try:
            args.paths = read_class_list(args.class_list)
        except ShardError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    if args.out and not args.force:
        code = resume_seed(args)
        if code:
            return code
    paths = args.paths or [KIT / "assignments"]
    if args.times and not args.out:
        print("error: --times is for a batch's gradebook: it needs --out DIR", file=sys.stderr)
        return 2
    if len(paths) > 1 and not args.out:
        print("error: several submissions need --out DIR (one JSON each and grades.csv)", file=sys.stderr)
        return 2
    from autograder.engine.course import config as grading_config  # late: not at the start of `python -m autograder`

    # All of grading.yml (check ids, forbidden names: torch loads) is validated before the worker
    # server starts, unless this very file passed that on this machine before: then the server's
    # torch import overlaps ours, and a failure still ends the command with exit 2.
    early = not args.in_process and grading_config.validated_before(args.config)
    if not args.in_process:
        from autograder.sandbox import kit_view  # late: not at the start of `python -m autograder`

        from autograder.engine.course.secret import course_dir  # late: not at the start of `python -m autograder`

        # a reference, configuration or course folder (the secret) kept outside the kit: closed to the workers too
        kit_view.SECRET_PATHS.update(str(p) for p in (args.reference, args.config, course_dir()) if p)
    if early:
        from autograder.sandbox import fork_server  # late: not at the start of `python -m autograder`

        fork_server.start("autograder.harness.serve")  # it imports its torch while this process goes on
    graded = grading_config.load_all(args.config)
    if not early:  # an early start means the file is remembered already
        grading_config.remember_valid(args.config)
    if not args.in_process and not early:
        from autograder.sandbox import fork_server  # late: not at the start of `python -m autograder`

        fork_server.start("autograder.harness.serve")
    from autograder.engine.judge.plan import seed_source  # late: not at the start of `python -m autograder`
    from autograder.engine.judge.runner import grade  # late: not at the start of `python -m autograder`

    if args.assignment:
        chosen = [grading_config.choose(graded, args.assignment, args.config or grading_config.default_path())]
    else:
        chosen = grading_config.found_in(graded, paths[0]) or graded[:1]
    if len(chosen) > 1 and (args.out or args.json or args.gradescope):
        print(
            f"error: {paths[0]} holds several assignments ({', '.join(c.id for c in chosen)}): "
            "choose one with --assignment",
            file=sys.stderr,
        )
        return 2
    if not args.assignment and (args.out or len(graded) > 1):
        found = grading_config.found_in(graded, paths[0])
        print(
            f"assignment: {', '.join(c.id for c in chosen)} "
            + ("(found in " + str(paths[0]) + ")" if found else f"(the first of {len(graded)} in grading.yml)")
            + "; --assignment ID to choose",
            file=sys.stderr,
        )
    reference = None if args.public_only else args.reference
    for config in chosen:
        if reference is not None and not (Path(reference) / config.package).is_dir():
            print(
                f"error: no reference {config.package}/ in {reference} (use --public-only without one)", file=sys.stderr
            )
            return 2
    isolate = not args.in_process
    seed, source = (args.seed, "--seed") if args.seed is not None else seed_source(chosen[0])
    if reference is not None and source == "public":
        print(NO_SECRET, file=sys.stderr)
    warnings.simplefilter("ignore")  # warnings from torch or student code never reach our stderr
    from autograder.publish.plots import pictures_for  # late: not at the start of `python -m autograder`

    if args.out:
        from autograder.engine.operations.batch import (
            BatchBusy,
            grade_batch,
        )  # not in the student kit (instructor_only)

        from autograder.engine.operations import gradebook  # not in the student kit (instructor_only)

        plots = None if args.plots is None else args.out / "pictures" if args.plots is PLOTS_DEFAULT else args.plots
        try:
            times = args.times if args.times in (None, "git") else gradebook.read_times(args.times)
        except gradebook.GradebookError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        try:
            graded = grade_batch(
                paths,
                chosen[0],
                args.out,
                workers=args.workers,
                reference=reference,
                seed=seed,
                force=args.force,
                isolate=isolate,
                shard=shard,
                pictures=None if plots is None else lambda name: pictures_for(plots / name),
                command=rerun_words(args),
                class_list=args.class_list,
                omit_output=args.omit_output,
                times=times,
            )
        except results.WriteError as error:
            print(
                f"error: {error}. Every result written so far is whole and kept: make room (or fix the "
                "permissions) and run the same command again; it grades only what is missing",
                file=sys.stderr,
            )
            return 1
        except BatchBusy as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        except gradebook.GradebookError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        failed = [name for name, result in graded.items() if result is None]
        print(f"graded {len(graded) - len(failed)} submissions into {args.out}/ (grades.csv, one JSON each)")
        if failed:
            print(
                f"error: the grader failed on {len(failed)} submission(s): {', '.join(failed)}; "
                "run the same command again to grade them",
                file=sys.stderr,
            )
            return 1
        return 0
    if args.gradescope:
        return run_gradescope(paths[0], chosen[0], reference, seed, isolate, args.gradescope)
    for number, config in enumerate(chosen):
        result = grade(
            paths[0], config, reference=reference, seed=args.seed, isolate=isolate, pictures=pictures_for(args.plots)
        )
        if not student_kit():  # a repository made from a release: what became of its kit files
            from autograder.engine.operations.kit_files import (
                kit_files,
            )  # late: not at the start of `python -m autograder`

            result.kit_files = kit_files(paths[0], config.package)
        print(("\n" if number else "") + results.table(result))
        if tampering_summary(result.kit_files):
            print(f"\ntampering: {tampering_summary(result.kit_files)} (kit files against the release)")
        if result.output:
            print("\n" + messages.render("printed_output") + "\n" + result.output)
        if args.json:
            try:
                results.write_json(result, args.json)
            except results.WriteError as error:
                print(f"error: {error}", file=sys.stderr)
                return 1
    return 0


def resume_seed(args):
    """A batch resumed into an --out that has a manifest keeps its seed: --seed left out takes
    it, and a different --seed is refused (the hidden checks' inputs would differ within one
    class). Returns an exit code, or None."""
    from autograder.engine.operations.shard import (
        ShardError,
        read_manifest,
    )  # late: not at the start of `python -m autograder`

    try:
        manifest = read_manifest(args.out) if args.out.is_dir() else None
    except ShardError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if manifest is None or manifest.seed is None:
        return None
    if args.seed is None:
        args.seed = manifest.seed
    elif args.seed != manifest.seed:
        # not the manifest's seed in the message: a terminal's or a job's log is no place for it
        print(
            f"error: {args.out} was graded with another hidden-check seed than --seed {args.seed}: "
            "leave --seed out to resume it with its own (its manifest's), or grade it all again with --force",
            file=sys.stderr,
        )
        return 2
    return None


def rerun_words(args) -> list:
    """The command line that runs this batch again and resumes it: the one given, without
    --force. Not with the seed written out (it would show in every log that prints the
    command): a re-run into the same --out takes its manifest's (resume_seed), and a shard
    graded anew draws it from the course secret, as its siblings did (merge checks that)."""
    words = [word for word in args.argv if word != "--force"]
    return [sys.executable, "-m", "autograder", *words]


def run_class_list(args):
    from autograder.engine.operations.shard import (
        ShardError,
        class_list_text,
    )  # late: not at the start of `python -m autograder`

    missing = [str(path) for path in args.paths if not path.exists()]
    if missing:
        print(f"error: no such submission: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        sys.stdout.write(class_list_text(args.paths))
    except ShardError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{len(set(args.paths))} submissions", file=sys.stderr)
    return 0


def run_gradescope(upload, config, reference, seed, isolate, results_path):
    """Grade a Gradescope upload and write its results.json (and the table, for the log)."""
    import json
    import time

    from autograder.publish.gradescope import (
        gradescope_results,
        pad_run,
    )  # late: not at the start of `python -m autograder`
    from autograder.engine.judge.runner import grade  # late: not at the start of `python -m autograder`

    started = time.monotonic()
    result = grade(upload, config, reference=reference, seed=seed, isolate=isolate)
    print(results.table(result))
    if result.hidden_output:  # the log only (stdout_visibility: hidden): it may show hidden inputs
        print(f"\n{messages.render('your_output_hidden')}\n{result.hidden_output}")
    data = gradescope_results(result, time.monotonic() - started)
    if reference is not None:  # hidden checks ran: their duration is not the student's to measure
        pad_run(started)
    try:
        results.write_atomically(results_path, json.dumps(data, indent=2) + "\n")
    except results.WriteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def run_nbgrader(args):
    from autograder.engine.course import config as grading_config  # late: not at the start of `python -m autograder`
    from autograder.publish.nbgrader_course import write_course  # late: not at the start of `python -m autograder`

    try:
        written = write_course(args.course_dir, grading_config.load_all())
    except FileExistsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    print(f"next: cd {args.course_dir} && nbgrader generate_assignment {written[1].parent.name} --create")
    return 0


def run_skeleton(args):
    from autograder.engine.course import config as grading_config  # late: not at the start of `python -m autograder`
    from autograder.engine.generate.skeleton import write_skeletons  # late: not at the start of `python -m autograder`
    from autograder.publish.nbgrader_course import (
        write_course_notebook,
    )  # late: not at the start of `python -m autograder`

    changed = []
    for config in grading_config.load_all():
        changed += write_skeletons(
            KIT / "solutions" / config.package,
            KIT / "assignments" / config.package,
            dry_run=args.check,
            lang=getattr(args, "lang", None),  # `generate` writes what `skeleton` does by default
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
    import json

    from autograder.engine.course import config as grading_config  # late: not at the start of `python -m autograder`
    from autograder.engine.mistakes import fingerprints  # late: not at the start of `python -m autograder`
    from autograder.engine.generate.fingerprint_build import (
        generate,
    )  # late: not at the start of `python -m autograder`

    stale = []
    for config in grading_config.load_all():
        fresh = json.loads(json.dumps(generate(config)))  # as it reads back from the file
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
    from autograder.engine.generate import generated  # late: not at the start of `python -m autograder`

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


if __name__ == "__main__":
    sys.exit(main())
