"""What of the kit a worker can read, where no namespace or Landlock hides it: only a private copy
of the worker-side files, by the permission bits of files alone.

    copy = worker_side_copy(files)                     # <tmp>/mha-lab-kit-<pid>/autograder/...
    closed = close_to_others([kit, reference], keep)   # chmod o-rwx, the Python installation kept
    readable_by_others(path)                            # False once closed

Started as root, the worker server runs as `nobody` and each worker as a uid of its own, with no
supplementary group: neither owns the kit nor is in its group, so only the permission bits for
"others" let them read it. Under bubblewrap the kit is not in their file system and under
Landlock it is not in their allow-list; on a platform with neither (Docker's default profile
without user namespaces or Landlock: older Docker, some Gradescope images) those bits are all
that is left. So the judge (root, which reads through any bits) removes "others" from the kit's
entries and from the reference and the grading configuration wherever they live, keeping open
only the way to the Python installation and the judge's cache; and the worker server imports the
worker-side files (the sandbox, the harness, each assignment's observers) from a private copy
that everyone may read, because students have those files anyway (they ship in their kit). All
but the earlier steps written out (`private`: correct versions of steps, the instructor's only):
root's alone (0600) in the copy, closed themselves in the kit (bubblewrap binds them file by
file), and read by the worker server before it drops its uid (fork_server.ROOT_ONLY).

The change is kept: the reference and hidden checks are nobody else's business on a grading
machine either, and putting the bits back while another grader runs would reopen the kit under
it. As a normal user with neither namespaces nor Landlock, nothing here can hold: a worker runs
as that user, who reads the kit (docs/security-model.md says so, per platform).
"""

import atexit
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

COPY_PREFIX = "mha-lab-kit-"  # <tmp>/mha-lab-kit-<judge pid>-<random>/
OTHERS = stat.S_IRWXO


def _within(path: Path, base: Path) -> bool:
    return path == base or base in path.parents


def close_to_others(targets, keep) -> list:
    """Remove the permission bits for "others" from each of `targets` (files or directories, the
    links among them left alone) so that no uid but their owner's and their group's can read
    them, except where a path of `keep` lies within: there only the directory's listing is
    closed, and each entry but the way to `keep` is closed in turn. A target within a kept path
    (the kit's package inside a Python installation) is closed all the same. Returns the paths
    whose bits changed."""
    keep = [Path(os.path.abspath(p)) for p in keep]
    changed = []

    def close(path: Path, mask: int) -> None:
        try:
            info = path.lstat()
        except OSError:
            return
        if stat.S_ISLNK(info.st_mode) or not info.st_mode & mask:
            return
        try:
            os.chmod(path, stat.S_IMODE(info.st_mode) & ~mask, follow_symlinks=False)
            changed.append(str(path))
        except (OSError, NotImplementedError):
            pass

    def visit(path: Path, target: bool) -> None:
        if path in keep:
            return
        if any(k != path and path in k.parents for k in keep):  # on the way to a kept path
            close(path, stat.S_IROTH | stat.S_IWOTH)  # passable, not listable
            try:
                entries = [Path(entry.path) for entry in os.scandir(path)]
            except OSError:
                return
            for child in entries:
                visit(child, False)
        elif target or not any(_within(path, k) for k in keep):
            close(path, OTHERS)

    for target in targets:
        if target:
            visit(Path(os.path.abspath(target)), True)
    return changed


def readable_by_others(path) -> bool:
    """Whether a uid that neither owns `path` nor is in its group could read it: every directory
    on the way passable by others, the path itself readable by them."""
    path = Path(os.path.abspath(path))
    try:
        if not path.stat().st_mode & stat.S_IROTH:
            return False
        for directory in path.parents:
            if not directory.stat().st_mode & stat.S_IXOTH:
                return False
    except OSError:
        return False
    return True


