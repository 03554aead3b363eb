"""Staging: where in a submission the package is, and the files of it that are graded.

    with staging(Path("submissions/alice"), "mha") as staged:   # a folder, a repository, a
        staged.root                                               # notebook, loose files
        staged.graded_files

Every form a submission comes in becomes a directory holding <package>/*.py. Links, pipes,
devices and files over SOURCE_LIMIT are refused (never followed or opened). Loading the package
is the harness's job (autograder/harness/package.py), beside the student's code.
"""

import contextlib
import json
import os
import re
import shutil
import stat
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from autograder.engine.checks.text import printable
from autograder.engine.scan import archive

NOTEBOOK_LIMIT = 20 << 20  # bytes: a larger .ipynb is not read
SOURCE_LIMIT = 1 << 20  # bytes: a larger .py file of the package is not graded
WALK_DEPTH = 16  # folders below a submission's top that staging looks into
WALK_ENTRIES = 20_000  # files and folders staging looks at in one submission
WALK_FILES = 200  # .py files taken from one submission
WALK_BYTES = 16 << 20  # bytes of .py files taken from one submission
# A zip handed in: its .py and .ipynb members within staging's own limits (each file one byte
# over its limit at most, so that staging refuses it by its size), 64 MiB inflated in all.
ZIP_LIMITS = archive.Limits(
    members=WALK_ENTRIES, total=64 << 20, depth=WALK_DEPTH, member=NOTEBOOK_LIMIT + 1, file_size=256 << 20
)


class StagingError(Exception):
    """A submission staging will not go through (too deep, too many files): carries a message
    id and its parameters, reported for every step of that submission alone."""

    def __init__(self, message_id: str, **params):
        super().__init__(message_id, params)
        self.message_id, self.params = message_id, params


