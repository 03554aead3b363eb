"""A notebook's grader on a shared machine: another user's code never runs in the student's kernel.

The student notebook's setup cell unpacks the grader it carries where the kit is not installed. On a
hub whose users share /tmp, a second user (a real second uid: these tests run as root and switch to
two unprivileged uids) plants an `autograder` package where the victim's cell might look: the
predictable folder the cell used to trust, the per-user folder it now prefers (made first, made a
link), a home others can write, and a race against the victim's runs. The victim runs the setup cell
as the notebook carries it, up to its first import of the grader, then imports it: the planted
package must never run, and what is imported must come from a folder of the victim's own that no
one else can write. The cell runs under the system's Python (any uid can run it; the tests' own
lives under root's 0700 home), with empty stand-ins for the packages the cell would otherwise
install, so that it does not reach for pip.
"""

import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from autograder.engine.course import config as grading_config

VICTIM, ATTACKER = 47011, 47012  # two uids of no one else on this machine
PYTHON = "/usr/bin/python3"  # a Python that every uid may run
STAND_INS = ("yaml", "jsonschema", "numpy", "torch")  # what the cell would pip install without them
PLANTED = """import os
open(os.environ["MHA_LAB_PLANTED_RAN"], "a").write("ran\\n")  # proof, for the test
"""


def able() -> str:
    """Why these tests cannot run here ("" where they can)."""
    if os.geteuid() != 0:
        return "needs root, to run as two other uids"
    if not os.access(PYTHON, os.X_OK):
        return f"needs {PYTHON}, a Python other uids can run"
    return ""


pytestmark = pytest.mark.skipif(bool(able()) and not os.environ.get("MHA_LAB_CI"), reason=able() or "runs")


@pytest.fixture(scope="module")
def setup_cell():
    """The student notebook's setup cell, as `release` writes it, cut before its first import of
    the grader (what follows needs the real torch and the rest)."""
    from autograder.publish.student_notebook import student_notebook

    notebook = student_notebook(grading_config.load(assignment="mha"))
    source = next(cell.source for cell in notebook.cells if cell.get("id") == "setup")
    head, found, _ = source.partition("\nfrom autograder")
    assert found, "the setup cell no longer imports the grader: update this test"
    grader = next(line for line in source.splitlines() if line.startswith("GRADER = "))
    return head + "\n", grader.split('"')[1]


@pytest.fixture
def hub():
    """A shared machine in miniature, beside /tmp: a sticky world-writable temporary folder both
    users get as TMPDIR, a home each, stand-ins for the packages, a folder for the planted code's
    proof. Removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="mha-lab-hub-", dir="/tmp"))
    root.chmod(0o755)
    layout = {
        "tmp": (0, 0o1777),
        "home": (0, 0o755),
        "home/victim": (VICTIM, 0o755),
        "home/attacker": (ATTACKER, 0o755),
        "stand-ins": (0, 0o755),
        "proof": (0, 0o1777),
        "lab": (VICTIM, 0o755),
    }
    for name, (owner, mode) in layout.items():
        (root / name).mkdir()
        os.chown(root / name, owner, owner)
        (root / name).chmod(mode)
    for package in STAND_INS:
        (root / "stand-ins" / package).mkdir()
        (root / "stand-ins" / package / "__init__.py").write_text("")
        (root / "stand-ins" / package).chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def env_of(hub: Path, user: str, home=None) -> dict:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home or hub / "home" / user),
        "TMPDIR": str(hub / "tmp"),
        "PYTHONPATH": str(hub / "stand-ins"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "MHA_LAB_PLANTED_RAN": str(hub / "proof" / "ran"),
    }


def script(hub: Path, code: str) -> str:
    """`code` in a file every uid can read (the cell is too long for a command line)."""
    path = Path(tempfile.mkstemp(suffix=".py", dir=hub)[1])
    path.write_text(code)
    path.chmod(0o644)
    return str(path)


def run_as(uid: int, code: str, env: dict, cwd: Path, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-s", script(cwd.parent, code)],
        user=uid,
        group=uid,
        extra_groups=[],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_victim(hub, setup_cell, home=None) -> dict:
    """The setup cell run as the victim, then `import autograder`: {"file": where it came from}."""
    cell, _ = setup_cell
    code = cell + "\nimport json, autograder\nprint(json.dumps({'file': autograder.__file__}))\n"
    completed = run_as(VICTIM, code, env_of(hub, "victim", home), hub / "lab")
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def plant(folder: Path, owner=ATTACKER, mode=0o777) -> None:
    """The attacker's `autograder` package, marked as whole as the cell would mark its own."""
    package = folder / "autograder"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(PLANTED)
    (folder / ".unpacked").write_text("")
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, owner, owner)
        path.chmod(mode if path.is_dir() else 0o666)


def assert_victims_own(hub: Path, result: dict) -> None:
    assert not (hub / "proof" / "ran").exists(), "the planted code ran in the victim's kernel"
    folder = Path(result["file"]).parent.parent  # <folder>/autograder/__init__.py
    for path in (folder, folder.parent):
        info = os.lstat(path)
        assert stat.S_ISDIR(info.st_mode) and info.st_uid == VICTIM, path
        assert not info.st_mode & 0o077, f"{path} is open to others: {stat.S_IMODE(info.st_mode):o}"


def digest(setup_cell) -> str:
    return hashlib.sha256(setup_cell[1].encode("ascii")).hexdigest()[:16]


