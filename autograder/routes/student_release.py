"""The student release's files: assignments/ (skeletons), the parts of autograder/ that the public
checks need with every hidden check cut out, grading.yml, a student README, requirements.txt and
a pyproject.toml that lets `pytest assignments/` find the grader; and the zip of its grader that
a student notebook carries. release.py adds the notebooks (which carry this grader: built on
this module, so it imports no notebook code) and makes the Gradescope zip.
"""

import io
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from autograder import KIT
from autograder.engine.course.assignment import folder as assignment_folder
from autograder.engine.mistakes.diagnosis import public_message_ids
from autograder.engine.course.torch_pin import CPU_INDEX, GRADING_TORCH
from autograder.engine.course import config as grading_config
from autograder.engine.build.catalogs import write_student_catalogs
from autograder.engine.judge.results import WriteError
from autograder.engine.operations.kit_files import keep, release_manifest
from autograder.routes.classroom import workflow
from autograder.engine.checks import messages

HIDDEN_MARKER = "# ### BEGIN HIDDEN CHECKS"
PROBES_MARKER = "# ### PROBES"
# What a student's run needs of the grader: the engine (not operations/ nor build/: a batch and
# its shards, making skeletons, catalogs and fingerprints are the instructor's) and the in-process routes, each
# assignment's public checks, fingerprints and messages, and the sandbox (the Classroom workflow
# grades in it, so that the student's code never runs in the process that writes the grade).
# Not the known mistakes (a second reference), not the instructor's commands: routes/cli.py ships for
# `python -m autograder grade` and says that the others are the instructor's (cli.student_kit).
STUDENT_PARTS = [
    "__init__.py",
    "__main__.py",
    "engine/__init__.py",
    "engine/checks",
    "engine/course",
    "engine/scan",
    "engine/mistakes",
    "engine/judge",
    "harness",
    "sandbox",
    "routes/__init__.py",
    "routes/pytest_plugin.py",
    "routes/nbgrader_cell.py",
    "routes/public_view.py",
    "routes/plots.py",
    "routes/classroom.py",
    "routes/cli.py",
    "assignments/__init__.py",
]
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


def release_files(out, classroom="command", assignment=None, also=None, keep_manifest=True):
    """Write the student release into directory `out` (which must not exist yet): every
    assignment of grading.yml (or only `assignment`), with a GitHub Classroom workflow per
    assignment in `classroom` mode ("command" or "fractional"; see routes/classroom.py).
    `also(directory, graded)`, where given, writes more into it (release.py: the notebooks).
    Built aside and renamed at the end: a failed release leaves nothing that blocks the next.
    With `keep_manifest`, the manifest of its kit files goes into the instructor's course folder
    (operations/kit_files.py: grading a repository made from it says what changed there)."""

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
        write_release(partial, graded, classroom)
        if also is not None:
            also(partial, graded)
        (partial / "README.md").write_text(student_readme(graded, (partial / "notebooks").is_dir()))
        manifest = release_manifest(partial, [f"assignments/{config.package}" for config in graded])
        partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if keep_manifest:  # the instructor's, never the release's (operations/kit_files.py)
        try:
            keep(manifest)
        except (OSError, WriteError) as error:
            print(
                f"warning: the release's manifest could not be kept ({error}): grading its repositories "
                "will not say whether their kit files changed",
                file=sys.stderr,
            )
    return out


def write_release(out, graded, classroom):
    """The student release's files, its notebooks aside, into the existing empty directory
    `out`, for the Assignments `graded`."""

    workflows = out / ".github" / "workflows"
    workflows.mkdir(parents=True)
    for config in graded:
        name = "classroom.yml" if len(graded) == 1 else f"classroom-{config.id}.yml"
        (workflows / name).write_text(workflow(config, classroom, name))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    (out / "assignments").mkdir()
    for path in (KIT / "assignments").iterdir():
        if path.is_file():
            shutil.copyfile(path, out / "assignments" / path.name)
    grader = out / "autograder"
    for part in STUDENT_PARTS:
        source, target = KIT / "autograder" / part, grader / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=ignore)
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
        for path in sorted((here / "checks").glob("_*.py")):  # helpers of public checks (checks/_shared.py)
            if path.name != "__init__.py":
                shutil.copyfile(path, there / "checks" / path.name)
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
    return out


