"""The student release's README.md: what a student reads first in the repository or folder they
get, in Korean, then in English (the same content), naming the release's own folders."""

from autograder.engine.checks import messages
from autograder.engine.course.torch_pin import CPU_INDEX, GRADING_TORCH


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

{korean_notebooks}각 파일은 그 단계의 설명과 작은 예시로 시작합니다. 텐서는 배치가 먼저이고, 마스크는
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

{english_notebooks}Each file starts with an explanation of its step and a worked example. Tensors are
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