def test_the_grader_goes_into_a_folder_of_the_users_own(hub, setup_cell):
    result = run_victim(hub, setup_cell)
    assert_victims_own(hub, result)
    assert Path(result["file"]).is_relative_to(hub / "home" / "victim" / ".cache" / "mha-lab")
    again = run_victim(hub, setup_cell)  # the next kernel uses what is there, checked again
    assert again == result
    assert sorted(p.name for p in (hub / "home" / "victim" / ".cache" / "mha-lab").iterdir()) == [
        f"grader-{digest(setup_cell)}"
    ]


def test_code_planted_in_the_old_shared_folder_does_not_run(hub, setup_cell):
    # where the setup cell used to unpack, and used as it found it: a name anyone can compute
    plant(hub / "tmp" / f"mha-lab-grader-{digest(setup_cell)}")
    assert_victims_own(hub, run_victim(hub, setup_cell))


@pytest.mark.parametrize("how", ["made first, open", "made first, closed", "a link"])
def test_code_planted_in_the_per_user_temporary_folder_does_not_run(hub, setup_cell, how):
    # the victim's home cannot be used (a service account's): the temporary folder comes next,
    # and the attacker has made its predictable name first
    base = hub / "tmp" / f"mha-lab-{VICTIM}"
    if how == "a link":
        plant(hub / "home" / "attacker" / "evil" / f"grader-{digest(setup_cell)}")
        base.symlink_to(hub / "home" / "attacker" / "evil")
        os.chown(base, ATTACKER, ATTACKER, follow_symlinks=False)
    else:
        plant(base / f"grader-{digest(setup_cell)}", mode=0o777 if how.endswith("open") else 0o700)
    result = run_victim(hub, setup_cell, home=Path("/nonexistent"))
    assert_victims_own(hub, result)
    assert not Path(result["file"]).is_relative_to(base)


def test_code_planted_under_a_home_others_can_write_does_not_run(hub, setup_cell):
    shared = hub / "home" / "shared"  # a misconfigured home: anyone may write in it
    shared.mkdir()
    shared.chmod(0o777)
    plant(shared / ".cache" / "mha-lab" / f"grader-{digest(setup_cell)}", mode=0o700)
    for path in (shared / ".cache", shared / ".cache" / "mha-lab"):
        os.chown(path, ATTACKER, ATTACKER)
    result = run_victim(hub, setup_cell, home=shared)
    assert_victims_own(hub, result)
    assert not Path(result["file"]).is_relative_to(shared)


def test_the_users_own_folder_opened_to_others_is_not_trusted(hub, setup_cell):
    result = run_victim(hub, setup_cell)
    cache = hub / "home" / "victim" / ".cache" / "mha-lab"
    cache.chmod(0o777)  # the victim's, but anyone could have written into it since
    again = run_victim(hub, setup_cell)
    assert_victims_own(hub, again)
    assert again != result and not Path(again["file"]).is_relative_to(cache)


def test_a_racing_attacker_never_gets_code_run(hub, setup_cell):
    """The attacker re-makes the victim's predictable folder as a link to planted code, as fast as
    it can, while the victim starts 8 kernels, each after removing its own folder (a fresh /tmp):
    whoever wins each race, the planted code never runs."""
    evil = hub / "home" / "attacker" / "evil"
    plant(evil / f"grader-{digest(setup_cell)}")
    base, stop = hub / "tmp" / f"mha-lab-{VICTIM}", hub / "proof" / "stop"
    attacker = subprocess.Popen(
        [PYTHON, "-s", "-c", RACER, str(base), str(evil), str(stop)],
        user=ATTACKER,
        group=ATTACKER,
        extra_groups=[],
        env=env_of(hub, "attacker"),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(8):
            try:  # one lstat: the attacker may remove or replace the folder at any moment
                found = base.lstat()
            except FileNotFoundError:
                found = None
            if found is not None and stat.S_ISDIR(found.st_mode) and found.st_uid == VICTIM:
                shutil.rmtree(base, ignore_errors=True)
            assert_victims_own(hub, run_victim(hub, setup_cell, home=Path("/nonexistent")))
    finally:
        stop.touch()
        tries = int(attacker.communicate(timeout=60)[0].strip() or 0)
    assert tries > 8  # it did race


RACER = textwrap.dedent(
    """
    import os, sys
    base, evil, stop = sys.argv[1:]
    tries = 0
    while not os.path.exists(stop):
        tries += 1
        try:
            os.symlink(evil, base)
        except OSError:
            try:
                os.unlink(base)  # ours (the link), or not: the sticky bit says no
            except OSError:
                pass
    print(tries)
    """
)


def test_kernels_of_one_user_started_at_once_share_one_whole_copy(hub, setup_cell):
    cell, _ = setup_cell
    code = cell + "\nimport json, autograder\nprint(json.dumps({'file': autograder.__file__}))\n"
    env = env_of(hub, "victim")
    path = script(hub, code)
    kernels = [
        subprocess.Popen(
            [PYTHON, "-s", path],
            user=VICTIM,
            group=VICTIM,
            extra_groups=[],
            env=env,
            cwd=hub / "lab",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    found = set()
    for kernel in kernels:
        out, err = kernel.communicate(timeout=300)
        assert kernel.returncode == 0, err[-2000:]
        found.add(json.loads(out.strip().splitlines()[-1])["file"])
    assert len(found) == 1
    cache = hub / "home" / "victim" / ".cache" / "mha-lab"
    assert sorted(p.name for p in cache.iterdir()) == [f"grader-{digest(setup_cell)}"]  # no half copy left
