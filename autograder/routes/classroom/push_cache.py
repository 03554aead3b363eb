"""Grading once per push: the first step command of a workflow grades every step and keeps each
step's log and result where student code cannot write; the other step commands read them.

Every step command of a workflow grades the same files: the first to run grades every step
once and keeps, for each step, exactly what its command prints and reports (its log and its
reporter result: nothing a student does not see anyway); the others read that. The keeping is
keyed by the content it was graded from and lives where student code cannot write."""

import json
from pathlib import Path

from autograder import KIT, __version__, cache_base
from autograder.engine.judge.result_files import WriteError, write_atomically
from autograder.publish.classroom_workflow import graded_steps, reporter_number

# Every step command of a workflow grades the same files: the first to run grades every step
# once and keeps, for each step, exactly what its command prints and reports (its log and its
# reporter result: nothing a student does not see anyway); the others read that. The keeping is
# keyed by the content it was graded from and lives where student code cannot write.
CACHE_FORMAT = 1
# Layers that keep a worker from writing the cache's folder: Landlock (it writes its scratch
# only), bubblewrap (the folder is not in its file system), the uid drop (another uid; the folder
# is 0700).
BLOCKING_LAYERS = {"landlock", "bubblewrap", "uid-drop"}


def nearest_config(start) -> Path:
    """The nearest grading.yml at or above `start`, else the kit's own (as pytest_plugin finds
    it, without its imports)."""

    for directory in [Path(start).resolve(), *Path(start).resolve().parents]:
        if (directory / "grading.yml").is_file():
            return directory / "grading.yml"
    return KIT / "grading.yml"


def _digest_tree(key, root: Path) -> None:
    """Feed every file under `root` (names and bytes; no bytecode) into the hash `key`."""
    root = Path(root)
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts) if root.is_dir() else []
    for path in files:
        key.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")


def cache_key(config_path: Path, assignment, submission: Path) -> str:
    """What one grading's outcome depends on: the graded package's files, grading.yml, the kit
    (its code and catalogs), torch's version, the language of the messages, and the Actions run
    (a cache never outlives its run)."""
    import hashlib
    import importlib.metadata
    import os

    key = hashlib.sha256()
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "none"
    run = [os.environ.get(name, "") for name in ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_SHA")]
    header = [str(CACHE_FORMAT), __version__, torch_version, os.environ.get("MHA_LAB_LANG", ""), *run]
    key.update(" ".join(header).encode() + b"\n")
    key.update(Path(config_path).read_bytes() + b"\0" + assignment.id.encode() + b"\0")
    _digest_tree(key, Path(submission) / assignment.package)
    key.update(b"kit\0")
    _digest_tree(key, KIT / "autograder")
    return key.hexdigest()


def cache_directory() -> Path:
    """Outside the student's repository: the runner's temporary folder on Actions (gone with
    the job), else the kit's cache folder; so also where RUNNER_TEMP is not an absolute path (a
    step's command copied out of the workflow with its `${{ runner.temp }}` unexpanded)."""
    import os

    temporary = os.environ.get("RUNNER_TEMP", "")
    return Path(temporary) / "mha-lab-classroom" if os.path.isabs(temporary) else cache_base() / "classroom"


def cache_trusted_here() -> bool:
    """Whether a worker on this machine is kept from writing the cache (BLOCKING_LAYERS): as root
    (the uid drop) or where the kernel has Landlock. Elsewhere every step grades for itself."""
    import os

    from autograder.sandbox.confine import landlock_abi  # late: not at the start of a Classroom step

    return os.geteuid() == 0 or landlock_abi() > 0


def _private_folder(directory: Path, create: bool) -> bool:
    """Whether `directory` is a real folder of this user that no one else can write (made so if
    `create`)."""
    import os
    import stat

    try:
        if create:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(directory)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o077


def read_cache(key: str, assignment) -> dict:
    """{step id: {"log", "result"}} kept under `key`, or None: missing, not ours (a link, another
    owner, writable by others), malformed, of another key, or not matching grading.yml's steps
    and points (a forged file)."""
    import os
    import stat

    directory = cache_directory()
    if not _private_folder(directory, create=False):
        return None
    try:
        fd = os.open(directory / f"{key}.json", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
            return None
        with os.fdopen(fd, "rb") as f:
            fd = None
            data = json.loads(f.read(8 << 20))
    except (OSError, ValueError):
        return None
    finally:
        if fd is not None:
            os.close(fd)
    try:
        if data["format"] != CACHE_FORMAT or data["key"] != key:
            return None
        steps = data["steps"]
        expected = {step.id: step.points for step in graded_steps(assignment)}
        if set(steps) != set(expected):
            return None
        for step_id, entry in steps.items():
            result = entry["result"]
            if not isinstance(entry["log"], str) or not isinstance(result["tests"], list):
                return None
            if result["status"] not in ("pass", "fail", "error"):
                return None
            if result["status"] != "error" and result["max_score"] not in (0, reporter_number(expected[step_id])):
                return None
    except (KeyError, TypeError, AttributeError):
        return None
    return steps


def write_cache(key: str, steps: dict) -> None:
    """Keep `steps` under `key` (atomically; a failure only costs the next step a grading)."""

    directory = cache_directory()
    if not _private_folder(directory, create=True):
        return
    try:
        write_atomically(directory / f"{key}.json", json.dumps({"format": CACHE_FORMAT, "key": key, "steps": steps}))
    except WriteError:
        pass
