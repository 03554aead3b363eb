"""Load a submitted `mha` package file by file, so one broken file costs only its own steps.

    mha = Package.load(Path("assignments"))        # the directory that contains mha/
    mha.heads.split_heads(x, 4)                     # imports mha/heads.py on first use

Problems with a file (missing, syntax error, an exception at import) are raised as
SubmissionError when that file is first used, and the runner reports them for the checks that
needed it. The reference solution is loaded the same way under another package name, so it can
sit beside a student's `mha` in one process.
"""
import importlib
import os
import shutil
import stat
import sys
import tempfile
import types
from contextlib import contextmanager
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
    def load(cls, root, name="mha"):
        """Make `root/mha` importable as the package `name`, replacing any earlier one.

        The package's __init__.py is not run: each step file is imported on its own when first
        used, so nothing in __init__.py (a broken import, or worse) can cost the other steps."""
        directory = Path(root).resolve() / "mha"
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]
        importlib.invalidate_caches()
        if not directory.is_dir():
            raise SubmissionError("missing_package", path=str(Path(root)))
        module = types.ModuleType(name)
        module.__path__ = [str(directory)]
        module.__file__ = str(directory / "__init__.py")
        sys.modules[name] = module
        return cls(module, directory)

    @classmethod
    def unloaded(cls, root):
        """A handle on root/mha for reading its files, without making anything importable."""
        return cls(None, Path(root).resolve() / "mha")

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        full_name = f"{self._module.__name__}.{name}"
        if full_name in sys.modules:
            return sys.modules[full_name]
        file = f"mha/{name}.py"
        if not (self._directory / f"{name}.py").exists():
            raise SubmissionError("missing_file", file=file)
        try:
            return importlib.import_module(full_name)
        except SyntaxError as error:
            sys.modules.pop(full_name, None)
            raise SubmissionError("syntax_error", file=f"mha/{Path(error.filename or file).name}",
                                  line=error.lineno, message=error.msg) from None
        except (Exception, SystemExit, KeyboardInterrupt) as error:
            sys.modules.pop(full_name, None)
            raise SubmissionError("import_error", file=file, type=type(error).__name__,
                                  message=str(error)[:300]) from error


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


def refused_files(root):
    """{"mha/<name>.py": (message id, params)} for the package files that are not graded: links,
    pipes, sockets, devices, and files over SOURCE_LIMIT. Looked at with lstat, never opened."""
    directory = Path(root) / "mha"
    refused = {}
    if directory.is_symlink() or not directory.is_dir():
        return refused
    for entry in os.scandir(directory):
        reason = refusal(entry.stat(follow_symlinks=False)) if entry.name.endswith(".py") else None
        if reason is not None:
            refused[f"mha/{entry.name}"] = reason
    return refused
    for entry in os.scandir(directory):
        if not entry.name.endswith(".py"):
            continue
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            refused[f"mha/{entry.name}"] = ("refused_link", {})
        elif not stat.S_ISREG(info.st_mode):
            refused[f"mha/{entry.name}"] = ("refused_special", {})
        elif info.st_size > SOURCE_LIMIT:
            refused[f"mha/{entry.name}"] = ("refused_size", {"limit": SOURCE_LIMIT})
    return refused


@contextmanager
def staged(path):
    """A directory holding mha/*.py for every form a submission comes in:

    * a directory holding mha/*.py (assignments/, a GitHub Classroom repository): itself;
    * a notebook of the course (mha.ipynb), or a directory holding one, also as nbgrader
      keeps them (submitted/<student>/mha/mha.ipynb): the files its `%%writefile` cells write;
    * a directory of the step files themselves (a Gradescope upload): those files.

    Anything staged lives in a temporary directory, removed on exit."""
    path = Path(path)
    package = path / "mha"
    notebook = find_notebook(path)
    has_package = package.is_dir() and any(package.glob("*.py"))
    has_files = notebook is None and path.is_dir() and any(path.rglob("*.py"))
    if has_package or not (notebook or has_files):
        yield path  # a package, or nothing gradable: the runner says `no mha package` then
        return
    root = Path(tempfile.mkdtemp(prefix="mha-lab-staged-"))
    try:
        (root / "mha").mkdir()
        if notebook is not None:
            from .course import notebook_files
            try:
                files = notebook_files(notebook) if notebook.stat().st_size <= NOTEBOOK_LIMIT else {}
            except (OSError, ValueError):
                files = {}  # not a readable notebook: every step reports its file missing
            for name, source in files.items():
                (root / "mha" / name).write_text(source, encoding="utf-8")
        else:
            for file in sorted(path.rglob("*.py")):
                if file.is_file() and not file.is_symlink():
                    shutil.copyfile(file, root / "mha" / file.name)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _regular(path):
    """A regular file, not a link to one (a link could point at a solved notebook elsewhere)."""
    return path.is_file() and not path.is_symlink()


def find_notebook(path):
    """The course notebook in `path` (the file itself, or mha.ipynb / the only .ipynb inside
    it or inside its mha/), or None. Symbolic links are never followed."""
    if path.is_file():
        return path if path.suffix == ".ipynb" and not path.is_symlink() else None
    for folder in (path, path / "mha"):
        if folder.is_symlink():
            continue
        if _regular(folder / "mha.ipynb"):
            return folder / "mha.ipynb"
        found = sorted(p for p in folder.glob("*.ipynb") if _regular(p)) if folder.is_dir() else []
        if len(found) == 1:
            return found[0]
    return None
