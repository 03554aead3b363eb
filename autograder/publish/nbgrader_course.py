"""The nbgrader course: one notebook per assignment, made from solutions/<id>/*.py and grading.yml.

    python -m autograder nbgrader COURSE_DIR     # nbgrader_config.py + source/<id>/<id>.ipynb

The notebook teaches the steps in grading.yml's order. For each step: the files it grades that
no earlier step showed (the file's docstring as a markdown cell, then a solution cell that writes
the file with `%%writefile <id>/<file>`, its `### BEGIN/END SOLUTION` regions untouched), then a
locked check cell worth the step's points that calls routes.nbgrader_cell.check_step with those
points (frozen: a later edit of grading.yml needs a regeneration, and check_step says so): the
public checks, as feedback. Its nbgrader_config.py has autograde run each notebook in a confined
kernel without the kit (routes/nbgrader_kernel.py) and then the sandboxed judge, whose scores are
the gradebook's (routes/nbgrader_gradebook.py; `nbgrader-sync` does the same for a whole class,
routes/cli/nbgrader_sync.py), and feedback pages leave the kit out (routes/nbgrader_feedback.py).
A copy is kept in solutions/<id>.ipynb, and
`python -m autograder skeleton --check` fails when it is out of date.

`notebook_files` reads the files back out of a (student's) notebook, so that every other route
can grade a notebook exactly as nbgrader does.
"""

import ast
import base64
import json
from pathlib import Path

from autograder import KIT
from autograder.engine.checks import messages
from autograder.engine.course.torch_pin import CPU_INDEX, GRADING_TORCH
from autograder.engine.scan.submission import writefile_pattern
from autograder.publish.grader_home import grader_home
from autograder.publish.student_release import grader_archive

PLACEHOLDER = 'raise NotImplementedError("TODO")'  # the skeleton's, so both copies read the same

# solutions/notes/<package>/<file stem>.md: the course text of a file that its docstring leaves
# out (the why, derivations, precision notes), shown after the docstring in the file's cell.
NOTES = KIT / "solutions" / "notes"

INTRODUCTION = """# {korean_title} / {title}

{about}

[한국어]
아래의 각 단계에는 설명, 채울 코드 셀, 검사 셀이 있습니다.

* 설정 셀을 먼저 실행하세요. 코드 셀 하나가 패키지 `{package}/`의 파일 하나를 씁니다 (첫 줄
  `%%writefile {package}/<file>.py`가 그 일을 합니다): **고칠 때마다 그 셀을 다시 실행하세요**.
* `raise NotImplementedError("TODO")`를 모두 여러분의 코드로 바꾸세요. `%%writefile` 줄은 그대로 두세요.
* 단계 뒤의 검사 셀이 그 단계를 채점합니다. 점수를 출력하고, 점수를 잃었으면 가장 가능성이 큰 원인을
  먼저, 그다음 실패한 검사와 그 개념을 설명하는 단락(`→`)을 알려 줍니다. 나중의 채점은 다른 크기로 더
  많이 검사합니다.
* 메시지를 한국어로 보려면 설정 셀 앞에 `%env MHA_LAB_LANG=ko` 셀을 하나 두고 실행하세요.
* 규칙: 배치가 먼저, `(B, ...)`; B 배치, L 길이, D = d_model, H 헤드 수, d_k = D // H; 마스크는
  True = 막힘인 bool 텐서입니다.

[English]
Each step below has an explanation, a code cell to complete and a check cell.

* Run the setup cell first. Each code cell writes one file of the package `{package}/` (the first
  line, `%%writefile {package}/<file>.py`, does that): **run it again after every change**.
* Replace every `raise NotImplementedError("TODO")` with your code. Keep the `%%writefile` line.
* The check cell after a step grades it: it prints the points and, where the step lost points, the
  likely cause first, then what failed and the paragraph that explains it (`→`). The grader runs
  more checks later, with other sizes.
* Messages in Korean: a cell `%env MHA_LAB_LANG=ko`, run before the setup cell.
* Conventions: batch first, `(B, ...)`; B batch, L length, D = d_model, H heads,
  d_k = D // H; a mask is a bool tensor with True = BLOCKED.
"""

STEP = "## 단계 / Step: {korean_title} / {title} ({points:g}점 / points)"

SETUP = """import os

os.makedirs({package!r}, exist_ok=True)  # the solution cells write their files here
{install}from autograder.routes.nbgrader_cell import check_step"""

# Where `python -m autograder nbgrader` puts the grader: the copy in solutions/ leaves it out
# (it would change with every change of the grader), the course's notebook carries it.
NO_GRADER = "# (the course's notebook carries the grader here, for a hub where the kit is not installed)\n"

# What a check cell says is feedback from the student's kernel: public checks only, always. The
# grade of record is the sandboxed judge's (routes/cli/nbgrader_sync.py); nbgrader autograde runs it
# too, after the kernel (routes/nbgrader_gradebook.py JudgedScores). No hidden-tests region:
# nbgrader's gradebook keeps a locked cell's checksum from before it cuts such a region, so every
# check cell would be reported changed at autograde.
CHECK = """# 피드백(공개 검사만): 성적은 코스의 채점기가 샌드박스에서 매깁니다
# feedback (public checks only): the grade is the course's sandboxed grader's
check_step({step_id!r}, assignment={assignment!r}, points={points!r})"""