def _write_config(target, graded):
    """grading.yml, or only the entries of the assignments released when not all of them are;
    never its `defaults.seed` (without_seed)."""

    text = without_extensions(without_seed(grading_config.default_path().read_text()))
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


def without_extensions(text: str) -> str:
    """grading.yml's `text` without any `late.extensions`: who was given more time, and why, is
    no other student's business (the deadline and the schedule ship: they are the course's rules).
    Written anew (comments lost) only where there is one to cut."""
    import yaml

    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        return text
    entries = [data, *(data.get("assignments") or [])]
    cut = False
    for entry in entries:
        late = entry.get("late") if isinstance(entry, dict) else None
        if isinstance(late, dict) and "extensions" in late:
            late.pop("extensions")
            cut = True
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True) if cut else text


def without_seed(text: str) -> str:
    """grading.yml's `text` without `defaults.seed`: the hidden checks' inputs are drawn from it
    where it is set, so it is the instructor's alone (course/secret.py). Its lines are cut out,
    the rest left as written (comments, line numbers); a flow-style `defaults: {...}` is
    written anew without it, and so is one whose seed comes from elsewhere in YAML's terms (a
    merge key `<<: *anchor`): what is checked is the text as the grader reads it."""
    import yaml

    def seeded(text):
        data = yaml.safe_load(text)
        return isinstance(data, dict) and isinstance(data.get("defaults"), dict) and "seed" in data["defaults"]

    def rewritten(text):  # every alias and merge resolved, the seed left out
        data = yaml.safe_load(text)
        data["defaults"].pop("seed")
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)

    root = yaml.compose(text)
    if not isinstance(root, yaml.MappingNode):
        return text
    defaults = next((value for key, value in root.value if key.value == "defaults"), None)
    if not isinstance(defaults, yaml.MappingNode):
        return text
    found = next(((key, value) for key, value in defaults.value if key.value == "seed"), None)
    if found is None or defaults.flow_style:
        return rewritten(text) if seeded(text) else text
    key, value = found
    lines = text.splitlines(keepends=True)
    last = value.end_mark.line if value.end_mark.column else value.end_mark.line - 1
    kept = "".join(lines[: key.start_mark.line] + lines[last + 1 :])
    return rewritten(kept) if seeded(kept) else kept


def student_message(message_id: str, keep: set) -> bool:
    """Whether a student release ships this message: every one but the diagnoses outside `keep`
    (public_message_ids), and where the skeleton teaches them (`concept.cause.<diagnosis>`)."""
    for prefix in ("diagnosis.", "concept.cause."):
        if message_id.startswith(prefix):
            return message_id.removeprefix(prefix) in keep
    return True


