"""The notebooks students get run where only the notebook and published packages are: a fresh
virtual environment with the grading's torch and a Jupyter kernel, without the kit (a
JupyterHub that nbgrader hands the notebook out on, Colab). The notebook carries the grader.

The wheels come from a folder made once (MHA_LAB_CACHE/test-wheels, by `pip download`, which
takes torch from pip's configured local wheels where there are some); the notebook's own `pip
install` is pointed at that folder too (PIP_NO_INDEX, PIP_FIND_LINKS), so the test needs no
network after the first run.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import cache_base
from autograder.engine.course import config as grading_config
from autograder.engine.course.torch_pin import GRADING_TORCH
from conftest import SOLUTIONS

if not os.environ.get("MHA_LAB_CI"):  # CI installs the instructor extra: never skip there
    pytest.importorskip("nbgrader", reason="pip install -e .[instructor]")
import nbformat  # noqa: E402 - comes with nbgrader

pytestmark = pytest.mark.slow

NEEDED = [f"torch=={GRADING_TORCH}", "ipykernel", "nbclient", "nbformat", "pyyaml", "jsonschema", "numpy"]


def wheel_folder() -> Path:
    folder = cache_base() / "test-wheels"
    marker = folder / ("complete-" + "-".join(name.replace("=", "") for name in NEEDED))
    if not marker.exists():
        folder.mkdir(parents=True, exist_ok=True)
        completed = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "-d", str(folder), *NEEDED],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        marker.touch()
    return folder


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """(a fresh venv's python with torch and a kernel but no kit, the environment for it)."""
    root = tmp_path_factory.mktemp("hub")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=300)
    python = root / "venv" / "bin" / "python"
    wheels = wheel_folder()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env.update(
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheels),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        TMPDIR=str(root / "tmp"),
        HOME=str(root / "home"),
        MHA_LAB_CACHE=str(root / "home" / "cache"),
    )
    (root / "tmp").mkdir()
    (root / "home").mkdir()
    install = [
        str(python),
        "-m",
        "pip",
        "install",
        "-q",
        f"torch=={GRADING_TORCH}",
        "ipykernel",
        "nbclient",
        "nbformat",
    ]
    completed = subprocess.run(install, env=env, capture_output=True, text=True, timeout=1800)
    assert completed.returncode == 0, completed.stderr[-3000:]
    check = subprocess.run(
        [str(python), "-c", "import importlib.util; print(importlib.util.find_spec('autograder'))"],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert check.stdout.strip() == "None", "the kit is importable in the hub's environment: the test proves nothing"
    return python, env


def execute(python, env, notebook_path: Path) -> dict:
    """Run the notebook with nbclient in the hub's environment, in the notebook's folder; the
    executed notebook."""
    out = notebook_path.with_suffix(".done.ipynb")
    script = (
        "import sys, nbformat, nbclient\n"
        "nb = nbformat.read(sys.argv[1], as_version=4)\n"
        "client = nbclient.NotebookClient(nb, timeout=900, kernel_name='python3',\n"
        "                                 resources={'metadata': {'path': sys.argv[3]}}, allow_errors=True)\n"
        "client.execute()\n"
        "nbformat.write(nb, sys.argv[2])\n"
    )
    completed = subprocess.run(
        [str(python), "-c", script, str(notebook_path), str(out), str(notebook_path.parent)],
        env=env,
        cwd=notebook_path.parent,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return nbformat.read(str(out), as_version=4)


def step_points(executed) -> dict:
    """{check cell id: the points its check_step returned}; fails on any cell that raised."""
    points = {}
    for cell in executed.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        assert not errors, f"{cell.get('id')}: {errors[0].ename}: {errors[0].evalue}"
        result = [o for o in cell.outputs if o.output_type == "execute_result"]
        if cell.get("id", "").startswith("check-") and result:
            points[cell["id"].removeprefix("check-")] = float(result[0].data["text/plain"])
    return points


def reference_files():
    return {p.name: p.read_text() for p in sorted((SOLUTIONS / "mha").glob("*.py"))}


def test_the_notebook_nbgrader_releases_runs_on_a_hub_without_the_kit(hub, tmp_path):
    from autograder.publish.nbgrader_course import fill_notebook
    from autograder.routes.cli import main as cli
    from test_nbgrader import run_nbgrader

    python, env = hub
    course = tmp_path / "course"
    assert cli(["nbgrader", str(course)]) == 0
    run_nbgrader(course, "generate_assignment", "mha", "--create")
    released = nbformat.read(str(course / "release" / "mha" / "mha.ipynb"), as_version=4)
    student = tmp_path / "student"  # what a hub's student has: the notebook, alone in its folder
    student.mkdir()
    nbformat.write(fill_notebook(released, reference_files(), "mha"), str(student / "mha.ipynb"))
    executed = execute(python, env, student / "mha.ipynb")
    points = step_points(executed)
    steps = [step.id for step in grading_config.load(assignment="mha").steps]
    assert sorted(points) == sorted(steps)
    for step in steps:
        if step != "cuda":  # the simulated device needs a compiler here; its cell still must not fail
            assert points[step] > 0, (step, points)
    assert sum(points.values()) >= 95, points
    setup = next(cell for cell in executed.cells if cell.get("id") == "setup")
    assert not [o for o in setup.outputs if o.output_type == "stream" and "torch" in o.get("text", "")]  # same torch


def test_the_released_student_notebook_runs_there_too(hub, tmp_path):
    from autograder.publish.nbgrader_course import fill_notebook
    from autograder.publish.release import release

    python, env = hub
    root = release(tmp_path / "release", assignment="mha")
    notebook = nbformat.read(str(root / "notebooks" / "mha.ipynb"), as_version=4)
    student = tmp_path / "colab"
    student.mkdir()
    files = reference_files()
    wrong = files["attention.py"].replace("math.sqrt(d_k)", "d_k", 1)
    assert wrong != files["attention.py"]
    nbformat.write(fill_notebook(notebook, {**files, "attention.py": wrong}, "mha"), str(student / "mha.ipynb"))
    points = step_points(execute(python, env, student / "mha.ipynb"))
    assert points["padding"] == 10 and points["attention"] < 15  # a planted mistake loses points there
    assert not (student / "autograder").exists()  # unpacked outside the student's folder
