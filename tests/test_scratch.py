"""Scratch capped and private in every mode (issue 21): where user namespaces are refused (Ubuntu
24.04's AppArmor rule, as root) or every namespace is (Docker's default profile, Gradescope; no
Landlock either, so that seccomp holds alone), a submission can neither fill a disk nor starve a
neighbour, cannot read a neighbour's files, and its scratch is gone after the run.

Graded as an instructor grades (tests/test_attacks.py's harness), on a platform made by a seccomp
filter over the whole grader (tests/attacks/driver.py). Every write is bounded (320 MiB at most,
the figure the issue reports) and removed afterwards, defence or not."""

import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from test_attacks import assert_contained, flag, grade, honest, hostile

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="Linux sandbox"),
    pytest.mark.slow,
]

PLATFORMS = ["userns-refused", "no-namespaces"]

# Writes 8 MiB files (the file-size limit) into every place a worker could reach until 320 MiB
# are written or a place refuses. What it wrote in its scratch stays there while its worker
# grades the rest of its steps: neighbours forked meanwhile would find a shared scratch full.
FILL = """
    import os
    me = os.getcwd()
    places = [me, os.path.join(me, 'mha'), os.environ.get('HOME') or me, os.path.dirname(me),
              '/tmp', '/var/tmp', '/dev/shm', @TMPDIR@]
    written = 0
    for place in places:
        for number in range(40):
            if written >= 320 << 20:
                break
            try:
                with open(os.path.join(place, @MARK@ + str(number)), 'wb') as f:
                    for _ in range(8):
                        written += f.write(b'x' * (1 << 20))
            except OSError:
                break
    for make in (lambda: os.mkdir(os.path.join(me, @MARK@)), lambda: os.mkfifo(os.path.join(me, @MARK@ + 'p'))):
        try:
            make()
            written += 1
        except OSError:
            pass
    print('bytes written:', written)
    return written > 0
"""

# Looks for a neighbour's files for up to 3 s: beside its own scratch (listing the parent, or
# guessing names where it cannot list), and in the grader's folders of the temporary directories
# (the host's other files are readable where there is neither bubblewrap nor Landlock).
STEAL = """
    import os, time
    me = os.path.realpath(os.getcwd())
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        for top in {os.path.dirname(me), '/tmp', @TMPDIR@}:
            try:
                names = os.listdir(top)
            except OSError:
                names = [str(n) for n in range(1, 64)]
            if top != os.path.dirname(me):
                names = [name for name in names if name.startswith('mha-lab')]
            for name in names:
                directory = os.path.join(top, name)
                for candidate in (directory, *(os.path.join(directory, str(n)) for n in range(1, 16))):
                    if os.path.realpath(candidate) == me:
                        continue
                    try:
                        with open(os.path.join(candidate, 'mha', 'padding.py')) as f:
                            f.read()
                        print('read a neighbour:', candidate)
                        return True
                    except OSError:
                        pass
        time.sleep(0.05)
    return False
"""


@pytest.fixture
def shared_tmp():
    """A temporary directory anyone may write to (as /tmp), given to the grader as TMPDIR: the
    worker server uses it for scratch when it runs without bubblewrap, so leftovers are seen."""
    path = Path(tempfile.mkdtemp(prefix="mha-scratch-test-", dir="/tmp"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def remove_marked(mark: str, *places) -> list:
    """Remove what a failed defence let the attack write outside its scratch; return its names."""
    found = []
    for place in places:
        for path in Path(place).glob(mark + "*"):
            found.append(str(path))
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    return found


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_worker_cannot_fill_a_disk_or_starve_its_neighbours(tmp_path, shared_tmp, platform):
    """On today's code (before this defence) the filler wrote 320 MiB into its scratch (the
    server's shared /tmp, or the host's) and the padding step paid it; where the scratch was the
    server's shared tmpfs, neighbours graded meanwhile were not graded."""
    mark = f"mha-fill-{uuid.uuid4().hex[:8]}-"
    filler = hostile(tmp_path, "filler", flag(FILL.strip("\n")), gated=True, MARK=mark, TMPDIR=str(shared_tmp))
    neighbours = [honest(tmp_path, f"honest{n}") for n in range(3)]
    try:
        outcome = grade(tmp_path, [filler, *neighbours], timeout=10, env={"TMPDIR": str(shared_tmp)}, platform=platform)
    finally:
        escaped = remove_marked(mark, "/tmp", "/var/tmp", "/dev/shm", shared_tmp)
    assert not escaped, f"the worker wrote outside its scratch: {escaped}"
    assert_contained(outcome, [filler, *neighbours], neighbours)
    assert outcome.step(filler, "padding")["score"] == 0, "the worker wrote files: " + str(
        outcome.step(filler, "padding")
    )
    assert sorted(p.name for p in shared_tmp.iterdir() if p.name.startswith("mha-lab")) == [], "scratch left behind"


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_worker_cannot_read_a_neighbours_files(tmp_path, shared_tmp, platform):
    """On today's code, with no namespaces and no Landlock, every worker ran as `nobody`: the
    thief read a neighbour's padding.py from its scratch (0700, same owner)."""
    thief = hostile(tmp_path, "thief", flag(STEAL.strip("\n")), gated=True, TMPDIR=str(shared_tmp))
    neighbours = [honest(tmp_path, f"honest{n}") for n in range(3)]
    outcome = grade(tmp_path, [thief, *neighbours], timeout=10, env={"TMPDIR": str(shared_tmp)}, platform=platform)
    assert_contained(outcome, [thief, *neighbours], neighbours)
    assert outcome.step(thief, "padding")["score"] == 0, "a neighbour's file was read: " + str(
        outcome.step(thief, "padding")
    )
    if os.geteuid() == 0:
        assert "own-uid" in outcome.results[str(thief)]["sandbox"]


def test_the_next_server_removes_what_a_killed_one_left(tmp_path, shared_tmp):
    """A server killed with SIGKILL cannot clean up: the next one removes its scratch (its pid
    gone), and leaves alone a live server's and a link planted among them."""
    from autograder.sandbox import fork_server

    dead = shared_tmp / f"{fork_server.SCRATCH_PREFIX}{2**22 + 12345}"  # past pid_max's default: not a live pid
    (dead / "7" / "mha").mkdir(parents=True)
    (dead / "7" / "mha" / "padding.py").write_text("x")
    (dead / "7" / "mha").chmod(0o500)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (dead / "link").symlink_to(victim)
    live = shared_tmp / f"{fork_server.SCRATCH_PREFIX}{os.getppid()}"
    live.mkdir()
    fork_server.sweep(str(shared_tmp))
    assert not dead.exists()
    assert victim.read_text() == "keep me"
    assert live.exists()  # a server that still runs (this process's parent, say) keeps its scratch
