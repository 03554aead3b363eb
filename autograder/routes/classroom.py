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

One module, though long: it is the entry point the generated workflow calls (`python -m
autograder.routes.classroom`), and the step it runs, the result format and the per-push cache
all follow from that one command line.
"""

import argparse
import base64
import dataclasses
import json
import sys
from pathlib import Path

from autograder.engine.checks import messages
from autograder.engine.judge import table
from autograder import KIT
from autograder import __version__
from autograder import cache_base
from autograder.engine.judge.result_files import WriteError, write_atomically
from autograder.engine.judge.score import whole_points
from autograder.publish.classroom_workflow import graded_steps, reporter_number


def grade_step(step_id, submission, config, isolate=True):
    """The GradeResult of one step (its public checks). Isolated by default: student code runs in
    a worker process, so its prints, its exit or a crash cannot reach this process or what it writes."""
    from autograder.engine.judge.runner import grade  # late: not at the start of a Classroom step

    return grade(submission, config, steps=[step_id], isolate=isolate)


def step_result(step_id, submission, config, isolate=True):
    """The command grader's result object for one step: a test per public check, fractional
    scores in whole points."""
    return reporter_result(grade_step(step_id, submission, config, isolate).step(step_id))


def reporter_result(step, location=None):
    """The result object the grading reporter reads, for a StepResult.

    What the reporter does with it (classroom-resources/autograding-grading-reporter@v1): it adds
    the tests' `score`s and the runners' `max_score`s into "Points X/Y", which Classroom reads as
    whole numbers (7.5 would become 7): scores are whole points, rounded once per step (half up)
    and spread over the checks so that they add up exactly. It prints a failed test's name, its
    `line_no` (an integer, 0: none) and its `test_code`, but `message` only for an error: the
    step's explanation (feedback.explanation of its public checks: the cause first) goes in the first
    failing test's `test_code`, each other failing test's own message in its own. `line_no`: the
    line a failure names, else the step's code (`location`: (file, line) from step_location).
    An empty test list would be NaN: a step with no check run here has one test that says why,
    scores 0 and keeps its maximum (0 only where grading.yml switched it off)."""
    from autograder.engine.judge import feedback  # late: not at the start of a Classroom step

    counted = [check for check in step.checks if check.passed is not None]
    if not counted:
        reason = next((c.message for c in step.checks if c.message), "not checked here")
        status = "fail" if step.max_score else "pass"
        return {
            "version": 1,
            "status": status,
            "max_score": reporter_number(step.max_score),
            "tests": [
                {
                    "name": f"{step.id}: not checked",
                    "status": status,
                    "message": reason,
                    "test_code": reason,
                    "line_no": 0,
                    "score": 0,
                }
            ],
        }
    scores = whole_points([check.points for check in counted], step.score)
    public = dataclasses.replace(step, checks=[check for check in step.checks if check.visibility == "public"])
    block = "\n".join(feedback.lines(feedback.explanation(public)))
    tests, hidden = [], 0
    for check, score in zip(counted, scores):
        name, text = f"{step.id}: {check.id}", check.message or ""
        if check.visibility != "public":  # nothing about what a hidden check looks at
            hidden += 1
            name, text = f"{step.id}: hidden check {hidden}", ""
        test = {
            "name": name,
            "status": "pass" if check.passed else "fail",
            "message": text or None,
            "line_no": line_of(text) or (location[1] if location and not check.passed else 0),
            "score": score,
        }
        if not check.passed:
            test["test_code"] = block or text or "failed"
            block = ""  # the verdict once per step
        tests.append(test)
    passed = all(t["status"] == "pass" for t in tests)
    return {
        "version": 1,
        "status": "pass" if passed else "fail",
        "max_score": reporter_number(step.max_score),
        "tests": tests,
    }


def line_of(message):
    """The line number a message points at in the student's file (0: none), for the reporter."""
    found = place_of(message)
    return found[1] if found else 0