def worker_side_copy(kit: Path, files, base=None, private=()) -> Path:
    """A fresh directory, readable by all, holding `files` (paths under `kit`) at the same
    relative places: what the worker server imports where the kit is closed to it. Of them,
    `private` (the earlier steps written out) are readable by their owner alone (0600: the judge,
    root; the server reads them before it drops its uid)."""
    base = Path(base or tempfile.gettempdir())
    sweep_copies(base)
    root = Path(tempfile.mkdtemp(prefix=f"{COPY_PREFIX}{os.getpid()}-", dir=base))
    atexit.register(remove_copy, root)  # the judge's end; a judge killed outright: the next one sweeps
    os.chmod(root, 0o755)
    for path in files:
        path = Path(path)
        target = root / path.relative_to(kit)
        if path.is_dir():
            shutil.copytree(path, target, symlinks=False, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    for directory, _directories, names in os.walk(root):
        os.chmod(directory, 0o755)
        for name in names:
            os.chmod(os.path.join(directory, name), 0o644)
    for path in private:
        target = root / Path(path).relative_to(kit)
        if target.exists():
            os.chmod(target, 0o600)
    return root


def sweep_copies(base) -> None:
    """Remove the copies of judges that are gone (their pid no longer runs)."""
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    for entry in entries:
        match = re.fullmatch(re.escape(COPY_PREFIX) + r"(\d+)-\w+", entry.name)
        if (
            not match
            or not entry.is_dir(follow_symlinks=False)
            or entry.stat(follow_symlinks=False).st_uid != os.getuid()
        ):
            continue
        pid = int(match.group(1))
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # its judge still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)


# Paths the worker must not read besides the kit's own (a reference or a grading configuration kept
# elsewhere): the judge names them before it starts the worker server (engine/judge/runner.py).
SECRET_PATHS = set()


def public_base():
    """The first temporary directory every uid may pass through (the copy must be readable by
    the worker server's uid): TMPDIR when it is such, else /tmp, /var/tmp, /dev/shm."""
    for base in (os.environ.get("TMPDIR"), "/tmp", "/var/tmp", "/dev/shm"):
        if base and os.path.isdir(base) and os.access(base, os.W_OK) and _passable(Path(base)):
            return Path(base)
    return None


def _passable(path: Path) -> bool:
    try:
        return all(p.stat().st_mode & stat.S_IXOTH for p in (path, *path.parents))
    except OSError:
        return False


def close_kit(kit: Path, files, keep, private=()) -> tuple:
    """As root: the worker-side copy of `files`, and the kit, its reference and SECRET_PATHS
    closed to other uids (`keep`: the Python installation and the cache stay open). `private`
    (of `files`) are closed themselves too, in the kit (bubblewrap binds them file by file) and
    in the copy. Returns (the copy's root or None, whether every secret path is now unreadable
    by others)."""
    base = public_base()
    copy = worker_side_copy(kit, files, base, private) if base is not None else None
    kept = [*keep, *([copy] if copy else [])]
    kit = Path(kit)
    kept = [Path(os.path.abspath(k)) for k in kept]
    inside_python = any(_within(kit, k) for k in kept)
    # A path named from outside is closed whole or not at all: never one that holds the Python
    # installation, the cache or the kit (`--reference /` must not close the machine).
    extra = [Path(os.path.abspath(p)) for p in SECRET_PATHS]
    extra = [p for p in extra if not any(_within(k, p) for k in kept) and not _within(kit, p)]
    secrets = [kit / "autograder", kit / "solutions", *extra]
    close_to_others([*(secrets if inside_python else [kit, *extra]), *private], kept)
    checks = [
        p for p in (*secrets, *(kit / "autograder" / "assignments").glob("*/checks"), *private) if Path(p).exists()
    ]
    return copy, not any(readable_by_others(p) for p in checks)


def remove_copy(copy) -> None:
    if copy is not None:
        shutil.rmtree(copy, ignore_errors=True)
