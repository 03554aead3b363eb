"""The kit's files in a student's repository, compared with what the release wrote.

    manifest = release_manifest(release_dir, packages)   # at `release`: a hash of every kit file
    keep(manifest)                                        # into the instructor's course folder
    kit_files(repository, "mha")                          # at grading: {"release", "tampering": [...]}

A Classroom repository holds, beside the student's package, the kit's files: the workflow, grading.yml,
the shipped grader and its tests. The per-push score is computed by them, in the student's repository,
so a student who edits them edits that score (it is feedback: the grade of record is the instructor's
run, which reads only the package). The edit itself is made visible: `release` writes a manifest of
the SHA-256 of every kit file it wrote and keeps it in the instructor's course folder
(.mha-lab/releases/<id>.json, course/secret.py's folder), never in the release (a copy there would be
the student's to rewrite along with the files). Grading a repository compares it with every kept
manifest of its assignment and reports the closest one's differences: a kit file changed, removed or
replaced by a link; a file added where it can change what the workflow, pytest or Python runs (under
.github/ or autograder/, at the top or in assignments/, a module or package that Python imports from
the top, a grading.yml, conftest.py or .pth anywhere, any link). The student's package, the notebooks, README.md and .gitignore are theirs to change. Line
endings are not a change (CRLF reads as LF). What Python and pytest write when the kit runs
(__pycache__/, .pytest_cache/) is not the student's doing, and a bytecode file runs only where it
matches its source, except one marked to run unchecked: that one is named. Nothing is followed or
opened but regular files, and the walk stops at WALK_ENTRIES, saying so.
"""

import hashlib
import json
import os
import stat
from pathlib import Path

from autograder.engine.checks.text import printable
from autograder.engine.course.secret import course_dir, course_folder
from autograder.engine.judge.result_files import WriteError, write_atomically
from autograder.engine.scan.submission import package_root

FORMAT = 1
FREE = ("README.md", ".gitignore", "notebooks")  # a student's to change: not compared
WALK_ENTRIES = 20_000  # entries of a repository looked at (.git aside)
READ_LIMIT = 16 << 20  # bytes of one kit file read: a larger one is changed
NAME_LIMIT = 200  # characters of a file's name shown
PLACES = (".github", "autograder")  # folders the kit owns: anything added there counts
RUNS_ANYWHERE = ("grading.yml", "conftest.py", "sitecustomize.py", "usercustomize.py")
# what Python's finders import, on any platform (importlib.machinery.all_suffixes(): source,
# bytecode without its source, compiled extensions such as .cpython-311-x86_64-linux-gnu.so)
IMPORTABLE = (".py", ".pyw", ".pyc", ".so", ".pyd")
RUNS_AT_TOP = (*IMPORTABLE, ".pth", ".cfg", ".ini", ".toml")  # modules, and pytest's configuration


def content_digest(data: bytes) -> str:
    return hashlib.sha256(data.replace(b"\r\n", b"\n")).hexdigest()


def _theirs(parts: tuple, packages: list) -> bool:
    """Whether the path `parts` is the student's to change: their packages, the free files."""
    return parts[0] in FREE or any(parts[: len(p)] == p for p in (tuple(p.split("/")) for p in packages))


def release_manifest(root: Path, packages: list) -> dict:
    """The manifest of the release in `root`: every kit file's digest, and which folders are the
    students' packages (`packages`: "assignments/<package>")."""
    root = Path(root)
    files = {}
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if path.is_file() and not path.is_symlink() and not _theirs(parts, packages):
            files["/".join(parts)] = {"sha256": content_digest(path.read_bytes())}
    return {"format": FORMAT, "packages": sorted(packages), "files": files}


def manifest_id(manifest: dict) -> str:
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]


def releases_dir() -> Path:
    return course_dir() / "releases"


