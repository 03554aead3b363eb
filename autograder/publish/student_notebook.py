"""The student notebook: one per assignment, for JupyterLab and Google Colab, made from the same
sources as the other routes (the skeleton files in assignments/<package>/ and grading.yml).

    python -m autograder student-notebook OUT.ipynb [--assignment ID]

The first cell installs what the checks need (PyYAML, jsonschema, numpy; the grading's torch where
there is none, as Colab has one) and unpacks the grader the student release ships (public checks
only: no solutions, no hidden checks, no known mistakes) into a folder of its own, where the kit
is not installed (nbgrader_course.installer). `release` writes one per assignment (notebooks/<package>.ipynb). Each step's code cells write the package's files
(`%%writefile`), and its check cell calls routes.nbgrader_cell.check_step: the in-process grader on
the public checks, the same per-step points as `pytest assignments/` (with --cuda). What the
notebook says is in Korean, then English (the titles from the assignment's catalog), and the
setup cell's `LANG` chooses the checks' language (`lang="ko"`)."""

import base64
from pathlib import Path

from autograder import KIT
from autograder.engine.checks import messages
from autograder.publish.nbgrader_course import course_notebook, installer, notebook_about, split_docstring
from autograder.publish.student_release import grader_archive

INSTALL = """# 이 셀을 먼저 실행하세요: 검사에 필요한 것을 설치하고 채점기(공개 검사만)를 풉니다.
# Run this cell first: it installs what the checks need and unpacks the grader (public checks only).
import os

# 메시지와 점수표의 언어 / the language of the messages and score tables: "ko" 한국어, "en" English,
# None: MHA_LAB_LANG 또는 로케일 / MHA_LAB_LANG or the locale. 검사 셀은 check_step(..., lang=LANG)을
# 부릅니다 / the check cells call check_step(..., lang=LANG); 한 셀만 / one cell only: lang="ko".
LANG = None

os.makedirs({package!r}, exist_ok=True)  # 코드 셀이 파일을 여기에 씁니다 / the code cells write their files here
{install}from autograder.routes.nbgrader_cell import check_step"""

CHECK = "check_step({step_id!r}, assignment={assignment!r}, lang=LANG)"

INTRODUCTION = """# {korean_title} / {title}

{about}

[한국어]
아래의 각 단계에는 설명, 채울 코드 셀, 검사 셀이 있습니다.

* 설정 셀을 먼저 실행하세요. 코드 셀 하나가 패키지 `{package}/`의 파일 하나를 씁니다 (첫 줄
  `%%writefile {package}/<file>.py`가 그 일을 합니다): **고칠 때마다 그 셀을 다시 실행하세요**.
* `raise NotImplementedError("TODO")`를 모두 여러분의 코드로 바꾸세요. `%%writefile` 줄은 그대로 두세요.
* 단계 뒤의 검사 셀이 그 단계를 채점합니다. 점수를 출력하고, 점수를 잃었으면 가장 가능성이 큰 원인(`x`)을
  먼저, 그다음 실패한 검사와 그 개념을 설명하는 파일과 단락(`→`), 아직도 틀리는 가장 작은 입력을 알려
  줍니다. 검사마다 자세한 내용은 `check_step(..., verbose=True)`. 나중의 채점은 다른 크기로 더 많이 검사합니다.
* 메시지를 한국어로 보려면 설정 셀에서 `LANG = "ko"`로 바꾸세요 (검사 셀 하나만이라면
  `check_step(..., lang="ko")`).
* 규칙: 배치가 먼저, `(B, ...)`; B 배치, L 길이, D = d_model, H 헤드 수, d_k = D // H; 마스크는
  True = 막힘인 bool 텐서입니다.

[English]
Each step below has an explanation, a code cell to complete and a check cell.

* Run the setup cell first. Each code cell writes one file of the package `{package}/` (the first
  line, `%%writefile {package}/<file>.py`, does that): **run it again after every change**.
* Replace every `raise NotImplementedError("TODO")` with your code. Keep the `%%writefile` line.
* The check cell after a step grades it: it prints the points and, where the step lost points, the
  likely cause first (`x`), then what failed, the file and paragraph that explain it (`→`) and the
  smallest input that still fails; `check_step(..., verbose=True)` adds every check's details. The
  grader runs more checks later, with other sizes.
* Messages in Korean: set `LANG = "ko"` in the setup cell (or `check_step(..., lang="ko")` in one
  check cell); `LANG = "en"` for English.
* Conventions: batch first, `(B, ...)`; B batch, L length, D = d_model, H heads,
  d_k = D // H; a mask is a bool tensor with True = BLOCKED.
"""


def student_notebook(config, skeleton=None, grader: bytes = None):
    """The notebook of `config` (an Assignment): the course notebook's explanations and code cells
    from the skeleton (assignments/<package>/ unless given), an install cell first (carrying
    `grader`, a release_archive; default: grader_archive(config)), a public check cell per
    step, and no nbgrader metadata."""
    import nbformat

    skeleton = Path(skeleton or KIT / "assignments" / config.package)
    notebook = course_notebook(config, solutions=skeleton)
    grader = base64.b64encode(grader if grader is not None else grader_archive(config)).decode("ascii")
    about, _ = (
        split_docstring((skeleton / "__init__.py").read_text(encoding="utf-8"))
        if (skeleton / "__init__.py").is_file()
        else ("", "")
    )
    for cell in notebook.cells:
        cell.metadata.pop("nbgrader", None)
        if cell.get("id") == "introduction":
            cell.source = INTRODUCTION.format(
                korean_title=messages.title(f"assignment_title.{config.id}", config.title, "ko"),
                title=config.title,
                about=notebook_about(about.strip()),
                package=config.package,
            )
        elif cell.get("id") == "setup":
            cell.source = INSTALL.format(install=installer(grader), package=config.package)
        elif cell.get("id", "").startswith("check-"):
            cell.source = CHECK.format(step_id=cell["id"].removeprefix("check-"), assignment=config.id)
    nbformat.validate(notebook)
    return notebook
