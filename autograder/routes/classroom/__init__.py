"""GitHub Classroom: the step a release's workflow runs (publish/classroom_workflow.py writes
the workflow from grading.yml), and fractional per-step results.

Two ways to grade a step on every push (release option --classroom):

* "command" (default): one classroom-resources/autograding-command-grader step per graded step,
  running `python -m autograder.routes.classroom ID --pass-fail`; the step scores its points only if
  every check passes (that action is all-or-nothing, on the exit status).
* "fractional": one plain step per graded step running `python -m autograder.routes.classroom ID
  --output "$GITHUB_OUTPUT"`, which writes the command grader's result format itself (base64
  JSON, one test per check with its share of the points, in whole points: see reporter_result),
  so a step with 3 of 4 checks right earns about 3/4.

Either way student code runs in a worker process (sandboxed where the system allows), never in
the process that decides the grade: a student's print() goes to the log, not into the result, and
os._exit(0) ends only the worker (that check fails). The result is written to the file only
after grading. A step switched off in grading.yml (`mode: off`) is left out of the workflow.

Either way the classroom-resources/autograding-grading-reporter step sums the results. All of it
is feedback, and every step's log says so first: it runs in the student's repository, with the
workflow, grading.yml and grader there, which the student can change, and with the public checks
only. The grade of record is the instructor's: the repositories collected and graded with the
instructor's kit (`python -m autograder grade <repositories> --out DIR`, which also names any
kit file that differs from the release: operations/kit_files.py). No workflow here is given a
secret: a student who can push can change what a workflow runs (docs/classroom.md).

The entry point the generated workflow calls (`python -m autograder.routes.classroom`): main here,
the per-push cache in push_cache.py, the result format in publish/classroom_result.py.
"""

import argparse
import base64
import dataclasses
import json
import sys
from pathlib import Path

from autograder.engine.checks import messages
from autograder.publish.classroom_result import error_result, print_log, reporter_result, step_location
from autograder.publish.classroom_workflow import graded_steps, reporter_number
from autograder.routes.classroom.push_cache import (
    BLOCKING_LAYERS,
    cache_key,
    cache_trusted_here,
    nearest_config,
    read_cache,
    write_cache,
)


def grade_step(step_id, submission, config, isolate=True):
    """The GradeResult of one step (its public checks). Isolated by default: student code runs in
    a worker process, so its prints, its exit or a crash cannot reach this process or what it writes."""
    from autograder.engine.judge.runner import grade  # late: not at the start of a Classroom step

    return grade(submission, config, steps=[step_id], isolate=isolate)


