"""The student notebook: one per assignment, for JupyterLab and Google Colab, made from the same
sources as the other routes (the skeleton files in assignments/<package>/ and grading.yml).

    python -m autograder student-notebook OUT.ipynb [--assignment ID]

The first cell installs what the checks need (PyYAML; torch where it is missing, as Colab has it)
and unpacks the grader the student release ships (public checks only: no solutions, no hidden
checks, no known mistakes) beside the notebook. Each step's code cells write the package's files
(`%%writefile`), and its check cell calls routes.notebook.check_step: the in-process grader on
the public checks, the same per-step points as `pytest assignments/` (with --cuda)."""
import base64
import io
import tempfile
import zipfile
from pathlib import Path

INSTALL = '''# Run this cell first: it installs what the checks need and unpacks the grader (public checks only).
import base64, importlib.util, io, os, subprocess, sys, zipfile

missing = [name for name, module in (("pyyaml", "yaml"), ("torch", "torch"), ("numpy", "numpy"))
           if importlib.util.find_spec(module) is None]
if missing:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *missing])
GRADER = "{grader}"
zipfile.ZipFile(io.BytesIO(base64.b64decode(GRADER))).extractall(".")
sys.path.insert(0, os.getcwd())
os.makedirs({package!r}, exist_ok=True)  # the code cells write their files here
from autograder.routes.notebook import check_step'''

CHECK = "check_step({step_id!r}, assignment={assignment!r})"


def grader_archive(config) -> bytes:
    """A zip of what the student release holds of the grader: autograder/ and grading.yml."""
    from autograder.routes.release import release

    with tempfile.TemporaryDirectory() as temporary:
        out = release(Path(temporary) / "release", assignment=config.id)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.write(out / "grading.yml", "grading.yml")
            for path in sorted((out / "autograder").rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    archive.write(path, str(path.relative_to(out)))
        return buffer.getvalue()


def student_notebook(config, skeleton=None):
    """The notebook of `config` (an Assignment): the course notebook's explanations and code cells
    from the skeleton (assignments/<package>/ unless given), an install cell first, a public
    check cell per step, and no nbgrader metadata."""
    import nbformat

    from autograder import KIT
    from autograder.routes.course import course_notebook

    notebook = course_notebook(config, solutions=Path(skeleton or KIT / "assignments" / config.package))
    grader = base64.b64encode(grader_archive(config)).decode("ascii")
    for cell in notebook.cells:
        cell.metadata.pop("nbgrader", None)
        if cell.get("id") == "setup":
            cell.source = INSTALL.format(grader=grader, package=config.package)
        elif cell.get("id", "").startswith("check-"):
            cell.source = CHECK.format(step_id=cell["id"].removeprefix("check-"), assignment=config.id)
    nbformat.validate(notebook)
    return notebook
