"""Load a submitted package file by file, so one broken file costs only its own steps.

    mha = Package.load(Path("assignments"), "mha")  # the directory that contains mha/
    mha.heads.split_heads(x, 4)                     # imports mha/heads.py on first use

Problems with a file (missing, syntax error, an exception at import) are raised as
SubmissionError when that file is first used, and the runner reports them for the checks that
needed it. The reference solution is loaded the same way under another package name, so it can
sit beside a student's package in one process.
"""

import importlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import types
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path


class SubmissionError(Exception):
    """A file of the submission cannot be used; carries a message id and its parameters."""

    def __init__(self, message_id, **params):
        super().__init__(message_id, params)
        self.message_id = message_id
        self.params = params


class Package:
    """Lazy view of a package: attribute `name` imports `<package>.<name>` on first use."""

    def __init__(self, module, directory):
        self._module = module
        self._directory = directory

    @classmethod
    def load(cls, root, package: str, name: str = None) -> "Package":
        """Make `root/<package>` importable as the package `name` (default: `package`),
        replacing any earlier one.

        The package's __init__.py is not run: each step file is imported on its own when first
        used, so nothing in __init__.py (a broken import, or worse) can cost the other steps."""
        name = name or package
        directory = Path(root).resolve() / package
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]
        importlib.invalidate_caches()
        if not directory.is_dir():
            raise SubmissionError("missing_package", package=package, path=str(Path(root)))
        module = types.ModuleType(name)
        module.__path__ = [str(directory)]
        module.__file__ = str(directory / "__init__.py")
        sys.modules[name] = module
        return cls(module, directory)

    @classmethod
    def unloaded(cls, root, package: str) -> "Package":
        """A handle on root/<package> for reading its files, without making anything importable."""
        return cls(None, Path(root).resolve() / package)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        full_name = f"{self._module.__name__}.{name}"
        if full_name in sys.modules:
            return sys.modules[full_name]
        file = f"{self._directory.name}/{name}.py"
        if not (self._directory / f"{name}.py").exists():
            raise SubmissionError("missing_file", file=file)
        try:
            return importlib.import_module(full_name)
        except SyntaxError as error:
            sys.modules.pop(full_name, None)
            raise syntax_failure(error, self._directory, file) from None
        except (Exception, SystemExit, KeyboardInterrupt) as error:
            sys.modules.pop(full_name, None)
            raise SubmissionError(
                "import_error", file=file, type=type(error).__name__, message=str(error)[:300]
            ) from error


def syntax_failure(error: SyntaxError, directory: Path, file: str) -> SubmissionError:
    """The SubmissionError for a syntax error met while importing `file`: in the file itself, or
    in a file of the package it imports (then the step cannot be graded because of that file,
    and the message says which, on which line, and what that line reads)."""
    broken = f"{directory.name}/{Path(error.filename or file).name}"
    text = (error.text or "").strip()[:160]
    if broken != file:
        return SubmissionError(
            "syntax_error_in_import", file=broken, line=error.lineno, text=text, message=error.msg, importer=file
        )
    if text:
        return SubmissionError("syntax_error_text", file=file, line=error.lineno, message=error.msg, text=text)
    return SubmissionError("syntax_error", file=file, line=error.lineno, message=error.msg)


NOTEBOOK_LIMIT = 20 << 20  # bytes: a larger .ipynb is not read
SOURCE_LIMIT = 1 << 20  # bytes: a larger .py file of the package is not graded


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
    paths relative to the submission (its own name when the submission is one file)."""

    root: Path
    found: Path = None
    graded_files: list = field(default_factory=list)


@contextmanager
def staged(path, package: str):
    """A directory holding <package>/*.py, for every form a submission comes in (see staging)."""
    with staging(path, package) as staging_:
        yield staging_.root


@contextmanager
def staging(path, package: str):
    """A Staging of the submission `path`, for every form a submission comes in:

    * a directory holding <package>/ at its top, under assignments/, or one folder down (see
      package_root): that directory, and the package's .py files as graded files;
    * a notebook of the course (<package>.ipynb), or a directory holding one, also as nbgrader
      keeps them (submitted/<student>/<package>/<package>.ipynb): the files its `%%writefile`
      cells write, and the notebook as the graded file;
    * a directory of the step files themselves (a Gradescope upload): those files.

    Anything staged lives in a temporary directory, removed on exit."""
    path = Path(path)
    found = package_root(path, package)
    if found is not None:
        yield Staging(found, found, _package_files(path, found / package))
        return
    notebook = find_notebook(path, package)
    has_files = notebook is None and path.is_dir() and any(path.rglob("*.py"))
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
            except (OSError, ValueError):
                files = {}  # not a readable notebook: every step reports its file missing
            for name, source in files.items():
                (root / package / name).write_text(source, encoding="utf-8")
            graded[notebook.name] = notebook.name if notebook == path else notebook.relative_to(path).as_posix()
        else:
            for file in sorted(path.rglob("*.py")):
                if file.is_file() and not file.is_symlink():
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
