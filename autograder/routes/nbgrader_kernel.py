"""The Execute stage of nbgrader autograde for the course: each student's notebook runs in a
confined kernel without the kit (autograder/sandbox/kernel.py), within a time budget.

The course's nbgrader_config.py (publish/nbgrader_course.py AUTOGRADE) names ConfinedExecute in
place of nbgrader's Execute. Its kernel manager makes an empty scratch folder and starts the
kernel as sandbox/kernel.py describes (on a copy of the notebook's folder in that scratch: nothing
it writes reaches the course), with an environment of its own (nothing of the instructor's but
PATH and the locale; HOME and TMPDIR in the scratch). When the kernel ends, its process group is
killed and the scratch removed. Its budget bounds the whole notebook, on top of nbgrader's
per-cell `timeout`: a cell runs for at most what is left of it, and once it is spent the remaining
cells are not run and say so (an error output, which nbgrader scores 0: the grade of record is the
sandboxed judge's anyway, routes/nbgrader_gradebook.py).

InertOutputs comes next (AUTOGRADE): formgrader shows the autograded notebook in the
instructor's browser, logged in, where a script could set manual scores through formgrader's own
API (which the judge keeps). So nothing the kernel made or the student wrote stays active: outputs
keep plain text and raster images only, markdown and raw cells the release does not hold are
escaped, and the notebook's widget state goes.
"""

import html
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Integer

from autograder import KIT
from autograder.sandbox.kernel import UNCONFINED

BOOT = "import sys; sys.path.insert(0, {kit!r}); from autograder.sandbox.kernel import main; main()"


def kernel_environment(scratch: str) -> dict:
    """The kernel's whole environment: nothing of the instructor's but PATH and the locale."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "HOME": os.path.join(scratch, "home"),
        "TMPDIR": os.path.join(scratch, "tmp"),
        "IPYTHONDIR": os.path.join(scratch, ".ipython"),
        "MPLCONFIGDIR": os.path.join(scratch, ".matplotlib"),
        "JUPYTER_RUNTIME_DIR": os.path.join(scratch, ".jupyter"),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    for name in ("MHA_LAB_LANG", "LC_ALL", "TZ", UNCONFINED):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


class ConfinedKernelManager(AsyncKernelManager):
    """Starts sandbox/kernel.py's confined kernel on a copy of the notebook's folder (the `cwd`
    nbclient gives), with kernel_environment() and a scratch folder of its own."""

    course = ""  # the course's root: the kernel checks that its gradebook is unreadable
    scratch = None
    notebook_dir = None

    def format_kernel_cmd(self, extra_arguments=None):
        return [
            sys.executable,
            "-I",
            "-c",
            BOOT.format(kit=str(KIT)),
            self.notebook_dir,
            self.scratch,
            self.course,
            "-f",
            os.path.realpath(self.connection_file),
            *(extra_arguments or []),
        ]

    async def _async_pre_start_kernel(self, **kw):
        self.scratch = tempfile.mkdtemp(prefix="mha-lab-kernel-")
        self.notebook_dir = os.path.abspath(kw.get("cwd") or os.getcwd())
        cmd, kw = await super()._async_pre_start_kernel(**kw)
        kw["env"] = kernel_environment(self.scratch)
        return cmd, kw

    async def _async_cleanup_resources(self, restart=False):
        await super()._async_cleanup_resources(restart=restart)
        if restart:
            return
        pgid = getattr(self.provisioner, "pgid", None)
        if pgid:  # what the student's code left running (a session of its own escapes this: it
            try:  # can only write in the scratch, removed next)
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


class ConfinedExecute(Execute):
    """nbgrader's Execute with the confined kernel and a budget for the whole notebook."""

    budget = Integer(
        900, help="Seconds all the cells of one notebook may run together; the rest are not run once it is spent."
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kernel_manager_class = ConfinedKernelManager
        self._deadline = None

    def preprocess(self, nb, resources=None, km=None):
        self._deadline = time.monotonic() + self.budget
        db_url = ((resources or {}).get("nbgrader") or {}).get("db_url", "")
        course = os.path.dirname(db_url.removeprefix("sqlite:///")) if db_url.startswith("sqlite:///") else ""
        self.kernel_manager_class = type("CourseKernelManager", (ConfinedKernelManager,), {"course": course})
        return super().preprocess(nb, resources, km)

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        if self._deadline is None:
            return timeout
        left = max(1, int(self._deadline - time.monotonic()))
        return left if timeout is None else min(timeout, left)

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        if cell.cell_type == "code" and self._deadline is not None and time.monotonic() >= self._deadline:
            cell.outputs = [
                NotebookNode(
                    output_type="error",
                    ename="BudgetSpent",
                    evalue=f"not run: the notebook's {self.budget} s were spent",
                    traceback=[f"BudgetSpent: not run: the notebook's {self.budget} s were spent"],
                )
            ]
            return cell
        return await super().async_execute_cell(cell, cell_index, execution_count, store_history)


KEPT_DATA = ("text/plain", "image/png", "image/jpeg")  # what a browser shows without running it


class InertOutputs(NbGraderPreprocessor):
    """After the kernel: nothing a browser would run stays in the notebook (see the module)."""

    def preprocess(self, nb, resources):
        ids = resources["nbgrader"]
        given = released_sources(self.config, ids["assignment"], ids["notebook"])
        nb.metadata.pop("widgets", None)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = [inert(output) for output in cell.outputs]
            elif cell.source not in given:
                cell.source = html.escape(cell.source, quote=False)
                cell.pop("attachments", None)
        return nb, resources


def inert(output):
    """An output with its plain text and raster images only (a sentence in place of the rest). An
    image is kept only as strict base64, with no metadata but a whole-number width and height:
    nbconvert's templates write those attributes unquoted, so any other text there (or in the
    image's data) would become markup in the grader's browser."""
    data = output.get("data")
    if data is None:
        return output
    metadata = output.get("metadata") or {}
    kept, sizes = {}, {}
    for kind in KEPT_DATA:
        value = data.get(kind)
        if kind == "text/plain" and value is not None:
            kept[kind] = value
        elif value is not None and _strict_base64(value):
            kept[kind] = "".join(value) if isinstance(value, list) else value
            size = {k: v for k, v in (metadata.get(kind) or {}).items() if k in SIZES and _whole(v)}
            if size:
                sizes[kind] = size
    dropped = sorted(kind for kind in data if kind not in kept)
    if "text/plain" not in kept:
        kept["text/plain"] = f"[{', '.join(dropped) or 'an empty output'}: not shown]"
    output["data"], output["metadata"] = kept, sizes
    return output


SIZES = ("width", "height")
BASE64 = re.compile(r"[A-Za-z0-9+/\n]*={0,2}\n?")


def _strict_base64(value) -> bool:
    text = "".join(value) if isinstance(value, list) else value
    return isinstance(text, str) and BASE64.fullmatch(text) is not None


def _whole(value) -> bool:
    return type(value) is int and 0 < value < 100_000


def released_sources(config, assignment: str, notebook: str) -> set:
    """The sources of the released notebook's cells (the instructor's), or none where it is gone."""
    from nbgrader.coursedir import CourseDirectory  # late: nbgrader's, at autograde only

    coursedir = CourseDirectory(config=config)
    path = Path(coursedir.format_path(coursedir.release_directory, ".", assignment)) / f"{notebook}.ipynb"
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return set()
    return {"".join(c["source"]) if isinstance(c.get("source"), list) else c.get("source", "") for c in cells}
