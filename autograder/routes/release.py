"""What leaves the instructor's kit: a student release, and a Gradescope autograder zip.

* `release(out)`: assignments/ (skeletons, public checks), the parts of autograder/ that the public
  checks need with every hidden check cut out, grading.yml, a student README, requirements.txt
  and a pyproject.toml that lets `pytest assignments/` find the grader. No reference code, no
  hidden check, no known mistake: the diagnosis works from fingerprints (fingerprints.json), and
  the compiled message catalogs (English, Korean) keep only the diagnoses those fingerprints and
  the probes can give.
* `gradescope_zip(out)`: setup.sh, run_autograder and the whole kit (reference and hidden checks
  included: the zip stays on Gradescope's side). run_autograder grades /autograder/submission
  in the sandbox and writes /autograder/results/results.json.
"""

import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from autograder import KIT
from autograder.engine.assignment import folder as assignment_folder
from autograder.engine.diagnosis import public_message_ids  # the one place that decides; here for callers
from autograder.engine.torch_pin import CPU_INDEX, GRADING_TORCH

HIDDEN_MARKER = "# ### BEGIN HIDDEN CHECKS"
PROBES_MARKER = "# ### PROBES"
# What a student's run needs of the grader: the engine and the in-process routes, each
# assignment's public checks, fingerprints and messages, and the sandbox (the Classroom workflow
# grades in it, so that the student's code never runs in the process that writes the grade).
# Not the known mistakes (a second reference), not the instructor's commands: routes/cli.py ships for
# `python -m autograder grade` and says that the others are the instructor's (cli.student_kit).
STUDENT_PARTS = [
    "__init__.py",
    "__main__.py",
    "engine",
    "harness",
    "sandbox",
    "routes/__init__.py",
    "routes/pytest_plugin.py",
    "routes/notebook.py",
    "routes/plots.py",
    "routes/classroom.py",
    "routes/cli.py",
    "assignments/__init__.py",
]
# The engine's modules that only the instructor's commands use (a batch and its shards, making the
# skeletons, compiling catalogs with Babel): left out of the engine that ships.
INSTRUCTOR_ENGINE = ["batch.py", "shard.py", "skeleton.py", "catalogs.py", "generated.py"]
ASSIGNMENT_PARTS = ["__init__.py", "fingerprints.json", "warmup.py"]  # and its compiled catalogs
REQUIREMENTS = [
    f"torch=={GRADING_TORCH}",  # the grading's own: the same numerics, errors and warnings
    "numpy",
    "pytest>=8",
    "pytest-timeout>=2.2",
    "PyYAML>=6",
    "jsonschema>=4",
    "pyseccomp>=0.1.2; platform_system == 'Linux'",
]


def requirements_text():
    """The student's requirements.txt: the grading's torch (GRADING_TORCH) from PyTorch's CPU
    index (PyPI's Linux torch bundles CUDA, several GB). The CPU index is an extra one, so that
    the rest still comes from PyPI; its `+cpu` builds outrank PyPI's of the same version. A CUDA
    build of the same version installed before is kept (2.13.0+cu128 is 2.13.0)."""
    return (
        f"# torch {GRADING_TORCH}, as the grading uses, in its CPU build (no GPU needed). For a CUDA build, install\n"
        f"# torch=={GRADING_TORCH} first from the index pytorch.org/get-started names for your CUDA\n"
        "# (e.g. --index-url https://download.pytorch.org/whl/cu128).\n"
        f"--extra-index-url {CPU_INDEX}\n" + "\n".join(REQUIREMENTS) + "\n"
    )


def strip_hidden(source, hidden_classes=()):
    """A checks module without its hidden checks: every class in `hidden_classes` (the ones
    that declare visibility "hidden", found by loading the module) and, where the module marks
    it, the region from the hidden marker up to the probes (helpers only hidden checks use)."""
    import ast

    if HIDDEN_MARKER in source:
        head, rest = source.split(HIDDEN_MARKER, 1)
        probes = rest[rest.index(PROBES_MARKER) :] if PROBES_MARKER in rest else ""
        source = head.rstrip() + ("\n\n\n" + probes if probes else "\n")
    lines = source.splitlines(keepends=True)
    cut = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name in hidden_classes:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            cut.update(range(start - 1, node.end_lineno))
    return "".join(line for number, line in enumerate(lines) if number not in cut)


