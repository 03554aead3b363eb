"""What leaves the instructor's kit: a student release, and a Gradescope autograder zip.

* `release(out)`: assignments/ (skeletons, public checks), the parts of autograder/ that the public
  checks need with every hidden check cut out, grading.yml, a student README, requirements.txt
  and a pyproject.toml that lets `pytest assignments/` find the grader. No reference code, no
  hidden check, no known mistake: the diagnosis works from fingerprints (fingerprints.json), and
  messages.py keeps only the diagnoses those fingerprints and the probes can give.
* `gradescope_zip(out)`: setup.sh, run_autograder and the whole kit (reference and hidden checks
  included: the zip stays on Gradescope's side). run_autograder grades /autograder/submission
  in the sandbox and writes /autograder/results/results.json.
"""
import shutil
import zipfile
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
HIDDEN_MARKER = "# ### BEGIN HIDDEN CHECKS"
PROBES_MARKER = "# ### PROBES"
# What the public checks import (runner imports the worker only to grade in a sandbox).
STUDENT_MODULES = ["__init__.py", "check.py", "classroom.py", "config.py", "course.py", "diagnosis.py", "fake_cuda.py", "fingerprints.py", "forbidden.py",
                   "messages.py", "notebook.py", "pytest_plugin.py", "results.py", "runner.py", "submission.py"]
REQUIREMENTS = ["torch>=2.3,<3", "numpy", "pytest>=8", "pytest-timeout>=2.2", "PyYAML>=6"]


def strip_hidden(source):
    """A checks module without its hidden checks (from the hidden marker up to the probes)."""
    if HIDDEN_MARKER not in source:
        return source
    head, rest = source.split(HIDDEN_MARKER, 1)
    probes = rest[rest.index(PROBES_MARKER):] if PROBES_MARKER in rest else ""
    return head.rstrip() + ("\n\n\n" + probes if probes else "\n")