def student_readme(graded, notebooks=True):
    """The student release's README.md: in Korean, then in English (the same content), naming
    the release's own folders, and its notebooks only where it has them (`notebooks`)."""

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
    files = ", ".join(f"`assignments/{c.package}/*.py`" for c in graded)
    books = ", ".join(f"`notebooks/{c.package}.ipynb`" for c in graded)
    written = ", ".join(f"`{c.package}/`" for c in graded)
    korean_notebooks = (
        f"""Jupyter, Colab 또는 JupyterHub에서 하려면 {books}를 여세요. 같은 단계와 검사가
들어 있고, 첫 셀이 필요한 것을 설치하고 채점기를 풉니다 (이 저장소의 다른 파일은 필요 없습니다).
노트북은 여러분의 코드를 노트북 옆의 {written}에 씁니다. GitHub Classroom의 push가 채점하는 것은
{files}이므로, Classroom 저장소에서는 그 파일들을 채우세요.

"""
        if notebooks
        else ""
    )
    english_notebooks = (
        f"""For Jupyter, Colab or a JupyterHub, open {books}: the same steps and checks;
its first cell installs what they need and unpacks the grader (it needs nothing else of this
repository). The notebook writes your code beside it, into {written}; a GitHub Classroom push grades
{files}, so in a Classroom repository fill in those.

"""
        if notebooks
        else ""
    )
    return f"""# {titles}

[한국어](#한국어) · [English](#english)

## 한국어

{files}의 TODO를 단계별로 채우고, 원하는 만큼 자주 채점해 보세요:

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

{korean_notebooks}각 파일은 그 단계의 설명으로 시작합니다 (한국어, 그다음 영어). 텐서는 배치가 먼저이고, 마스크는
**True = 막힘**인 bool 텐서입니다 (`nn.MultiheadAttention`과 같고, `F.scaled_dot_product_attention`은
반대입니다). 점수를 잃은 단계 아래의 첫 줄(`x`)은 가장 가능성이 큰 원인과 고치는 방법을 알려 줍니다.
그다음 줄들은 어떤 검사가 어떻게 실패했는지를 실패 종류마다 한 번씩 요약하고, `→`로 시작하는 줄은 그
개념을 설명하는 파일과 단락을 가리킵니다. 마지막 두 줄은 여러분의 코드가 여전히 틀리는 가장 작은 입력과,
그 입력에서 기대한 값과 여러분의 값입니다: 그 입력으로 직접 실행해 보면 어디서 틀리는지 찾기 쉽습니다.
`-v`를 붙이면 검사마다 자세한 내용이 나옵니다.

| 패키지 | 단계 | 내용 | 점수 |
|---|---|---|---|
{korean_rows}

여기서(pytest, 노트북, GitHub Classroom의 push마다) 보는 점수는 피드백입니다: 여러분이 바꿀 수 있는 이
저장소의 파일로 계산됩니다. 성적은 강사가 강의의 채점기로 여러분의 패키지 파일만 채점한 점수입니다.
최종 점수에는 숨은 검사(다른 크기, 다른 무작위 입력)도 들어갑니다. 그러니 공개 검사에만 맞춘 코드가
아니라 일반적인 코드를 작성하세요. 단계에서 직접 작성하라고 한 PyTorch 함수를 호출하면 (예: attention
단계의 `F.scaled_dot_product_attention`) 그 단계는 0점입니다.

## English

Fill in the TODOs in {files}, step by step, and check your work as often as you like:

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

{english_notebooks}Each file starts with an explanation of its step (in Korean, then in English). Tensors are
batch-first, and a mask is a bool tensor with **True = blocked** (as in `nn.MultiheadAttention`;
`F.scaled_dot_product_attention` uses the opposite). Under a step that lost points, the first line
(`x`) names the likely cause and how to fix it. The lines after it sum up what failed, once per kind
of failure; the line starting with `→` names the file and paragraph that explain the concept; and
the last two show the smallest input on which your code still goes wrong, with what was expected
and what yours gave: run it yourself to see where. `-v` adds every check's details.

| package | step | what | points |
|---|---|---|---|
{rows}

The score you see here (pytest, the notebook, each GitHub Classroom push) is feedback: it is computed
by this repository's files, which you can change. Your grade is your instructor's grading of your
package's files with the course's own grader.
Your grade also runs hidden checks (other sizes, other random inputs), so write general code,
not code fitted to the public checks. Calling the PyTorch function a step asks you to write
(e.g. `F.scaled_dot_product_attention` in the attention step) scores zero for that step.
"""


def grader_archive(config) -> bytes:
    """A zip of what the student release of `config` holds of the grader: autograder/ and
    grading.yml."""
    with tempfile.TemporaryDirectory() as temporary:
        out = release_files(Path(temporary) / "release", assignment=config.id, keep_manifest=False)
        return release_archive(out)


def release_archive(release_dir) -> bytes:
    """A zip of `release_dir`'s grader: grading.yml and autograder/ (no bytecode)."""
    release_dir = Path(release_dir)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(release_dir / "grading.yml", "grading.yml")
        for path in sorted((release_dir / "autograder").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, str(path.relative_to(release_dir)))
    return buffer.getvalue()