def place_of(message):
    """(file, line) that a message names ("mha/heads.py, line 12, in ..."; "mha/heads.py 의 12번째
    줄"), or None; the file as the message names it (package/file)."""
    import re

    found = re.search(r"([\w/.-]+\.py)(?:, line |의 )(\d+)", message or "")
    if found:
        return found.group(1), int(found.group(2))
    found = re.search(r"\bline (\d+)", message or "")
    return (None, int(found.group(1))) if found else None


def step_location(directory, package, files, step_id):
    """(file, line) of the step's code in the student's package (`directory`/`package`): the
    first `TODO (<step>)` comment of the step's `files` (the skeleton's marks, which stay in a
    student's file), else the first `def` or `class` of its first file, else its line 1; the file
    as package/file. None where the step names no file that exists."""
    import re

    for mark in (re.compile(rf"#\s*TODO \({re.escape(step_id)}\)"), re.compile(r"^\s*(def|class) ")):
        for name in files:
            path = Path(directory) / package / name
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for number, line in enumerate(text.splitlines(), start=1):
                if mark.search(line):
                    return f"{package}/{name}", number
    for name in files:
        if (Path(directory) / package / name).is_file():
            return f"{package}/{name}", 1
    return None


def annotations(step, location, title):
    """GitHub Actions workflow commands that put the step's verdict on the student's file, at the
    line a failure names or else at the step's code (`location`, from step_location): one
    `::error` for a step that lost points, one `::warning` for checks that could not be judged.
    The file is given as the student's repository holds it (assignments/<package>/<file>)."""
    from autograder.engine.judge import feedback  # late: not at the start of a Classroom step

    public = dataclasses.replace(step, checks=[check for check in step.checks if check.visibility == "public"])
    found = feedback.explanation(public)
    if found is None:
        return []
    named = next((place_of(c.message) for c in public.checks if c.passed is False and place_of(c.message)), None)
    file, line = (named if named and named[0] else location) or (None, 0)
    if named and not named[0] and location:
        file, line = location[0], named[1]
    level = "error" if found.evidence else "warning"
    text = "\n".join(item.strip() for item in feedback.lines(found))
    where = f"file=assignments/{escape(file, True)},line={line}," if file else ""
    return [f"::{level} {where}title={escape(title, True)}::{escape(text)}"]


def escape(text, property_=False):
    """A workflow command's data (or, `property_`, a property value) with its special characters escaped."""
    text = str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_ else text


def error_result(step_id, max_score, detail):
    """A result that says the grader itself failed (status error): never a silent empty grade."""
    return {
        "version": 1,
        "status": "error",
        "max_score": reporter_number(max_score),
        "tests": [{"name": f"{step_id}: grader error", "status": "error", "message": detail, "line_no": 0, "score": 0}],
    }


def print_log(graded, step_id: str, location=None, title=None) -> None:
    """The Actions log of one graded step; the grade goes to --output, never via stdout. First,
    that this score is feedback, computed in the student's repository (classroom_feedback);
    under GitHub Actions, the step's verdict also goes on the student's file as an annotation
    (annotations; `location`: the step's code)."""
    import os

    print(messages.render("classroom_feedback") + "\n")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in annotations(graded.step(step_id), location, title or step_id):
            print(line)
    print(table.table(graded))
    if graded.output:
        print("\n" + messages.render("printed_output") + "\n" + graded.output)


# ---------------------------------------------------------------------------- grading once

# Every step command of a workflow grades the same files: the first to run grades every step
# once and keeps, for each step, exactly what its command prints and reports (its log and its
# reporter result: nothing a student does not see anyway); the others read that. The keeping is
# keyed by the content it was graded from and lives where student code cannot write.
CACHE_FORMAT = 1
# Layers that keep a worker from writing the cache's folder: Landlock (it writes its scratch
# only), bubblewrap (the folder is not in its file system), the uid drop (another uid; the folder
# is 0700).
BLOCKING_LAYERS = {"landlock", "bubblewrap", "uid-drop"}


def nearest_config(start) -> Path:
    """The nearest grading.yml at or above `start`, else the kit's own (as pytest_plugin finds
    it, without its imports)."""

    for directory in [Path(start).resolve(), *Path(start).resolve().parents]:
        if (directory / "grading.yml").is_file():
            return directory / "grading.yml"
    return KIT / "grading.yml"