def walk_files(root: Path, suffix: str = ".py") -> list:
    """The regular files named *`suffix` under `root` (no links followed, none listed), in a
    stable order, found without recursion: StagingError past WALK_DEPTH folders, WALK_ENTRIES
    entries, WALK_FILES files or WALK_BYTES bytes (a folder nested a thousand levels deep, or a
    million files, is refused with a message rather than walked)."""
    root = Path(root)
    if root.is_symlink() or not root.is_dir():
        return []
    found, seen, total, todo = [], 0, 0, [(root, 0)]
    while todo:
        folder, depth = todo.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > WALK_ENTRIES:
                raise StagingError("staging_too_many", limit=WALK_ENTRIES)
            if entry.is_dir(follow_symlinks=False):
                if depth + 1 > WALK_DEPTH:
                    raise StagingError("staging_too_deep", limit=WALK_DEPTH)
                todo.append((Path(entry.path), depth + 1))
            elif entry.name.endswith(suffix) and entry.is_file(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                total += info.st_size
                found.append(Path(entry.path))
                if len(found) > WALK_FILES or total > WALK_BYTES:
                    raise StagingError("staging_too_large", files=WALK_FILES, mib=WALK_BYTES >> 20)
    return sorted(found)


def read_regular(path, limit: int):
    """The bytes of `path` where it is a regular file of at most `limit` bytes, else None: opened
    without following a link and without waiting on a pipe, checked on the open descriptor (what
    was looked at is what is read), never read past `limit`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= limit else None


def submission_files(submission, package: str) -> dict:
    """{path relative to the package folder: bytes} of the regular .py files in
    submission/<package> and its sub-packages that grading takes: what the worker is sent and
    what the class report compares (no links, nothing over SOURCE_LIMIT, within walk_files'
    limits, importable names only, at most WALK_FILES), each read with read_regular."""
    root = Path(submission) / package
    files = {}
    for path in walk_files(root)[:WALK_FILES]:
        relative = path.relative_to(root)
        if not all(part.isidentifier() for part in [*relative.parts[:-1], relative.stem]):
            continue  # not importable as a module of the package
        data = read_regular(path, SOURCE_LIMIT)
        if data is not None:
            files[relative.as_posix()] = data
    return files


def refusal(info):
    """Why a file with this (l)stat result is not graded: (message id, params), or None."""
    if stat.S_ISLNK(info.st_mode):
        return "refused_link", {}
    if not stat.S_ISREG(info.st_mode):
        return "refused_special", {}
    if info.st_size > SOURCE_LIMIT:
        return "refused_size", {"limit": SOURCE_LIMIT}
    return None


def refused_files(root, package: str) -> dict:
    """{"<package>/<name>.py": (message id, params)} for the package files that are not graded:
    links, pipes, sockets, devices, and files over SOURCE_LIMIT. Looked at with lstat, never opened."""
    directory = Path(root) / package
    refused = {}
    if directory.is_symlink() or not directory.is_dir():
        return refused
    for entry in os.scandir(directory):
        reason = refusal(entry.stat(follow_symlinks=False)) if entry.name.endswith(".py") else None
        if reason is not None:
            refused[f"{package}/{entry.name}"] = reason
    return refused


def package_root(path: Path, package: str):
    """The directory that holds the package `package/` with .py files in it, where a submission
    may keep it: at its top, under assignments/ (the student release, a repository handed in
    whole: the kit's own files around it are not graded), or one folder further down (the top
    folder of a zip). None when there is none. Symbolic links are never followed."""

    def holds(folder):
        candidate = folder / package
        return (
            not folder.is_symlink()
            and not candidate.is_symlink()
            and candidate.is_dir()
            and any(candidate.glob("*.py"))
        )

    if not path.is_dir() or path.is_symlink():
        return None
    inner = sorted(d for d in path.iterdir() if d.is_dir() and not d.is_symlink() and not d.name.startswith("."))
    for folder in (path, path / "assignments", *inner, *(d / "assignments" for d in inner)):
        if holds(folder):
            return folder
    return None


@dataclass
class Staging:
    """What staging made of a submission: `root`, a directory holding <package>/*.py; `found`,
    where the package sits in the submission (package_root), None when it was staged from a
    notebook or from loose files; `graded_files`, the submission's files that were graded, as
    paths relative to the submission (its own name when the submission is one file; a zip counts
    as a folder: `mha.zip/mha/attention.py`, or `mha/attention.py` when the submission is the zip);
    `package_root`, `found` in the same terms."""

    root: Path
    found: Path = None
    graded_files: list = field(default_factory=list)
    package_root: str = None


@contextmanager
def staging(path, package: str):
    """A Staging of the submission `path`, for every form a submission comes in:

    * a directory holding <package>/ at its top, under assignments/, or one folder down (see
      package_root): that directory, and the package's .py files as graded files;
    * a notebook of the course (<package>.ipynb), or a directory holding one, also as nbgrader
      keeps them (submitted/<student>/<package>/<package>.ipynb): the files its `%%writefile`
      cells write, and the notebook as the graded file;
    * a directory of the step files themselves (a Gradescope upload): those files;
    * a zip of any of these (an LMS upload), or a directory holding nothing gradable but zips
      (an LMS download's folder of one student): extracted within ZIP_LIMITS (archive.py), its
      .py and .ipynb files only. A zip without the package is StagingError
      ("missing_package_archive", naming what it holds); one that is refused, its reason.

    Anything staged lives in a temporary directory, removed on exit."""
    path = Path(path)
    if archive.is_zip(path):
        with _staging_zip(path, package, "") as staged_zip:
            yield staged_zip
        return
    with _staging_folder(path, package) as staged_folder:
        zips = _lone_zips(path) if staged_folder.found is None and not staged_folder.graded_files else []
        if not zips:
            yield staged_folder
            return
    with contextlib.ExitStack() as stack:  # the first zip that holds something gradable
        for number, zip_path in enumerate(zips):
            try:
                staged_zip = stack.enter_context(_staging_zip(zip_path, package, zip_path.name + "/"))
            except StagingError:
                if number == len(zips) - 1:
                    raise
                continue
            yield staged_zip
            return


def _lone_zips(path: Path) -> list:
    """The zips at the top of folder `path` (regular files, by name), for a folder that holds
    nothing else gradable."""
    if not path.is_dir() or path.is_symlink():
        return []
    try:
        entries = sorted(os.scandir(path), key=lambda entry: entry.name)
    except OSError:
        return []
    return [Path(entry.path) for entry in entries[:WALK_ENTRIES] if archive.is_zip(Path(entry.path))][:8]


def _kept_in_zip(name: str) -> bool:
    return name.endswith((".py", ".ipynb")) and not name.startswith("__MACOSX/")


def _zip_cap(name: str) -> int:
    """A zip's file is kept up to one byte over staging's limit for its kind: staging then
    refuses it by its size, as it would in a folder."""
    return SOURCE_LIMIT + 1 if name.endswith(".py") else NOTEBOOK_LIMIT + 1


@contextmanager
def _staging_zip(zip_path: Path, package: str, label: str):
    """Staging of the zip `zip_path`: extracted into a temporary folder, then staged as a folder;
    paths in it written `label` + their place in the zip."""
    folder = Path(tempfile.mkdtemp(prefix="mha-lab-zip-"))
    try:
        try:
            archive.extract(zip_path, folder, ZIP_LIMITS, keep=_kept_in_zip, cap=_zip_cap)
        except archive.ArchiveError as error:
            raise StagingError(error.message_id, **error.params) from None
        top, inside = folder, ""
        entries = list(folder.iterdir())
        if len(entries) == 1 and entries[0].is_dir() and package_root(folder, package) is None:
            top, inside = entries[0], entries[0].name + "/"  # a zip of one folder: that folder
        with _staging_folder(top, package) as inner:
            if inner.found is None and not inner.graded_files:
                raise StagingError(
                    "missing_package_archive", package=package, path=zip_path.name, contents=_contents(zip_path)
                )
            inner.graded_files = [label + inside + name for name in inner.graded_files]
            if inner.package_root is not None:
                where = (inside + inner.package_root).removesuffix("/.")
                inner.package_root = label + where if label else where
            yield inner
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _contents(zip_path: Path, shown: int = 6) -> str:
    """What a zip holds, in a few names (printable), for the message that it holds no package."""
    try:
        names = [info.filename for info in archive.members(zip_path, ZIP_LIMITS) if not info.is_dir()]
    except archive.ArchiveError:
        return "?"
    if not names:
        return "nothing"
    listed = ", ".join(printable(name, 60, one_line=True) for name in names[:shown])
    return listed + (f" and {len(names) - shown} more" if len(names) > shown else "")


@contextmanager
def _staging_folder(path: Path, package: str):
    found = package_root(path, package)
    if found is not None:
        yield Staging(found, found, _package_files(path, found / package), found.relative_to(path).as_posix())
        return
    notebook = find_notebook(path, package)
    loose = walk_files(path) if notebook is None else []
    has_files = bool(loose)
    if not (notebook or has_files):
        yield Staging(path)  # nothing gradable: the runner says that no package was found
        return
    root = Path(tempfile.mkdtemp(prefix="mha-lab-staged-"))
    try:
        (root / package).mkdir()
        graded = {}
        if notebook is not None:
            try:
                files = notebook_files(notebook, package) if notebook.stat().st_size <= NOTEBOOK_LIMIT else {}
            except (OSError, ValueError, RecursionError, MemoryError):
                files = {}  # not a readable notebook (or nested beyond reason): every step reports its file missing
            for name, source in files.items():
                (root / package / name).write_text(source, encoding="utf-8")
            graded[notebook.name] = notebook.name if notebook == path else notebook.relative_to(path).as_posix()
        else:
            for file in loose:
                if refusal(file.lstat()) is None and file.name[:-3].isidentifier():
                    shutil.copyfile(file, root / package / file.name)
                    graded[file.name] = file.relative_to(path).as_posix()  # a later file of the same name wins
        yield Staging(root, None, sorted(graded.values()))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _package_files(path: Path, directory: Path) -> list:
    """The .py files of the package `directory` that grading reads (refused ones are not), as
    paths relative to the submission `path`."""
    return sorted(
        entry.relative_to(path).as_posix()
        for entry in directory.iterdir()
        if entry.name.endswith(".py") and refusal(entry.lstat()) is None
    )


def writefile_pattern(package: str) -> "re.Pattern":
    """The first line of a notebook cell that writes a file of the package: %%writefile <package>/<file>.py"""
    return re.compile(rf"^%%writefile\s+{re.escape(package)}/([A-Za-z_][A-Za-z0-9_]*\.py)\s*$")


def notebook_files(notebook, package: str) -> dict:
    """{file name: source} written by the notebook's `%%writefile <package>/<file>` cells (the
    last cell wins, as when the notebook runs top to bottom). `notebook`: a path or the parsed
    JSON. Plain JSON on purpose: grading a notebook needs no Jupyter package."""
    if not isinstance(notebook, dict):
        notebook = json.loads(Path(notebook).read_text(encoding="utf-8"))
    pattern = writefile_pattern(package)
    files = {}
    for cell in notebook.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        first, _, body = source.partition("\n")
        match = pattern.match(first.strip())
        if match:
            files[match.group(1)] = body if body.endswith("\n") else body + "\n"
    return files


def _regular(path):
    """A regular file, not a link to one (a link could point at a solved notebook elsewhere)."""
    return path.is_file() and not path.is_symlink()


def find_notebook(path, package: str):
    """The course notebook in `path` (the file itself, or <package>.ipynb / the only .ipynb
    inside it or inside its <package>/), or None. Symbolic links are never followed."""
    if path.is_file():
        return path if path.suffix == ".ipynb" and not path.is_symlink() else None
    for folder in (path, path / package):
        if folder.is_symlink():
            continue
        if _regular(folder / f"{package}.ipynb"):
            return folder / f"{package}.ipynb"
        found = sorted(p for p in folder.glob("*.ipynb") if _regular(p)) if folder.is_dir() else []
        if len(found) == 1:
            return found[0]
    return None