def keep(manifest: dict) -> Path:
    """Keep `manifest` in the instructor's course folder (once: named by its content)."""
    folder = releases_dir()
    course_folder()
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"{manifest_id(manifest)}.json"
    if not path.exists():
        write_atomically(path, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return path


def kept(package: str) -> dict:
    """{id: manifest} of every kept release that holds `package`; unreadable files are skipped."""
    found = {}
    for path in sorted(releases_dir().glob("*.json")) if releases_dir().is_dir() else []:
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(manifest, dict) and f"assignments/{package}" in manifest.get("packages", []):
            found[path.stem] = manifest
    return found


MARKERS = (".github", "grading.yml", "autograder", "requirements.txt", "pyproject.toml")  # a release's own


def release_root(submission: Path, package: str):
    """The folder a release's files would sit in: the one above assignments/ where the package is
    there (a repository made from the release, a zip of one), or, where the package was moved out
    of assignments/, the closest folder above it (up to the submission's top) that holds kit files;
    None for other forms (a folder holding the package alone, a notebook, loose files)."""
    submission = Path(submission)
    found = package_root(submission, package)
    if found is None:
        return None
    if found.name == "assignments":
        return found.parent
    # the package moved into a folder of its own (src/mha/) leaves the kit where it was: the
    # closest folder up to the submission's top that holds a release's files
    for folder in (found, *found.parents):
        if any(os.path.lexists(folder / name) for name in MARKERS):
            return folder
        if folder == submission:
            break
    return None


def _runs(parts: tuple) -> bool:
    """Whether a file added at `parts` can change what the workflow, pytest or Python runs."""
    name = parts[-1]
    return (
        parts[0] in PLACES
        or name in RUNS_ANYWHERE
        or name.endswith(".pth")
        or (len(parts) == 1 and (name.endswith(RUNS_AT_TOP) or name.startswith("requirements")))
        or (len(parts) == 2 and parts[0] == "assignments")
        or (len(parts) == 2 and name.partition(".")[0] == "__init__" and name.endswith(IMPORTABLE))  # a top-level
        # package (its __init__ of any kind: source, bytecode, compiled): it can shadow an import
    )


GENERATED = ("__pycache__", ".pytest_cache")  # what running the kit writes: not compared


def _unchecked_bytecode(path: Path) -> bool:
    """Whether the .pyc at `path` runs without checking its source (PEP 552: hash-based, no
    check); a timestamp .pyc or a checked one is used only where it matches its source."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return True
    with os.fdopen(fd, "rb") as f:
        header = f.read(16)
    return len(header) < 16 or int.from_bytes(header[4:8], "little") & 0b11 == 0b01


def _walk(root: Path, packages: list):
    """(relative parts, lstat) of every entry under `root` that is not the student's, no link
    followed, .git left out; then None if the walk stopped at WALK_ENTRIES."""
    todo, seen = [root], 0
    while todo:
        folder = todo.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            parts = Path(entry.path).relative_to(root).parts
            if parts == (".git",) or _theirs(parts, packages):
                continue
            seen += 1
            if seen > WALK_ENTRIES:
                yield None
                return
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                if entry.name not in GENERATED:
                    todo.append(Path(entry.path))
                elif entry.name == "__pycache__":
                    yield from _bytecode(Path(entry.path), parts)
            else:
                yield parts, info


def _bytecode(folder: Path, parts: tuple):
    """(parts, lstat) of the .pyc files in the __pycache__ `folder` that run unchecked, and of
    anything there that is not a regular file."""
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)[:WALK_ENTRIES]
    except OSError:
        return
    for entry in entries:
        info = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode) or _unchecked_bytecode(Path(entry.path)):
            yield (*parts, entry.name), info


def _same(path: Path, expected: dict) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > READ_LIMIT:  # swapped since the walk, or huge
            return False
        data = f.read(info.st_size + 1)
    return len(data) <= READ_LIMIT and content_digest(data) == expected["sha256"]


def compare(root: Path, manifest: dict) -> list:
    """[{"file", "change"}] of the repository `root` against `manifest`: changed, a link (a kit
    file replaced by one, or any added), not a file, removed, added; "too many files" where the
    walk stopped."""
    root = Path(root)
    files, packages = manifest["files"], manifest["packages"]
    changes, present = [], set()
    for item in _walk(root, packages):
        if item is None:
            changes.append({"file": "", "change": f"not all checked: over {WALK_ENTRIES} files"})
            break
        parts, info = item
        name = "/".join(parts)
        present.add(name)
        if stat.S_ISLNK(info.st_mode):
            changes.append({"file": name, "change": "a link"})
        elif name in files:
            if not stat.S_ISREG(info.st_mode):
                changes.append({"file": name, "change": "not a file"})
            elif not _same(root / name, files[name]):
                changes.append({"file": name, "change": "changed"})
        elif "__pycache__" in parts:
            changes.append({"file": name, "change": "added (bytecode that runs unchecked)"})
        elif _runs(parts):
            changes.append({"file": name, "change": "added"})
    changes += [{"file": name, "change": "removed"} for name in sorted(set(files) - present)]
    # names a student chose: one printable line each, cut, wherever they are shown (checks/text.py)
    return [{**item, "file": printable(item["file"], NAME_LIMIT, one_line=True)} for item in changes]


def kit_files(submission: Path, package: str, manifests: dict = None):
    """What became of the kit's files in `submission` (a repository made from a release, or a zip
    of one): {"release": the closest kept release's id, "tampering": compare()}; {"release":
    None, "tampering": None, "reason"} where no release of it is kept here; None for a submission
    of another form. `manifests`: kept(package), read once for a batch."""
    root = release_root(submission, package)
    if root is None:
        return None
    manifests = kept(package) if manifests is None else manifests
    if not manifests:
        return {
            "release": None,
            "tampering": None,
            "reason": f"no release of {package} is kept in {releases_dir()}: run `release` here, or copy that folder here",
        }
    found = {release: compare(root, manifest) for release, manifest in manifests.items()}
    closest = min(found, key=lambda release: (len(found[release]), release))
    return {"release": closest, "tampering": found[closest]}


def keep_release(out: Path, packages: list):
    """Keep the manifest of the release just written in `out`; its path, or None where the
    course folder cannot be written (said by the caller: the release itself is whole)."""
    try:
        return keep(release_manifest(out, packages))
    except (OSError, WriteError):
        return None
