"""`python -m autograder grade`: one submission, a batch (--out), a shard, a class list, Gradescope's
results.json. The engine does the work; this module reads the options and prints.
"""

import sys
import warnings

from autograder import KIT
from autograder.engine.checks import messages
from autograder.engine.judge import result_files, table
from autograder.engine.judge.grades_csv import tampering_summary
from autograder.engine.judge.request import Request, RequestError
from autograder.publish.plots import pictures_for
from autograder.routes.cli import PLOTS_DEFAULT, student_kit

# The student kit ships this module without engine/operations/ nor publish/gradescope.py: what
# only the instructor's options use is imported where they are used (`# instructor's:`).


NO_SECRET = (
    "warning: this course has no secret: the hidden checks draw their inputs from a checksum of the "
    "assignment id, which anyone with the kit can compute. Make one once with `python -m autograder "
    "secret` (`release` makes one too), keep it, and copy it to every machine that grades this course "
    "(docs/instructors.md, 'Hidden inputs')"
)


def run(args):
    shard = None
    if args.shard:
        from autograder.engine.operations.shard import ShardError, parse_shard  # instructor's: --shard

        try:
            shard = parse_shard(args.shard)
        except ShardError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        if not args.out:
            print("error: --shard needs --out DIR", file=sys.stderr)
            return 2
    if args.class_list is not None:
        from autograder.engine.operations.shard import ShardError, read_class_list  # instructor's: --class-list

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
    request = Request(
        paths=paths,
        config=args.config,
        assignment=args.assignment,
        reference=args.reference,
        public_only=args.public_only,
        seed=args.seed,
        isolate=not args.in_process,
    )
    graded = request.load()
    from autograder.engine.judge.runner import grade  # late: torch, once the worker server imports its own

    chosen, found = request.assignments(graded)
    try:
        if args.out or args.json or args.gradescope:  # one result
            request.one_assignment(chosen)
    except RequestError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not args.assignment and (args.out or len(graded) > 1):
        print(
            f"assignment: {', '.join(c.id for c in chosen)} "
            + ("(found in " + str(paths[0]) + ")" if found else f"(the first of {len(graded)} in grading.yml)")
            + "; --assignment ID to choose",
            file=sys.stderr,
        )
    try:
        request.check_reference(chosen)
    except RequestError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    reference, isolate = request.hidden_reference, request.isolate
    seed, source = request.hidden_seed(chosen[0])
    if reference is not None and source == "public":
        print(NO_SECRET, file=sys.stderr)
    warnings.simplefilter("ignore")  # warnings from torch or student code never reach our stderr
    if args.out:
        from autograder.engine.operations import gradebook  # not in the student kit (instructor_only)
        from autograder.engine.operations.batch import (
            BatchBusy,
            grade_batch,
        )  # not in the student kit (instructor_only)

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
        except result_files.WriteError as error:
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
            from autograder.engine.operations.kit_files import kit_files  # instructor's: not in the student kit

            result.kit_files = kit_files(paths[0], config.package)
        print(("\n" if number else "") + table.table(result))
        if tampering_summary(result.kit_files):
            print(f"\ntampering: {tampering_summary(result.kit_files)} (kit files against the release)")
        if result.output:
            print("\n" + messages.render("printed_output") + "\n" + result.output)
        if args.json:
            try:
                result_files.write_json(result, args.json)
            except result_files.WriteError as error:
                print(f"error: {error}", file=sys.stderr)
                return 1
    return 0


def resume_seed(args):
    """A batch resumed into an --out that has a manifest keeps its seed: --seed left out takes
    it, and a different --seed is refused (the hidden checks' inputs would differ within one
    class). Returns an exit code, or None."""
    from autograder.engine.operations.shard import ShardError, read_manifest  # instructor's: --out

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


def run_gradescope(upload, config, reference, seed, isolate, results_path):
    """Grade a Gradescope upload and write its results.json (and the table, for the log)."""
    import json
    import time

    from autograder.engine.judge.runner import grade  # late: torch, once the worker server imports its own
    from autograder.publish.gradescope import gradescope_results, pad_run  # instructor's: --gradescope

    started = time.monotonic()
    result = grade(upload, config, reference=reference, seed=seed, isolate=isolate)
    print(table.table(result))
    if result.hidden_output:  # the log only (stdout_visibility: hidden): it may show hidden inputs
        print(f"\n{messages.render('your_output_hidden')}\n{result.hidden_output}")
    data = gradescope_results(result, time.monotonic() - started)
    if reference is not None:  # hidden checks ran: their duration is not the student's to measure
        pad_run(started)
    try:
        result_files.write_atomically(results_path, json.dumps(data, indent=2) + "\n")
    except result_files.WriteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0
