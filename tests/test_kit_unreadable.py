"""On every platform the worker cannot read the kit (issue 31, item 4): under Docker's default
profile without user namespaces or Landlock, numpy's file readers read the world-readable kit and
four visible tests showed the reference and hidden checks.

Where neither namespaces nor Landlock exist, what is left is the permission bits: started as
root, the grader closes the kit to every uid but its owner's (its workers run as uids of their
own) and the worker server imports a private copy of the worker-side files
(autograder/sandbox/kit_view.py). The sandbox test grades as an instructor grades, on the
emulated platforms of tests/attacks/driver.py, with the source scan off (the sandbox must hold on
its own: numpy's readers are refused by the scan too).
"""

import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.sandbox import kit_view
from conftest import KIT

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux permissions")


@pytest.fixture
def tmp_path():
    """A temporary directory every uid may pass through (pytest's own are closed to others)."""
    path = Path(tempfile.mkdtemp(prefix="mha-kit-view-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    for directory, _, _ in os.walk(path):
        os.chmod(directory, 0o755)
    shutil.rmtree(path)


def tree(root: Path) -> Path:
    """A kit with a Python installation inside it (a CI clone's .venv) and a reference."""
    for path in ("kit/autograder/assignments/mha/checks", "kit/solutions/mha", "kit/.venv/lib/site", "kit/docs"):
        (root / path).mkdir(parents=True)
    (root / "kit/autograder/assignments/mha/checks/attention.py").write_text("HIDDEN = 1\n")
    (root / "kit/solutions/mha/attention.py").write_text("REFERENCE = 1\n")
    (root / "kit/.venv/lib/site/torch.py").write_text("import math\n")
    (root / "kit/grading.yml").write_text("assignments: []\n")
    for directory, _, files in os.walk(root):
        os.chmod(directory, 0o755)
        for name in files:
            os.chmod(os.path.join(directory, name), 0o644)
    return root / "kit"


def test_the_kit_is_closed_to_others_and_the_way_to_python_stays_open(tmp_path):
    kit = tree(tmp_path)
    secrets = ["autograder/assignments/mha/checks/attention.py", "solutions/mha/attention.py", "grading.yml"]
    assert all(kit_view.readable_by_others(kit / s) for s in secrets)  # as a clone leaves them
    changed = kit_view.close_to_others([kit], keep=[kit / ".venv/lib/site"])
    assert changed and not any(kit_view.readable_by_others(kit / s) for s in secrets)
    assert kit_view.readable_by_others(kit / ".venv/lib/site/torch.py")  # Python still starts
    assert not os.stat(kit).st_mode & stat.S_IROTH  # passable on the way, not listable
    assert kit_view.close_to_others([kit], keep=[kit / ".venv/lib/site"]) == []  # once is enough


def test_a_kit_inside_the_python_installation_closes_its_own_package_only(tmp_path):
    """A kit installed into site-packages: its package and reference are closed, nothing else."""
    site = tmp_path / "site-packages"
    tree(tmp_path).rename(site)
    copy, closed = kit_view.close_kit(site, [], keep=[site])
    kit_view.remove_copy(copy)
    assert closed and not kit_view.readable_by_others(site / "autograder/assignments/mha/checks/attention.py")
    assert kit_view.readable_by_others(site / ".venv/lib/site/torch.py") and kit_view.readable_by_others(site / "docs")


def test_a_path_named_from_outside_never_closes_the_python_installation(tmp_path, monkeypatch):
    kit = tree(tmp_path)
    monkeypatch.setattr(kit_view, "SECRET_PATHS", {str(tmp_path), str(kit.parent)})
    copy, _ = kit_view.close_kit(kit, [], keep=[kit / ".venv/lib/site"])
    kit_view.remove_copy(copy)
    assert kit_view.readable_by_others(kit / ".venv/lib/site/torch.py")
    assert os.stat(tmp_path).st_mode & stat.S_IROTH  # `--reference /` or the like: left as it is


def test_the_worker_side_copy_holds_only_what_runs_beside_student_code(tmp_path):
    from autograder.sandbox.fork_server import server_files

    copy = kit_view.worker_side_copy(KIT, server_files(), tmp_path)
    try:
        held = {p.relative_to(copy).as_posix() for p in copy.rglob("*.py")}
        assert "autograder/harness/serve.py" in held and "autograder/sandbox/fork_server.py" in held
        assert any(name.startswith("autograder/assignments/mha/observers/") for name in held)
        assert not any("/checks/" in name or "/mistakes/" in name or "/engine/" in name for name in held)
        assert all(kit_view.readable_by_others(copy / name) for name in held)
    finally:
        kit_view.remove_copy(copy)
    assert not copy.exists()


def test_the_earlier_steps_written_out_are_the_judges_alone_in_the_copy_and_in_the_kit(tmp_path):
    """written_out.py holds correct versions of steps: the worker server reads it while it is
    root (fork_server.ROOT_READ), and no other uid may read it, neither in the worker-side copy
    (0600, root's) nor in the kit that bubblewrap binds file by file."""
    from autograder.sandbox.fork_server import ROOT_ONLY, server_files

    private = server_files(ROOT_ONLY)
    assert {p.name for p in private} == {"written_out.py"} and len(private) == 2  # mha, kv_cache
    kit = tree(tmp_path)
    written_out = kit / "autograder/assignments/mha/written_out.py"
    written_out.write_text("WRITTEN_OUT = {}\n")
    written_out.chmod(0o644)
    copy, closed = kit_view.close_kit(kit, [written_out], keep=[kit / ".venv/lib/site"], private=[written_out])
    try:
        held = copy / "autograder/assignments/mha/written_out.py"
        assert stat.S_IMODE(held.stat().st_mode) == 0o600 and held.stat().st_uid == os.geteuid()
        assert not kit_view.readable_by_others(held) and kit_view.readable_by_others(copy)
        assert closed and not written_out.stat().st_mode & stat.S_IRWXO  # itself, not only its folder
    finally:
        kit_view.remove_copy(copy)


def test_a_copy_of_a_judge_that_is_gone_is_swept(tmp_path):
    gone = tmp_path / f"{kit_view.COPY_PREFIX}{2**22 + 7}-abc"
    gone.mkdir()
    mine = kit_view.worker_side_copy(KIT, [], tmp_path)
    assert not gone.exists() and mine.exists()
    kit_view.remove_copy(mine)


# ---------------------------------------------------------------------------- as an instructor grades

READ_THE_KIT = """
    import glob
    import sys
    import numpy as np
    found = []
    # the earlier steps written out (correct versions of steps) wherever the worker's Python finds
    # the grader: the kit that bubblewrap binds, the worker-side copy (on sys.path, under /tmp)
    places = [p for p in sys.path if p] + glob.glob('/tmp/mha-lab-kit-*')
    written_out = [f'{p}/autograder/assignments/{a}/written_out.py' for p in places for a in ('mha', 'kv_cache')]
    for name in @SECRETS@ + written_out:
        try:
            found.append(len(np.fromfile(name, dtype=np.uint8)))
        except OSError:
            pass
        try:
            with open(name) as f:
                found.append(len(f.read()))
        except OSError:
            pass
    print('read from the kit:', found)
    return bool(found)
"""
SECRETS = [
    str(KIT / "solutions" / "mha" / "attention.py"),
    str(KIT / "autograder" / "assignments" / "mha" / "checks" / "attention.py"),
    str(KIT / "grading.yml"),
    str(KIT / "autograder" / "assignments" / "mha" / "written_out.py"),
]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the uids of their own need root; as a normal user nothing holds")
@pytest.mark.parametrize("platform", ["no-namespaces", "userns-refused", None])
def test_no_worker_reads_the_kit_on_any_platform(tmp_path_factory, platform):
    """On the code before this, with no namespaces and no Landlock, the padding step earned its
    points: the worker read the reference and the hidden checks with numpy (and open). The
    earlier steps written out were readable on every platform (the copy's 0644, the bound kit's
    file) before ROOT_ONLY."""
    from test_attacks import assert_contained, flag, grade, honest, hostile

    tmp_path = tmp_path_factory.mktemp("kit")
    reader = hostile(tmp_path, "reader", flag(READ_THE_KIT.strip("\n")), gated=True, SECRETS=SECRETS)
    neighbour = honest(tmp_path)
    outcome = grade(tmp_path, [reader, neighbour], timeout=10, platform=platform)
    assert_contained(outcome, [reader, neighbour], [neighbour])
    assert outcome.step(reader, "padding")["score"] == 0, outcome.results[str(reader)]["output"][:2000]
    layers = outcome.results[str(reader)]["sandbox"]
    assert "closed-kit" in layers or "bubblewrap" in layers, layers
    if platform == "no-namespaces":
        assert "closed-kit" in layers and "landlock" not in layers and "bubblewrap" not in layers, layers