def release(out, classroom="command", assignment=None, kit_repository=None, notebooks=True):
    """Write the student release into directory `out` (which must not exist yet): every
    assignment of grading.yml (or only `assignment`), with a GitHub Classroom workflow per
    assignment in `classroom` mode ("command", "fractional", or "private": hidden checks too,
    from the private kit `kit_repository`; see routes/classroom.py). Built aside and renamed at
    the end: a failed release leaves nothing that blocks the next."""
    from autograder.engine import config as grading_config

    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} already exists")
    graded = grading_config.load_all()  # a bad grading.yml stops here: nothing written
    if assignment is not None:
        graded = [grading_config.choose(graded, assignment, grading_config.default_path())]
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    partial.chmod(0o755)  # mkdtemp's 0700 would carry over to the release
    try:
        write_release(partial, graded, classroom, kit_repository, notebooks)
        partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return out


def write_release(out, graded, classroom, kit_repository=None, notebooks=True):
    """release() into the existing empty directory `out`, for the Assignments `graded`; with
    `notebooks`, also notebooks/<package>.ipynb: the self-contained student notebook of each
    (Jupyter, Colab, a hub), carrying this release's grader."""
    from autograder.engine.catalogs import write_student_catalogs
    from autograder.routes.classroom import private_workflow, workflow

    workflows = out / ".github" / "workflows"
    workflows.mkdir(parents=True)
    for config in graded:
        name = "classroom.yml" if len(graded) == 1 else f"classroom-{config.id}.yml"
        text = (
            private_workflow(config, kit_repository, name)
            if classroom == "private"
            else workflow(config, classroom, name)
        )
        (workflows / name).write_text(text)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    ignore_instructor = shutil.ignore_patterns("__pycache__", "*.pyc", *INSTRUCTOR_ENGINE)
    (out / "assignments").mkdir()
    for path in (KIT / "assignments").iterdir():
        if path.is_file():
            shutil.copyfile(path, out / "assignments" / path.name)
    grader = out / "autograder"
    for part in STUDENT_PARTS:
        source, target = KIT / "autograder" / part, grader / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=ignore_instructor if part == "engine" else ignore)
        else:
            shutil.copyfile(source, target)
    for config in graded:
        shutil.copytree(KIT / "assignments" / config.package, out / "assignments" / config.package, ignore=ignore)
        here, there = assignment_folder(config.id), grader / "assignments" / config.id
        there.mkdir(parents=True)
        for part in ASSIGNMENT_PARTS:
            if (here / part).is_dir():
                shutil.copytree(here / part, there / part, ignore=ignore)
            elif (here / part).is_file():
                shutil.copyfile(here / part, there / part)
        (there / "observers").mkdir()
        for path in sorted((here / "observers").glob("*.py")):  # without the observers only hidden checks use
            (there / "observers" / path.name).write_text(path.read_text().split(HIDDEN_MARKER, 1)[0].rstrip() + "\n")
        (there / "checks").mkdir()
        modules = config.step_modules()
        shutil.copyfile(here / "checks" / "__init__.py", there / "checks" / "__init__.py")
        for step_id, module in modules.items():
            hidden = {type(check).__name__ for check in module.CHECKS if check.visibility == "hidden"}
            source = (here / "checks" / f"{step_id}.py").read_text()
            (there / "checks" / f"{step_id}.py").write_text(strip_hidden(source, hidden))
    keep = set().union(*(public_message_ids(config) for config in graded))
    write_student_catalogs(grader, lambda message_id: student_message(message_id, keep))
    _write_config(out / "grading.yml", graded)
    (out / "requirements.txt").write_text(requirements_text())
    # pytest's cache stays on (--lf, --sw, -x then --lf work): it holds only test ids, and a
    # student's ids are the public checks'; .gitignore keeps it out of the student's repository.
    (out / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    (out / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n")
    (out / "README.md").write_text(student_readme(graded))
    try:
        import nbformat  # noqa: F401 - the instructor extra
    except ImportError:
        print("notebooks/ left out of the release: pip install -e .[instructor] to write them", file=sys.stderr)
        notebooks = False
    if notebooks:
        from autograder.routes.course import notebook_text
        from autograder.routes.student_notebook import release_archive, student_notebook

        grader = release_archive(out)
        (out / "notebooks").mkdir()
        for config in graded:
            notebook = student_notebook(config, grader=grader)
            (out / "notebooks" / f"{config.package}.ipynb").write_text(notebook_text(notebook), encoding="utf-8")
    return out


def _write_config(target, graded):
    """grading.yml, or only the entries of the assignments released when not all of them are."""
    from autograder.engine import config as grading_config

    text = grading_config.default_path().read_text()
    if len(graded) == len(grading_config.load_all()):
        target.write_text(text)
        return
    import yaml

    data = yaml.safe_load(text)
    if "assignments" in data:
        data["assignments"] = [a for a in data["assignments"] if a["id"] in {c.id for c in graded}]
    target.write_text(
        "# The assignments of this release, from the instructor's grading.yml.\n"
        + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    )


def student_message(message_id: str, keep: set) -> bool:
    """Whether a student release ships this message: every one but the diagnoses outside `keep`
    (public_message_ids), and where the skeleton teaches them (`concept.cause.<diagnosis>`)."""
    for prefix in ("diagnosis.", "concept.cause."):
        if message_id.startswith(prefix):
            return message_id.removeprefix(prefix) in keep
    return True


def student_readme(graded):
    """The student release's README.md: in Korean, then in English (the same content)."""
    from autograder.engine import messages

    rows = "\n".join(f"| `{c.package}/` | `{s.id}` | {s.title} | {s.points:g} |" for c in graded for s in c.steps)
    korean_rows = "\n".join(
        f"| `{c.package}/` | `{s.id}` | {messages.title(f'step_title.{c.id}.{s.id}', s.title, 'ko')} | {s.points:g} |"
        for c in graded
        for s in c.steps
    )
    titles = "; ".join(
        f"{messages.title(f'assignment_title.{c.id}', c.title, 'ko')} / {c.title} (`assignments/{c.package}/`)"
        for c in graded
    )
    return f"""# {titles}

[한국어](#한국어) · [English](#english)

## 한국어

`assignments/<package>/*.py`의 TODO를 단계별로 채우고, 원하는 만큼 자주 채점해 보세요:

```bash
pip install -r requirements.txt      # 한 번만: torch (CPU 빌드: GPU도 CUDA 다운로드도 필요 없음), pytest, ...
pytest assignments/ --lang ko        # 모든 단계: 검사마다 테스트 하나, 마지막에 점수표 (메시지는 한국어)
pytest assignments/ -k masking       # 한 단계만: 그 단계의 검사만 골라 실행합니다 (--step masking과 같음)
pytest assignments/ -k masking -v    # 검사마다 자세한 내용(인덱스, 허용 오차, dtype)까지
pytest assignments/ --cuda           # cuda 단계도: 실제 GPU가 없으면 가상 GPU에서
export MHA_LAB_LANG=ko               # --lang ko 대신: 이 셸에서 실행하는 모든 명령이 한국어로
```

`requirements.txt`는 채점과 같은 torch {GRADING_TORCH}를 PyTorch의 CPU 휠 인덱스(`{CPU_INDEX}`)에서
받습니다. NVIDIA GPU를 쓰려면 먼저 같은 버전의 CUDA 빌드를 설치하세요. https://pytorch.org/get-started 에서
여러분의 CUDA 버전에 맞는 `--index-url`을 알려 줍니다 (예: `pip install torch=={GRADING_TORCH} --index-url https://download.pytorch.org/whl/cu128`).
그 뒤에 `pip install -r requirements.txt`를 실행해도 그 torch는 그대로 남습니다. 다른 버전의 torch를 쓰면
`pytest`와 노트북이 처음에 그렇게 알려 줍니다 (점수가 공식 채점과 다를 수 있습니다).

Jupyter, Colab 또는 JupyterHub에서 하려면 `notebooks/<package>.ipynb`를 여세요. 같은 단계와 검사가
들어 있고, 첫 셀이 필요한 것을 설치하고 채점기를 풉니다 (이 저장소의 다른 파일은 필요 없습니다).

각 파일은 그 단계의 설명으로 시작합니다 (한국어, 그다음 영어). 텐서는 배치가 먼저이고, 마스크는
**True = 막힘**인 bool 텐서입니다 (`nn.MultiheadAttention`과 같고, `F.scaled_dot_product_attention`은
반대입니다). 점수를 잃은 단계 아래의 첫 줄(`x`)은 가장 가능성이 큰 원인과 고치는 방법을 알려 줍니다.
그다음 줄들은 어떤 검사가 어떻게 실패했는지를 실패 종류마다 한 번씩 요약하고, `→`로 시작하는 줄은 그
개념을 설명하는 파일과 단락을 가리킵니다. 마지막 두 줄은 여러분의 코드가 여전히 틀리는 가장 작은 입력과,
그 입력에서 기대한 값과 여러분의 값입니다: 그 입력으로 직접 실행해 보면 어디서 틀리는지 찾기 쉽습니다.
`-v`를 붙이면 검사마다 자세한 내용이 나옵니다.

| 패키지 | 단계 | 내용 | 점수 |
|---|---|---|---|
{korean_rows}

최종 점수에는 숨은 검사(다른 크기, 다른 무작위 입력)도 들어갑니다. 그러니 공개 검사에만 맞춘 코드가
아니라 일반적인 코드를 작성하세요. 단계에서 직접 작성하라고 한 PyTorch 함수를 호출하면 (예: attention
단계의 `F.scaled_dot_product_attention`) 그 단계는 0점입니다.

## English

Fill in the TODOs in `assignments/<package>/*.py`, step by step, and check your work as often as you like:

```bash
pip install -r requirements.txt      # once: torch (the CPU build: no GPU needed, no CUDA download), pytest, ...
pytest assignments/                  # every step: one test per check, then a score table
pytest assignments/ -k masking       # one step: exactly its checks (the same as --step masking)
pytest assignments/ -k masking -v    # ... with every check's details (indices, tolerances, dtypes)
pytest assignments/ --cuda           # also the cuda step, on a simulated GPU if you have no real one
pytest assignments/ --lang ko        # 메시지와 점수표를 한국어로 (or: export MHA_LAB_LANG=ko)
```

`requirements.txt` installs the torch the grading uses, {GRADING_TORCH}, from PyTorch's CPU wheel index
(`{CPU_INDEX}`). To use an NVIDIA GPU, install a CUDA build of the same version first, with the
`--index-url` that https://pytorch.org/get-started gives for your CUDA version (e.g.
`pip install torch=={GRADING_TORCH} --index-url https://download.pytorch.org/whl/cu128`);
`pip install -r requirements.txt` keeps it. With another torch, `pytest` and the notebooks say so
first (your scores may differ from the official grading's).

For Jupyter, Colab or a JupyterHub, open `notebooks/<package>.ipynb`: the same steps and checks;
its first cell installs what they need and unpacks the grader (it needs nothing else of this
repository).

Each file starts with an explanation of its step (in Korean, then in English). Tensors are
batch-first, and a mask is a bool tensor with **True = blocked** (as in `nn.MultiheadAttention`;
`F.scaled_dot_product_attention` uses the opposite). Under a step that lost points, the first line
(`x`) names the likely cause and how to fix it. The lines after it sum up what failed, once per kind
of failure; the line starting with `→` names the file and paragraph that explain the concept; and
the last two show the smallest input on which your code still goes wrong, with what was expected
and what yours gave: run it yourself to see where. `-v` adds every check's details.

| package | step | what | points |
|---|---|---|---|
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
/autograder/venv/bin/pip install -q torch=={torch} --index-url {cpu_index}
/autograder/venv/bin/pip install -q numpy pytest pytest-timeout PyYAML jsonschema tqdm pyseccomp
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope: grade /autograder/submission, write /autograder/results/results.json.
# To try it locally (the kit's docs/gradescope.md): MHA_LAB_GRADESCOPE_ROOT replaces
# /autograder, MHA_LAB_PYTHON the Python that setup.sh installs ($ROOT/venv/bin/python).
set -uo pipefail
ROOT="${MHA_LAB_GRADESCOPE_ROOT:-/autograder}"
PYTHON="${MHA_LAB_PYTHON:-$ROOT/venv/bin/python}"
cd "$ROOT/source"
mkdir -p "$ROOT/results"
"$PYTHON" -m autograder grade "$ROOT/submission" --assignment {assignment} --gradescope "$ROOT/results/results.json"
"""


def gradescope_zip(out, assignment=None):
    """Write the Gradescope autograder zip to `out`, grading `assignment` (default: the first in
    grading.yml; a Gradescope assignment grades one). grading.yml is validated first (a zip with
    a broken one would fail on every submission), and the zip is written aside, then renamed."""
    from autograder.engine import config as grading_config

    config = grading_config.load(assignment=assignment)
    out = Path(out)
    partial = out.with_name(f".{out.name}.partial")
    try:
        _write_gradescope_zip(partial, config)
        partial.replace(out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return out


def _write_gradescope_zip(out, config):
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (
            ("setup.sh", SETUP_SH.replace("{cpu_index}", CPU_INDEX).replace("{torch}", GRADING_TORCH)),
            ("run_autograder", RUN_AUTOGRADER.replace("{assignment}", config.id)),
        ):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            archive.writestr(info, text)
        for top in ("autograder", "solutions", "assignments"):
            for path in sorted((KIT / top).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    archive.write(path, path.relative_to(KIT).as_posix())
        archive.write(KIT / "grading.yml", "grading.yml")


def gradescope_results(result, execution_time, hidden_visibility="after_published", public_ids=None):
    """Gradescope's results.json for a GradeResult: one test per check, and no top-level score
    (the tests' scores add up to the result's; see the comment at the end). The first failing
    visible test of a step carries the step's verdict (feedback.verdict, as the score table shows
    it: the cause first) made of its public checks and of the diagnoses a student release could
    give (classroom.public_diagnoses of `public_ids`, default: public_message_ids of every
    assignment in grading.yml): the others tell what the hidden checks look for. The first
    failing hidden check's test, shown at its visibility, carries the verdict of them all."""
    import dataclasses

    from autograder.engine import feedback, messages
    from autograder.routes.classroom import public_diagnoses

    if public_ids is None:
        from autograder.engine import config as grading_config

        public_ids = set().union(*(public_message_ids(config) for config in grading_config.load_all()))
    tests = []
    for step in result.steps:
        public = dataclasses.replace(
            step,
            checks=[check for check in step.checks if check.visibility == "public"],
            diagnoses=public_diagnoses(step, public_ids),
        )
        verdicts = {
            "public": "\n".join(feedback.lines(feedback.verdict(public))),
            "hidden": "\n".join(feedback.lines(feedback.verdict(step))),
        }
        for check in step.checks:
            if check.passed is None:
                continue
            output, audience = check.message, "public" if check.visibility == "public" else "hidden"
            if check.passed is False and verdicts[audience]:  # once per step and audience
                output = (output + "\n\n" if output else "") + verdicts[audience]
                verdicts[audience] = ""
            tests.append(
                {
                    "name": f"{step.id}: {check.id}",
                    "score": round(check.points, 4),
                    "max_score": round(check.max_points, 4),
                    "status": "passed" if check.passed else "failed",
                    "output": output,
                    "visibility": "visible" if check.visibility == "public" else hidden_visibility,
                }
            )
    # Gradescope adds the tests' scores up: rounded one by one, 7 checks of 15/7 would make 14.9999;
    # each is rounded as its share of the exact total instead (largest remainder, units of 0.0001).
    counted = [check for step in result.steps for check in step.checks if check.passed is not None]
    for key, values in (("score", [c.points for c in counted]), ("max_score", [c.max_points for c in counted])):
        for test, share in zip(tests, exact_shares(values)):
            test[key] = share
    # What the student's code printed while hidden checks ran can show their inputs: where hidden
    # checks ran it is shown as the hidden checks are (a test of its own, at their visibility).
    hidden_ran = any(check.visibility != "public" for step in result.steps for check in step.checks)
    printed = f"\n\n{messages.render('your_output')}\n{result.output}" if result.output and not hidden_ran else ""
    if result.output and hidden_ran:  # worth nothing: every test needs a score where the top level has none
        tests.append(
            {
                "name": messages.render("your_output"),
                "score": 0,
                "max_score": 0,
                "output": result.output,
                "visibility": hidden_visibility,
            }
        )
    # No top-level "score": Gradescope then adds up the tests' scores, and while any test is not
    # yet visible (the hidden ones: after_published) it shows students no total ("If test cases
    # are hidden, students will not be able to see their total score", its results.json
    # specification); a top-level score would override that sum and be the total they see.
    return {
        "execution_time": round(execution_time, 2),
        "output": gradescope_summary(result)
        + (f"\n{messages.render('graded_files', files=', '.join(result.graded_files))}" if result.graded_files else "")
        + printed,
        "stdout_visibility": "hidden",  # the log's table has the hidden checks' points
        "tests": tests,
        **graded_files_data(result),
    }


def exact_shares(values: list) -> list:
    """`values` rounded to 4 decimals so that they add up to their sum rounded to 4 decimals."""
    from autograder.routes.classroom import whole_points

    units = whole_points([value * 10_000 for value in values], sum(values) * 10_000)
    return [round(unit / 10_000, 4) for unit in units]


def graded_files_data(result) -> dict:
    """Which of the uploaded files were graded (GradeResult.graded_files, relative to the upload),
    as results.json's extra_data: the package's files, none of a whole repository's others."""
    if result.graded_files is None:
        return {}
    return {"extra_data": {"graded_files": list(result.graded_files), "package_root": result.package_root}}


def gradescope_summary(result):
    """The top-level text students see at once: the public checks' points only. The total with
    the hidden checks would tell what they scored before grades are published (their tests are
    `after_published`); Gradescope shows the score itself by its own visibility rules."""
    public = [c for step in result.steps for c in step.checks if c.visibility == "public" and c.passed is not None]
    hidden = sum(1 for step in result.steps for c in step.checks if c.visibility != "public" and c.passed is not None)
    text = (
        f"{result.assignment}: public checks {sum(c.points for c in public):.2f} / "
        f"{sum(c.max_points for c in public):.2f}"
    )
    if hidden:
        text += f"\n{hidden} hidden checks count too; their results show once grades are published."
    return text
