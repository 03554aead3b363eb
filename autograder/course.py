"""The nbgrader course: one notebook made from solutions/mha/*.py and grading.yml.

    python -m autograder nbgrader COURSE_DIR     # nbgrader_config.py + source/mha/mha.ipynb

The notebook teaches the steps in grading.yml's order. For each step: the files it grades that
no earlier step showed (the file's docstring as a markdown cell, then a solution cell that writes
the file with `%%writefile mha/<file>`, its `### BEGIN/END SOLUTION` regions untouched), then a
locked check cell worth the step's points that calls autograder.notebook.check_step. The hidden
checks are switched on between `### BEGIN/END HIDDEN TESTS`, which nbgrader removes from the
students' copy and from the feedback. A copy is kept in solutions/mha.ipynb, and
`python -m autograder skeleton --check` fails when it is out of date.

`notebook_files` reads the files back out of a (student's) notebook, so that every other route
can grade a notebook exactly as nbgrader does.
"""
import ast
import json
import re
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
NOTEBOOK = "mha.ipynb"
ASSIGNMENT = "mha"
WRITEFILE = re.compile(r"^%%writefile\s+mha/([A-Za-z_][A-Za-z0-9_]*\.py)\s*$")
PLACEHOLDER = 'raise NotImplementedError("TODO")'  # the skeleton's, so both copies read the same

INTRODUCTION = """# Multi-head attention from scratch

Each step below has an explanation, a code cell to complete and a check cell.

* Run the setup cell first. Each code cell writes one file of the package `mha/` (the first
  line, `%%writefile mha/<file>.py`, does that): **run it again after every change**.
* Replace every `raise NotImplementedError("TODO")` with your code. Keep the `%%writefile` line.
* The check cell after a step grades it: it prints a table with the points and, for each check
  that failed, what is wrong. The grader runs more checks later, with other sizes.
* Conventions: batch first, `(B, ...)`; B batch, L length, D = d_model, H heads,
  d_k = D // H; a mask is a bool tensor with True = BLOCKED.
"""

SETUP = """import os

os.makedirs("mha", exist_ok=True)  # the solution cells write their files here
from autograder.notebook import check_step"""

CHECK = """hidden = False
### BEGIN HIDDEN TESTS
hidden = True
### END HIDDEN TESTS
check_step({step_id!r}, hidden=hidden)"""

NBGRADER_CONFIG = """# nbgrader configuration of the MHA Lab course, written by `python -m autograder nbgrader`.
import os

c = get_config()  # noqa: F821 - provided by nbgrader
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "mha-lab"
# The students' copy shows the same placeholder as assignments/mha/*.py.
c.ClearSolutions.code_stub = {{"python": {placeholder!r}}}
# Feedback must not show what runs the hidden checks.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
# One notebook imports torch and grades every step (the cuda step on a simulated GPU).
c.Execute.timeout = {timeout}
"""


def nbgrader_metadata(grade_id, solution=False, grade=False, locked=False, points=None):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def split_docstring(source):
    """(docstring, the code after it) of a module's source."""
    tree = ast.parse(source)
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return "", source
    rest = source.splitlines(keepends=True)[first.end_lineno:]
    return ast.get_docstring(tree), "".join(rest).lstrip("\n")


def file_cells(name, source):
    """Markdown (the module docstring) and the solution cell that writes mha/<name>."""
    import nbformat

    doc, code = split_docstring(source)
    stem = name.removesuffix(".py")
    text = f"### `mha/{name}`\n\n{doc.strip()}" if doc else f"### `mha/{name}`"
    return [
        nbformat.v4.new_markdown_cell(text, id=f"about-{stem}"),
        nbformat.v4.new_code_cell(f"%%writefile mha/{name}\n{code.rstrip()}\n", id=f"file-{stem}",
                                  metadata=nbgrader_metadata(f"file_{stem}", solution=True)),
    ]


def course_notebook(config, solutions=KIT / "solutions" / "mha"):
    """The instructor's notebook (solutions and hidden-test switches in) from `config` and the
    reference files."""
    import nbformat

    from .checks import step_modules

    modules = step_modules()
    cells = [
        nbformat.v4.new_markdown_cell(INTRODUCTION, id="introduction"),
        nbformat.v4.new_code_cell(SETUP, id="setup", metadata=nbgrader_metadata("setup", locked=True)),
    ]
    shown = set()
    for step in config.steps:
        cells.append(nbformat.v4.new_markdown_cell(f"## Step: {step.title} ({step.points:g} points)",
                                                   id=f"step-{step.id}"))
        for name in modules[step.id].FILES:
            if name not in shown:
                shown.add(name)
                cells += file_cells(name, (Path(solutions) / name).read_text(encoding="utf-8"))
        cells.append(nbformat.v4.new_code_cell(
            CHECK.format(step_id=step.id), id=f"check-{step.id}",
            metadata=nbgrader_metadata(f"check_{step.id}", grade=True, locked=True, points=step.points)))
    notebook = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    })
    nbformat.validate(notebook)
    return notebook


def notebook_text(notebook):
    return json.dumps(notebook, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def write_course_notebook(config, target=KIT / "solutions" / NOTEBOOK, dry_run=False):
    """Regenerate solutions/mha.ipynb; return [target] if it changed (or would)."""
    text = notebook_text(course_notebook(config))
    target = Path(target)
    if target.is_file() and target.read_text(encoding="utf-8") == text:
        return []
    if not dry_run:
        target.write_text(text, encoding="utf-8")
    return [target]


def write_course(course_dir, config, timeout=900):
    """An nbgrader course in `course_dir`: nbgrader_config.py and source/mha/mha.ipynb."""
    course_dir = Path(course_dir)
    targets = [course_dir / "nbgrader_config.py", course_dir / "source" / ASSIGNMENT / NOTEBOOK]
    existing = [str(path) for path in targets if path.exists()]
    if existing:
        raise FileExistsError(f"already there: {', '.join(existing)}")
    targets[1].parent.mkdir(parents=True)
    targets[0].write_text(NBGRADER_CONFIG.format(placeholder=PLACEHOLDER, timeout=timeout), encoding="utf-8")
    targets[1].write_text(notebook_text(course_notebook(config)), encoding="utf-8")
    return targets


def notebook_files(notebook):
    """{file name: source} written by the notebook's `%%writefile mha/<file>` cells (the last
    cell wins, as when the notebook runs top to bottom). `notebook`: a path or the parsed JSON.
    Plain JSON on purpose: grading a notebook needs no Jupyter package."""
    if not isinstance(notebook, dict):
        notebook = json.loads(Path(notebook).read_text(encoding="utf-8"))
    files = {}
    for cell in notebook.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        first, _, body = source.partition("\n")
        match = WRITEFILE.match(first.strip())
        if match:
            files[match.group(1)] = body if body.endswith("\n") else body + "\n"
    return files


def fill_notebook(notebook, files):
    """A copy of `notebook` whose `%%writefile mha/<file>` cells hold `files[<file>]` instead."""
    import nbformat

    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))
    for cell in notebook.cells:
        first = cell.source.partition("\n")[0]
        match = cell.cell_type == "code" and WRITEFILE.match(first.strip())
        if match and match.group(1) in files:
            cell.source = f"{first}\n{files[match.group(1)]}"
    return notebook
