"""GitHub Classroom: a workflow generated from grading.yml, and fractional per-step results.

Two ways to grade a step on every push (release option --classroom):

* "command" (default): one classroom-resources/autograding-command-grader step per graded step,
  running `pytest assignments/ --cuda --step ID`; the step scores its points only if every check
  passes (that action is all-or-nothing). --cuda matters: a skipped cuda check would pass.
* "fractional": one plain step per graded step running `python -m autograder.classroom ID`,
  which writes the command grader's result format itself (base64 JSON, one test per check with
  its share of the points) to $GITHUB_OUTPUT, so a step with 3 of 4 checks right earns 3/4.

Either way the classroom-resources/autograding-grading-reporter step sums the results. The
release holds the public checks only; see README.md for adding the hidden ones.
"""
import argparse
import base64
import json
import math
import sys
from pathlib import Path

INSTALL = ("python -m pip install -q torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu && "
           "python -m pip install -q -r requirements.txt")


def runner_id(step_id):
    """The reporter wants runner ids of letters and digits only."""
    return "".join(c for c in step_id if c.isalnum())


def workflow(config, mode="command"):
    """The .github/workflows/classroom.yml text for `config` (a GradingConfig)."""
    import yaml

    steps = [{"name": "Check out the code", "uses": "actions/checkout@v4"},
             {"name": "Set up Python", "uses": "actions/setup-python@v5", "with": {"python-version": "3.11"}},
             {"name": "Install torch (CPU build) and the grader's needs", "run": INSTALL}]
    graded = [step for step in config.steps if step.points > 0]
    for step in graded:
        checks = max(1, len(_public_checks(step.id)))
        minutes = max(1, math.ceil(step.timeout * checks / 60))
        if mode == "command":
            steps.append({"name": step.title, "id": runner_id(step.id),
                          "uses": "classroom-resources/autograding-command-grader@v1",
                          "with": {"test-name": step.id, "command": f"python -m pytest assignments/ -q --cuda --step {step.id}",
                                   "timeout": minutes, "max-score": _number(step.points)}})
        else:
            steps.append({"name": step.title, "id": runner_id(step.id), "timeout-minutes": minutes,
                          "run": f'python -m autograder.classroom {step.id} >> "$GITHUB_OUTPUT"'})
    steps.append({"name": "Autograding report", "uses": "classroom-resources/autograding-grading-reporter@v1",
                  "env": {f"{runner_id(s.id).upper()}_RESULTS": f"${{{{ steps.{runner_id(s.id)}.outputs.result }}}}"
                          for s in graded},
                  "with": {"runners": ",".join(runner_id(s.id) for s in graded)}})
    document = {"name": "Autograding", "on": ["push", "workflow_dispatch", "repository_dispatch"],
                "permissions": {"checks": "write", "actions": "read", "contents": "read"},
                "jobs": {"autograding": {"runs-on": "ubuntu-latest",
                                         "if": "github.actor != 'github-classroom[bot]'", "steps": steps}}}
    header = f"# Generated from grading.yml by `python -m autograder release` ({mode} mode). Do not edit.\n"
    return header + yaml.safe_dump(document, sort_keys=False, width=120)


def _number(value):
    return int(value) if float(value).is_integer() else value


def _public_checks(step_id):
    from .checks import step_modules
    return [c for c in step_modules()[step_id].CHECKS if c.visibility == "public"]


def step_result(step_id, submission, config, reference=None):
    """The command grader's result object for one step: a test per check (the public ones, and
    the hidden ones too given the `reference` directory), fractional scores."""
    from .runner import grade

    step = grade(submission, config, reference=reference, steps=[step_id]).step(step_id)
    counted = [check for check in step.checks if check.passed is not None]
    scores = rounded_parts([check.points for check in counted], step.score)
    tests = [{"name": f"{step_id}: {check.id}", "status": "pass" if check.passed else "fail",
              "message": check.message or None, "score": score, "max_score": round(check.max_points, 2)}
             for check, score in zip(counted, scores)]
    if step.diagnoses and any(t["status"] == "fail" for t in tests):
        tests[-1]["message"] = ((tests[-1]["message"] or "") + "\n" +
                                "\n".join(d["message"] for d in step.diagnoses)).strip()
    passed = all(t["status"] == "pass" for t in tests)
    return {"version": 1, "status": "pass" if passed else "fail", "max_score": _number(step.max_score),
            "tests": tests}


def rounded_parts(parts, total, digits=2):
    """`parts` rounded to `digits`, the largest nudged so that they add up to round(total)
    exactly: the reporter sums them, and 10.0001 / 10 reads as a bug."""
    rounded = [round(part, digits) for part in parts]
    if rounded:
        largest = max(range(len(rounded)), key=lambda i: rounded[i])
        rounded[largest] = round(rounded[largest] + round(total, digits) - sum(rounded), digits)
    return rounded


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m autograder.classroom",
                                     description="print `result=<base64>` for one step (GitHub Classroom)")
    parser.add_argument("step")
    parser.add_argument("--path", type=Path, default=Path("assignments"), help="the directory holding mha/")
    parser.add_argument("--reference", type=Path,
                        help="the directory holding the reference mha/: run the hidden checks too (a private kit)")
    parser.add_argument("--config", type=Path, help="grading.yml (default: the nearest one above --path)")
    args = parser.parse_args(argv)
    from .checks import step_modules
    from .config import load
    from .pytest_plugin import find_config

    config = load(args.config or find_config(args.path), known_steps=step_modules())
    result = step_result(args.step, args.path, config, reference=args.reference)
    print("result=" + base64.b64encode(json.dumps(result).encode()).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