# The preprocessors nbgrader autograde runs after sanitizing a notebook: nbgrader 0.9's own
# (Autograde.autograde_preprocessors), with the kernel confined (its Execute replaced), nothing
# active left of what it made (InertOutputs: formgrader shows the notebook to the logged-in
# instructor), and the sandboxed judge's scores written after the kernel's (JudgedScores, after
# SaveAutoGrades).
# Named, not imported: the kit is imported when autograde runs, and if it cannot be, autograde
# fails rather than running an unconfined kernel. tests/test_nbgrader_sync.py compares this list with
# nbgrader's own.
AUTOGRADE = (
    "autograder.routes.nbgrader_kernel.ConfinedExecute",
    "autograder.routes.nbgrader_kernel.InertOutputs",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "autograder.routes.nbgrader_gradebook.JudgedScores",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
)
FEEDBACK = (
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "autograder.routes.nbgrader_feedback.WithoutKit",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
)

NBGRADER_CONFIG = """# nbgrader configuration of the MHA Lab course, written by `python -m autograder nbgrader`.
import os

c = get_config()  # noqa: F821 - provided by nbgrader
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "mha-lab"
# The students' copy shows the same placeholder as the skeletons in assignments/.
c.ClearSolutions.code_stub = {{"python": {placeholder!r}}}
# Autograde: each notebook runs in a kernel confined to its own folder, without the kit (public
# checks only, as feedback); then the sandboxed judge grades it, and its scores are the gradebook's.
c.Autograde.autograde_preprocessors = {autograde!r}
# Feedback shows no file or path of the kit, and not what runs the hidden checks.
c.GenerateFeedback.preprocessors = {feedback!r}
# Per cell; ConfinedExecute.budget bounds the whole notebook.
c.Execute.timeout = {timeout}
"""


def nbgrader_metadata(grade_id, solution=False, grade=False, locked=False, points=None):
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


# A package docstring tells terminal users when to run pytest; a notebook's first cell says the
# same with its check cells (the sentence of each language, where the docstring has one).
NOTEBOOK_WORK_ORDER = {
    "ko": "아래 순서대로 파일마다 TODO를 채우고, 한 단계를 끝낼 때마다 그 단계 뒤의 검사 셀을 실행하세요.",
    "en": "Fill in the TODOs file by file, in this order, and run a step's check cell when you finish it.",
}


def notebook_about(about: str) -> str:
    """A package docstring as a notebook's first cell says it: each line that tells to run
    `pytest assignments/` becomes the notebook's instruction in the same language."""
    out = []
    for line in about.splitlines():
        if "pytest assignments/" in line:
            korean = any("\uac00" <= char <= "\ud7a3" for char in line)
            line = NOTEBOOK_WORK_ORDER["ko" if korean else "en"]
        out.append(line)
    return "\n".join(out)


def split_docstring(source):
    """(docstring, the code after it) of a module's source."""
    tree = ast.parse(source)
    first = tree.body[0] if tree.body else None
    if not (
        isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    ):
        return "", source
    rest = source.splitlines(keepends=True)[first.end_lineno :]
    return ast.get_docstring(tree), "".join(rest).lstrip("\n")


def file_cells(package, name, source, notes: str = ""):
    """Markdown (the module docstring, then `notes`) and the solution cell that writes <package>/<name>."""
    import nbformat

    doc, code = split_docstring(source)
    stem = name.removesuffix(".py")
    text = f"### `{package}/{name}`\n\n{doc.strip()}" if doc else f"### `{package}/{name}`"
    if notes.strip():
        text += f"\n\n{notes.strip()}"
    return [
        nbformat.v4.new_markdown_cell(text, id=f"about-{stem}"),
        nbformat.v4.new_code_cell(
            f"%%writefile {package}/{name}\n{code.rstrip()}\n",
            id=f"file-{stem}",
            metadata=nbgrader_metadata(f"file_{stem}", solution=True),
        ),
    ]


