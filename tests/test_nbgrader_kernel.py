"""The kernel nbgrader autograde runs a student's notebook in (autograder/sandbox/kernel.py,
autograder/routes/nbgrader_kernel.py): its plan as data, then a real kernel under attack from its
own cells (slow: CI runs it)."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autograder import KIT
from autograder.sandbox import confine
from autograder.sandbox.kernel import READ, WRITE, kernel_rules

if not os.environ.get("MHA_LAB_CI"):  # CI installs the instructor extra: never skip there
    pytest.importorskip("nbgrader", reason="pip install -e .[instructor]")
import nbformat  # noqa: E402 - comes with nbgrader

# What this machine's kernel lets the autograde kernel do. CI runs every test, so where a layer is
# missing only the assertions about that layer are left out, each with its reason, never in
# silence; test_nbgrader.py's cycle runs the kernel unconfined (knowingly) there.
LANDLOCK = confine.landlock_abi()
NO_LANDLOCK = (
    "this machine's kernel offers no Landlock (Linux 5.13+ with landlock in lsm=): the autograde kernel "
    "cannot be confined here and refuses to start (test_a_kernel_that_cannot_be_confined_does_not_start)"
)
PID_PROBE = (
    "import sys; sys.path.insert(0, {kit!r}); from autograder.sandbox.confine import private_scratch; "
    "from autograder.sandbox.kernel import own_pid_namespace; private_scratch(sys.argv[1], 1 << 20); "
    "print(own_pid_namespace())"
)


def kernel_gets_a_pid_namespace() -> bool:
    """Whether a kernel started here runs as the first process of a pid namespace of its own
    (sandbox/kernel.py main(): after its private scratch's user namespace, or as root): where it
    does not (no user namespaces, some containers), a process in a session of its own may outlive
    the kernel, as docs/threat-model.md says."""
    with tempfile.TemporaryDirectory() as scratch:
        probe = [sys.executable, "-I", "-c", PID_PROBE.format(kit=str(KIT)), scratch]
        completed = subprocess.run(probe, capture_output=True, text=True, timeout=120)
    return completed.stdout.strip() == "True"


NO_PID_NAMESPACE = "no pid namespace for the kernel here (no user namespaces): a process of its own session outlives it"


def beneath(path: str, folder: str) -> bool:
    return Path(path) == Path(folder) or Path(folder) in Path(path).parents


def test_the_kernel_may_read_nothing_of_the_kit_nor_the_course(tmp_path):
    """No rule reaches the kit's files or the course: the only rules beneath the kit's folder
    are the Python installation's (a virtual environment inside the clone), never the folder
    itself nor one of its own parts; writes only in the scratch; no right to make links or to
    move files in from elsewhere (nbgrader writes into the course after the kernel)."""
    course = tmp_path / "course"
    rules = kernel_rules(str(tmp_path / "scratch"), str(tmp_path / "kernel.json"), os.getpid())
    for rule in rules:
        assert not beneath(str(KIT), rule.path), rule  # not the kit's folder, nor one above it
        assert not beneath(str(course), rule.path) and not beneath(rule.path, str(course)), rule
        for part in ("autograder", "solutions", "grading.yml", "assignments"):
            assert not beneath(rule.path, str(KIT / part)), rule
        assert set(rule.access) <= set(WRITE) and "make_sym" not in rule.access and "refer" not in rule.access
        if rule.access - READ - {"write_file"} or ("write_file" in rule.access and rule.path != "/dev/null"):
            assert rule.path == str(tmp_path / "scratch"), rule


def test_the_plan_fails_on_a_planted_rule(tmp_path, monkeypatch):
    """The test above is shown to fail: a Python installation that is the kit's folder."""
    monkeypatch.setattr("autograder.sandbox.kernel.python_paths", lambda: [str(KIT)])
    rules = kernel_rules(str(tmp_path / "scratch"), str(tmp_path / "kernel.json"), os.getpid())
    assert any(beneath(str(KIT), rule.path) for rule in rules)


ATTACK = r"""
import importlib.util, os, socket, subprocess, sys
print("kit importable:", importlib.util.find_spec("autograder") is not None)
for path in {secrets!r}:
    try:
        open(path, "rb").read(1)
        print("READ", path)
    except OSError as error:
        print("refused", type(error).__name__)
for path in {outside!r}:
    try:
        open(path, "w").write("x")
        print("WROTE", path)
    except OSError as error:
        print("refused", type(error).__name__)
try:
    os.symlink("/etc/passwd", "link")
    print("LINKED")
except OSError as error:
    print("refused", type(error).__name__)
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3)
    print("CONNECTED")
except OSError as error:
    print("refused", type(error).__name__)
try:
    bytearray(32 << 30)
    print("ALLOCATED")
except MemoryError:
    print("refused MemoryError")
written = 0
try:
    with open("flood", "wb") as out:
        for _ in range(2048):
            out.write(b"x" * (1 << 20))
            written += 1
except OSError as error:
    print("flood stopped at", written, "MiB")
os.remove("flood")
subprocess.Popen(["sleep", "{sleeper}"], start_new_session=True)
print("cwd", os.getcwd())
"""


@pytest.mark.slow  # a real kernel: seconds; CI runs it (pytest -m "")
@pytest.mark.skipif(not LANDLOCK, reason=NO_LANDLOCK)
def test_a_confined_kernel_refuses_what_a_student_cell_tries(tmp_path, monkeypatch):
    """A notebook's cell, in the confined kernel: the kit is not importable, its files, the
    gradebook and the environment of other processes are unreadable, nothing outside the kernel's
    scratch is written (the notebook's own folder in the course included), no link, no TCP
    connection (where the kernel's Landlock handles TCP, ABI 4+), no huge allocation, files stop at
    the size limit, and a process left running in a session of its own ends with the kernel (where
    the kernel gets a pid namespace)."""
    from nbclient import NotebookClient

    from autograder.routes.nbgrader_kernel import ConfinedKernelManager

    course = tmp_path / "course"
    folder = course / "autograded" / "eve" / "mha"
    folder.mkdir(parents=True)
    (course / "gradebook.db").write_text("the gradebook")
    listener = __import__("socket").create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    sleeper = str(600 + os.getpid() % 100)
    source = ATTACK.format(
        secrets=[
            str(KIT / "grading.yml"),
            str(KIT / "solutions" / "mha" / "attention.py"),
            str(course / "gradebook.db"),
            "/proc/1/environ",
        ],
        outside=[str(folder / "mine.txt"), str(course / "gradebook.db"), str(tmp_path / "elsewhere.txt")],
        port=port,
        sleeper=sleeper,
    )
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    manager = type("CourseKernelManager", (ConfinedKernelManager,), {"course": str(course)})
    scratch = tmp_path / "tmp"  # where the kernel manager makes the kernel's scratch folder
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    try:
        NotebookClient(
            notebook, timeout=300, kernel_manager_class=manager, resources={"metadata": {"path": str(folder)}}
        ).execute()
    finally:
        listener.close()
    text = "".join(o.get("text", "") for o in notebook.cells[0].outputs)
    assert "kit importable: False" in text, text
    tcp = LANDLOCK >= 4  # Landlock handles TCP from ABI 4 (Linux 6.7)
    assert text.count("refused PermissionError") == 8 + tcp, text  # 4 reads, 3 writes, the link, the connection
    assert "LINKED" not in text and "ALLOCATED" not in text, text
    assert ("CONNECTED" in text) != tcp, text
    assert "flood stopped at 256 MiB" in text, text
    assert (course / "gradebook.db").read_text() == "the gradebook"
    assert os.listdir(folder) == [] and not (tmp_path / "elsewhere.txt").exists()
    assert f"cwd {scratch}" in text and os.listdir(scratch) == []  # the scratch went with the kernel
    time.sleep(0.5)
    left = [pid for pid, words in processes().items() if words == ["sleep", sleeper]]
    for pid in left:  # where the kernel had no pid namespace: the documented gap, ended here
        os.kill(pid, 9)
    if not kernel_gets_a_pid_namespace():
        pytest.skip(f"all but the process left running checked: {NO_PID_NAMESPACE}")
    assert left == []


def processes() -> dict:
    """pid -> command line (words) of every process, from /proc (`ps` may not be installed)."""
    found = {}
    for entry in os.listdir("/proc"):
        try:
            words = (Path("/proc") / entry / "cmdline").read_bytes().split(b"\0") if entry.isdigit() else []
        except OSError:  # ended meanwhile
            continue
        if words:
            found[int(entry)] = [word.decode(errors="replace") for word in words if word]
    return found


@pytest.mark.slow  # a real kernel: seconds; CI runs it (pytest -m "")
def test_a_kernel_that_cannot_be_confined_does_not_start(tmp_path, monkeypatch):
    """Where Landlock does not apply, the kernel says why and exits before any cell runs."""
    course = tmp_path / "course"
    course.mkdir()
    (tmp_path / "scratch").mkdir()
    connection = tmp_path / "kernel.json"
    connection.write_text(
        json.dumps({key: 0 for key in ("shell_port", "iopub_port", "stdin_port", "hb_port", "control_port")})
    )
    boot = (
        f"import sys; sys.path.insert(0, {str(KIT)!r}); import autograder.sandbox.confine as c; "
        "c.landlock = lambda *a, **k: False; import autograder.sandbox.kernel as k; k.landlock = c.landlock; k.main()"
    )
    completed = subprocess.run(
        [sys.executable, "-I", "-c", boot, str(course), str(tmp_path / "scratch"), str(course), "-f", str(connection)],
        capture_output=True,
        text=True,
        timeout=120,
        env={key: value for key, value in os.environ.items() if key != "MHA_LAB_UNCONFINED_KERNEL"},
    )
    assert completed.returncode == 3, completed.stderr
    assert "could not be confined" in completed.stderr and "MHA_LAB_UNCONFINED_KERNEL" in completed.stderr
