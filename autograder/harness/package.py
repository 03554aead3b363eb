"""Load a submitted package file by file, so one broken file costs only its own steps.

    mha = Package.load(Path("assignments"), "mha")  # the directory that contains mha/
    mha.heads.split_heads(x, 4)                     # imports mha/heads.py on first use

Problems with a file (missing, syntax error, an exception at import) are raised as
SubmissionError when that file is first used, and reported for the checks that needed it. The
reference solution is loaded the same way under another package name (by the judge, never beside
student code), so it can sit beside a student's package in one process.
"""

import importlib
import sys
import threading
import types
from pathlib import Path

from autograder.harness.contract import SubmissionError


_LOADING = threading.Lock()


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
        # A batch's judge threads load packages at the same time: read the registry as a copy,
        # and invalidate the import caches one thread at a time (two at once delete the same entry).
        with _LOADING:
            for loaded in [m for m in list(sys.modules) if m == name or m.startswith(name + ".")]:
                sys.modules.pop(loaded, None)
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