def course_notebook(config, solutions=None, grader: str = None):
    """The instructor's notebook (solutions in) from `config` (an Assignment) and its reference
    files (solutions/<id>/ unless given). `grader`: the student release's grader, zipped and
    base64-encoded (student_release.grader_archive), which the setup cell installs where the kit
    is not (a hub): the course's notebook carries it, the copy in solutions/ does not."""
    import nbformat

    solutions = Path(solutions or KIT / "solutions" / config.package)
    modules = config.step_modules()
    about, _ = (
        split_docstring((solutions / "__init__.py").read_text(encoding="utf-8"))
        if (solutions / "__init__.py").is_file()
        else ("", "")
    )
    cells = [
        nbformat.v4.new_markdown_cell(
            INTRODUCTION.format(
                korean_title=messages.title(f"assignment_title.{config.id}", config.title, "ko"),
                title=config.title,
                about=notebook_about(about.strip()),
                package=config.package,
            ),
            id="introduction",
        ),
        nbformat.v4.new_code_cell(
            SETUP.format(package=config.package, install=NO_GRADER if grader is None else installer(grader)),
            id="setup",
            metadata=nbgrader_metadata("setup", locked=True),
        ),
    ]
    shown = set()
    for step in config.steps:
        cells.append(
            nbformat.v4.new_markdown_cell(
                STEP.format(
                    korean_title=messages.title(f"step_title.{config.id}.{step.id}", step.title, "ko"),
                    title=step.title,
                    points=step.points,
                ),
                id=f"step-{step.id}",
            )
        )
        for name in modules[step.id].FILES:
            if name not in shown:
                shown.add(name)
                notes = NOTES / config.package / name.replace(".py", ".md")
                cells += file_cells(
                    config.package,
                    name,
                    (solutions / name).read_text(encoding="utf-8"),
                    notes.read_text(encoding="utf-8") if notes.is_file() else "",
                )
        cells.append(
            nbformat.v4.new_code_cell(
                CHECK.format(step_id=step.id, assignment=config.id, points=step.points),
                id=f"check-{step.id}",
                metadata=nbgrader_metadata(f"check_{step.id}", grade=True, locked=True, points=step.points),
            )
        )
    notebook = nbformat.v4.new_notebook(
        cells=cells,
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
    )
    nbformat.validate(notebook)
    return notebook


def notebook_text(notebook):
    return json.dumps(notebook, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def write_course_notebook(config, target=None, dry_run=False):
    """Regenerate solutions/<id>.ipynb; return [target] if it changed (or would)."""
    text = notebook_text(course_notebook(config))
    target = Path(target or KIT / "solutions" / f"{config.package}.ipynb")
    if target.is_file() and target.read_text(encoding="utf-8") == text:
        return []
    if not dry_run:
        target.write_text(text, encoding="utf-8")
    return [target]


def write_course(course_dir, graded, timeout=300):
    """An nbgrader course in `course_dir`: nbgrader_config.py and, per Assignment of `graded`
    (one or a list), source/<id>/<id>.ipynb, carrying the grader (public checks) for a hub."""
    graded = graded if isinstance(graded, list) else [graded]
    course_dir = Path(course_dir)
    targets = [
        course_dir / "nbgrader_config.py",
        *(course_dir / "source" / config.id / f"{config.package}.ipynb" for config in graded),
    ]
    existing = [str(path) for path in targets if path.exists()]
    if existing:
        raise FileExistsError(f"already there: {', '.join(existing)}")
    targets[0].parent.mkdir(parents=True, exist_ok=True)
    targets[0].write_text(
        NBGRADER_CONFIG.format(
            placeholder=PLACEHOLDER, timeout=timeout, autograde=list(AUTOGRADE), feedback=list(FEEDBACK)
        ),
        encoding="utf-8",
    )
    for config, target in zip(graded, targets[1:], strict=True):
        target.parent.mkdir(parents=True)
        grader = base64.b64encode(grader_archive(config)).decode("ascii")
        target.write_text(notebook_text(course_notebook(config, grader=grader)), encoding="utf-8")
    return targets


def installer(grader: str) -> str:
    """The setup cell's lines that make `autograder` importable where the kit is not installed
    (a JupyterHub that has only the notebook, Colab): install what the checks need from PyPI
    (torch as the grading's, in its CPU build, only where there is none) and unpack `grader` (the
    student release's grader, base64 zip) into a folder of the user's own (grader_home: never a
    folder another user of a shared machine could have made). Where the kit is installed
    (nbgrader autograde, the instructor's) it is used as it is."""
    import inspect
    import textwrap

    home = textwrap.indent(inspect.getsource(grader_home), "    ")
    return INSTALLER.format(grader=grader, torch=GRADING_TORCH, cpu_index=CPU_INDEX).replace("{home}", home)


INSTALLER = """GRADER = "{grader}"  # 채점기(공개 검사만) / the grader (public checks only), for where the kit is not installed
import importlib.util

if importlib.util.find_spec("autograder") is None:
    import subprocess, sys

    needed = [name for name, module in (("pyyaml", "yaml"), ("jsonschema", "jsonschema"), ("numpy", "numpy"))
              if importlib.util.find_spec(module) is None]
    if importlib.util.find_spec("torch") is None:
        needed += ["torch=={torch}", "--extra-index-url", "{cpu_index}"]
    if needed:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *needed])

{{home}}
    sys.path.insert(0, grader_home(GRADER))  # 이 사용자만 쓸 수 있는 폴더 / a folder only this user can write
from autograder.engine.course.torch_pin import torch_note

if torch_note():  # another torch than the grading's: say so before any check runs
    print(torch_note())
"""


def fill_notebook(notebook, files, package):
    """A copy of `notebook` whose `%%writefile <package>/<file>` cells hold `files[<file>]` instead."""
    import nbformat

    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))
    for cell in notebook.cells:
        first = cell.source.partition("\n")[0]
        match = cell.cell_type == "code" and writefile_pattern(package).match(first.strip())
        if match and match.group(1) in files:
            cell.source = f"{first}\n{files[match.group(1)]}"
    return notebook