def release(out, classroom="command"):
    """Write the student release into directory `out` (which must not exist yet), with a GitHub
    Classroom workflow in `classroom` mode ("command" or "fractional", see classroom.py)."""
    from . import config as grading_config
    from .checks import step_modules
    from .classroom import workflow

    out = Path(out)
    out.mkdir(parents=True)
    (out / ".github" / "workflows").mkdir(parents=True)
    (out / ".github" / "workflows" / "classroom.yml").write_text(
        workflow(grading_config.load(known_steps=step_modules()), classroom))
    shutil.copytree(KIT / "assignments", out / "assignments",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    grader = out / "autograder"
    (grader / "checks").mkdir(parents=True)
    (grader / "mistakes").mkdir()
    for name in STUDENT_MODULES:
        shutil.copyfile(KIT / "autograder" / name, grader / name)
    shutil.copyfile(KIT / "autograder" / "fingerprints.json", grader / "fingerprints.json")
    (grader / "messages.py").write_text(student_messages((KIT / "autograder" / "messages.py").read_text()))
    for path in sorted((KIT / "autograder" / "checks").glob("*.py")):
        (grader / "checks" / path.name).write_text(strip_hidden(path.read_text()))
    (grader / "mistakes" / "__init__.py").write_text(
        '"""Known mistakes are instructor-only: a student release has none."""\n\n\ndef mistakes_of(step_id):\n'
        '    return []\n')
    shutil.copyfile(KIT / "grading.yml", out / "grading.yml")
    (out / "requirements.txt").write_text("\n".join(REQUIREMENTS) + "\n")
    (out / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n'
                                        'addopts = "-p no:cacheprovider"\n')
    (out / "README.md").write_text(student_readme())
    return out


def student_messages(source):
    """messages.py without the diagnoses a student's run can never give (those of mistakes that
    show only on hidden checks): their text would describe what the hidden checks look for."""
    from .checks import step_modules
    from .fingerprints import load, shipped_ids

    keep = shipped_ids(load()) | {"no_known_mistake"} | \
        {probe.diagnosis for module in step_modules().values() for probe in module.PROBES}
    lines = []
    for line in source.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith('"diagnosis.') and stripped.split('"')[1].removeprefix("diagnosis.") not in keep:
            continue  # every diagnosis entry is one line (a test holds that)
        lines.append(line)
    return "".join(lines)


def student_readme():
    from . import config as grading_config
    from .checks import step_modules

    config = grading_config.load(known_steps=step_modules())
    rows = "\n".join(f"| `{s.id}` | {s.title} | {s.points:g} |" for s in config.steps)
    return f"""# {config.assignment}

Fill in the TODOs in `assignments/mha/*.py`, step by step, and check your work as often as you like:

```bash
pip install -r requirements.txt      # once (torch, pytest, ...)
pytest assignments/                  # every step: one test per check, then a score table
pytest assignments/ -k masking       # one step
pytest assignments/ --cuda           # also the cuda step, on a simulated GPU if you have no real one
```

Each file starts with an explanation of its step. Tensors are batch-first, and a mask is a bool
tensor with **True = blocked** (as in `nn.MultiheadAttention`; `F.scaled_dot_product_attention`
uses the opposite). A failing check says what was expected and what your code gave; under a
failing step, lines starting with `?` suggest what probably went wrong.

| step | what | points |
|---|---|---|
{rows}

Your grade also runs hidden checks (other sizes, other random inputs), so write general code,
not code fitted to the public checks. Calling the PyTorch function a step asks you to write
(e.g. `F.scaled_dot_product_attention` in the attention step) scores zero for that step.
"""


SETUP_SH = """#!/usr/bin/env bash
# Gradescope: install the grader's dependencies (a CPU build of torch: no CUDA packages).
set -euo pipefail
apt-get update -qq && apt-get install -y -qq python3 python3-pip python3-venv g++ bubblewrap libseccomp2 > /dev/null
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
/autograder/venv/bin/pip install -q numpy pytest pytest-timeout PyYAML tqdm pyseccomp
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope: grade /autograder/submission, write /autograder/results/results.json.
# MHA_LAB_GRADESCOPE_ROOT replaces /autograder (to try it locally).
set -uo pipefail
ROOT="${MHA_LAB_GRADESCOPE_ROOT:-/autograder}"
PYTHON="${MHA_LAB_PYTHON:-$ROOT/venv/bin/python}"
cd "$ROOT/source"
mkdir -p "$ROOT/results"
"$PYTHON" -m autograder grade "$ROOT/submission" --gradescope "$ROOT/results/results.json"
"""


def gradescope_zip(out):
    """Write the Gradescope autograder zip to `out`."""
    out = Path(out)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            archive.writestr(info, text)
        for top in ("autograder", "solutions", "assignments"):
            for path in sorted((KIT / top).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    archive.write(path, path.relative_to(KIT).as_posix())
        archive.write(KIT / "grading.yml", "grading.yml")
    return out


def gradescope_results(result, execution_time, hidden_visibility="after_published"):
    """Gradescope's results.json for a GradeResult: one test per check."""
    tests = []
    for step in result.steps:
        notes = "\n".join(d["message"] for d in step.diagnoses)
        for check in step.checks:
            if check.passed is None:
                continue
            output = check.message
            if check.passed is False and notes:
                output += "\nWhat probably went wrong in this step:\n" + notes
            tests.append({"name": f"{step.id}: {check.id}", "score": round(check.points, 4),
                          "max_score": round(check.max_points, 4),
                          "status": "passed" if check.passed else "failed", "output": output,
                          "visibility": "visible" if check.visibility == "public" else hidden_visibility})
    return {"score": round(result.score, 4), "execution_time": round(execution_time, 2),
            "output": f"{result.assignment}: {result.score:.2f} / {result.max_score:g}"
                      + (f"\n\nWhat your code printed:\n{result.output}" if result.output else ""),
            "tests": tests}