def _digest_tree(key, root: Path) -> None:
    """Feed every file under `root` (names and bytes; no bytecode) into the hash `key`."""
    root = Path(root)
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts) if root.is_dir() else []
    for path in files:
        key.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")


def cache_key(config_path: Path, assignment, submission: Path) -> str:
    """What one grading's outcome depends on: the graded package's files, grading.yml, the kit
    (its code and catalogs), torch's version, the language of the messages, and the Actions run
    (a cache never outlives its run)."""
    import hashlib
    import importlib.metadata
    import os

    key = hashlib.sha256()
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "none"
    run = [os.environ.get(name, "") for name in ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_SHA")]
    header = [str(CACHE_FORMAT), __version__, torch_version, os.environ.get("MHA_LAB_LANG", ""), *run]
    key.update(" ".join(header).encode() + b"\n")
    key.update(Path(config_path).read_bytes() + b"\0" + assignment.id.encode() + b"\0")
    _digest_tree(key, Path(submission) / assignment.package)
    key.update(b"kit\0")
    _digest_tree(key, KIT / "autograder")
    return key.hexdigest()


def cache_directory() -> Path:
    """Outside the student's repository: the runner's temporary folder on Actions (gone with
    the job), else the kit's cache folder; so also where RUNNER_TEMP is not an absolute path (a
    step's command copied out of the workflow with its `${{ runner.temp }}` unexpanded)."""
    import os

    temporary = os.environ.get("RUNNER_TEMP", "")
    return Path(temporary) / "mha-lab-classroom" if os.path.isabs(temporary) else cache_base() / "classroom"


def cache_trusted_here() -> bool:
    """Whether a worker on this machine is kept from writing the cache (BLOCKING_LAYERS): as root
    (the uid drop) or where the kernel has Landlock. Elsewhere every step grades for itself."""
    import os

    from autograder.sandbox.confine import landlock_abi  # late: not at the start of a Classroom step

    return os.geteuid() == 0 or landlock_abi() > 0


def _private_folder(directory: Path, create: bool) -> bool:
    """Whether `directory` is a real folder of this user that no one else can write (made so if
    `create`)."""
    import os
    import stat

    try:
        if create:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(directory)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o077


def read_cache(key: str, assignment) -> dict:
    """{step id: {"log", "result"}} kept under `key`, or None: missing, not ours (a link, another
    owner, writable by others), malformed, of another key, or not matching grading.yml's steps
    and points (a forged file)."""
    import os
    import stat

    directory = cache_directory()
    if not _private_folder(directory, create=False):
        return None
    try:
        fd = os.open(directory / f"{key}.json", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
            return None
        with os.fdopen(fd, "rb") as f:
            fd = None
            data = json.loads(f.read(8 << 20))
    except (OSError, ValueError):
        return None
    finally:
        if fd is not None:
            os.close(fd)
    try:
        if data["format"] != CACHE_FORMAT or data["key"] != key:
            return None
        steps = data["steps"]
        expected = {step.id: step.points for step in graded_steps(assignment)}
        if set(steps) != set(expected):
            return None
        for step_id, entry in steps.items():
            result = entry["result"]
            if not isinstance(entry["log"], str) or not isinstance(result["tests"], list):
                return None
            if result["status"] not in ("pass", "fail", "error"):
                return None
            if result["status"] != "error" and result["max_score"] not in (0, reporter_number(expected[step_id])):
                return None
    except (KeyError, TypeError, AttributeError):
        return None
    return steps


def write_cache(key: str, steps: dict) -> None:
    """Keep `steps` under `key` (atomically; a failure only costs the next step a grading)."""

    directory = cache_directory()
    if not _private_folder(directory, create=True):
        return
    try:
        write_atomically(directory / f"{key}.json", json.dumps({"format": CACHE_FORMAT, "key": key, "steps": steps}))
    except WriteError:
        pass


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


if __name__ == "__main__":
    sys.exit(main())