def grade_every_step(args, shallow) -> tuple:
    """Grade the submission once, every step: ({step id: {"log", "result"}}, whether it may be
    kept: graded in a sandbox that keeps workers off the cache). A grader failure is an error
    result for each step (never kept)."""
    import contextlib
    import io

    from autograder.engine.course.config import load  # late: not at the start of a Classroom step
    from autograder.engine.judge.runner import grade  # late: not at the start of a Classroom step

    config = load(args.config_path, assignment=shallow.id)
    steps, first = {}, graded_steps(config)[0].id if graded_steps(config) else None
    try:
        graded = grade(args.path, config, isolate=not args.in_process)
    except Exception as error:  # the grader's own fault: say so in the result, not with silence
        detail = f"{type(error).__name__}: {error}"
        for step in graded_steps(config):
            steps[step.id] = {"log": "", "result": error_result(step.id, step.points, detail)}
        return steps, False
    for step_config in graded_steps(config):
        step = graded.step(step_config.id)
        # the printed output goes into the first step's log only (it is the whole run's)
        view = dataclasses.replace(graded, steps=[step], output=graded.output if step.id == first else "")
        location = step_location(args.path, config.package, config.step_modules()[step.id].FILES, step.id)
        title = messages.title(f"step_title.{config.id}.{step.id}", step_config.title)
        log = io.StringIO()
        with contextlib.redirect_stdout(log):
            print_log(view, step.id, location=location, title=title)
        steps[step.id] = {"log": log.getvalue(), "result": reporter_result(step, location)}
    keep = not args.in_process and bool(BLOCKING_LAYERS & set(graded.sandbox))
    return steps, keep


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m autograder.routes.classroom", description="grade one step for GitHub Classroom"
    )
    parser.add_argument("step")
    parser.add_argument("--assignment", help="the assignment of grading.yml (default: the first)")
    parser.add_argument("--path", type=Path, default=Path("assignments"), help="the directory holding its package")
    parser.add_argument("--config", type=Path, help="grading.yml (default: the nearest one above --path)")
    parser.add_argument(
        "--output",
        type=Path,
        metavar="FILE",
        help="append `result=<base64>` to FILE ($GITHUB_OUTPUT) once graded (default: print it)",
    )
    parser.add_argument(
        "--pass-fail",
        action="store_true",
        help="exit 0 only if every check of the step passed (the command grader's all or nothing)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run student code in this process (no isolation: only for code you trust)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="grade every step afresh, without reading or keeping the other step commands' grading",
    )
    args = parser.parse_args(argv)
    args.config_path = args.config or nearest_config(args.path)
    cacheable = not args.in_process and not args.no_cache and cache_trusted_here()
    steps, key = None, None
    light = light_assignment(args.config_path, args.assignment) if cacheable else None
    if light is not None and args.step in {step.id for step in graded_steps(light)}:
        # Kept only by a grading that validated this very grading.yml (its bytes are in the key):
        # a step that finds its grading kept needs neither the schema nor torch.
        key = cache_key(args.config_path, light, args.path)
        steps = read_cache(key, light)
    if steps is None:
        from autograder.engine.course.config import ConfigError, parse_all  # late: not at the start of a Classroom step

        try:
            try:
                text = Path(args.config_path).read_text(encoding="utf-8")
            except OSError as error:
                raise ConfigError(f"{args.config_path}: cannot read it ({error.strerror})") from None
            every = parse_all(text, Path(args.config_path), deep=False)
            chosen = [a for a in every if args.assignment in (None, a.id)][:1]
            if not chosen:
                raise ConfigError(
                    f"{args.config_path}: no assignment `{args.assignment}` (it grades: {', '.join(a.id for a in every)})"
                )
            shallow = chosen[0]
            if args.step not in {step.id for step in shallow.steps}:
                raise ConfigError(f"no step `{args.step}` in {args.config_path}")
            if args.assignment is None and len(every) > 1:
                print(f"assignment: {shallow.id} (the first of {len(every)} in grading.yml; --assignment ID to choose)")
            if args.step not in {step.id for step in graded_steps(shallow)}:
                steps = {args.step: grade_one_step(args)}  # not in the workflow: graded alone
            else:
                steps, keep = grade_every_step(args, shallow)
                if cacheable and keep:
                    write_cache(key or cache_key(args.config_path, shallow, args.path), steps)
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            # the reporter reads every step's result: an empty one kills it (JSON of ""), and no
            # step of the push is posted; an error result says what is wrong in the step's row
            post(error_result(args.step, 0, f"grading.yml cannot be used: {error}"), args)
            return 2
    entry = steps[args.step]
    result = entry["result"]
    print(entry["log"], end="")
    post(result, args)
    if args.pass_fail:
        passed = result["status"] == "pass" and bool(result["max_score"])
        earned = reporter_number(sum(test.get("score") or 0 for test in result["tests"]))
        if not passed and earned:  # the table above shows a part of the points: say why Classroom shows 0
            print(
                messages.render(
                    "classroom_all_or_nothing",
                    step=args.step,
                    score=earned,
                    max_score=reporter_number(result["max_score"]),
                )
            )
        return 0 if passed else 1
    return 0 if result["status"] != "error" else 1


def post(result, args) -> None:
    """`result=<base64 JSON>`, the reporter's input: appended to --output ($GITHUB_OUTPUT), else
    printed (not with --pass-fail, whose exit status is the result)."""
    line = "result=" + base64.b64encode(json.dumps(result).encode()).decode()
    if args.output:
        with open(args.output, "a", encoding="utf-8") as output:
            output.write(line + "\n")
    elif not args.pass_fail:
        print(line)


def light_assignment(config_path: Path, assignment_id):
    """The assignment's id, package and steps (points, options) read from grading.yml without
    its schema or the checks (no jsonschema, no torch), or None where the file does not have the
    plain shape this reading knows: then the full reading validates it."""
    import types

    import yaml

    try:
        data = yaml.safe_load(Path(config_path).read_text(encoding="utf-8"))
        entries = data["assignments"]
        entry = entries[0] if assignment_id is None else next(a for a in entries if a["id"] == assignment_id)
        if assignment_id is None and len(entries) > 1:
            return None  # the full reading says which one it took
        steps = [
            types.SimpleNamespace(
                id=str(step["id"]), points=float(step["points"]), options=dict(step.get("options") or {})
            )
            for step in entry["steps"]
        ]
        return types.SimpleNamespace(id=str(entry["id"]), package=str(entry["id"]), steps=steps)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, StopIteration, yaml.YAMLError):
        return None


def grade_one_step(args) -> dict:
    """{"log", "result"} of grading `args.step` alone (a step the workflow does not grade)."""
    import contextlib
    import io

    from autograder.engine.course.config import load  # late: not at the start of a Classroom step

    config = load(args.config_path, assignment=args.assignment)
    log = io.StringIO()
    try:
        graded = grade_step(args.step, args.path, config, isolate=not args.in_process)
        step = graded.step(args.step)
        location = step_location(args.path, config.package, config.step_modules()[args.step].FILES, args.step)
        result = reporter_result(step, location)
    except Exception as error:  # the grader's own fault: say so in the result, not with silence
        return {
            "log": "",
            "result": error_result(args.step, config.step(args.step).points, f"{type(error).__name__}: {error}"),
        }

    title = messages.title(f"step_title.{config.id}.{args.step}", config.step(args.step).title)
    with contextlib.redirect_stdout(log):
        print_log(graded, args.step, location=location, title=title)
    return {"log": log.getvalue(), "result": result}
