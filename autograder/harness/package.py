"""Load a submitted package file by file, so one broken file costs only its own steps.

    mha = Package.load(Path("assignments"), "mha")  # the directory that contains mha/
    mha.heads.split_heads(x, 4)                     # imports mha/heads.py on first use

Problems with a file (missing, syntax error, an exception at import) are raised as
SubmissionError when that file is first used, and reported for the checks that needed it. The
reference solution is loaded the same way under another package name (by the judge, never beside
student code), so it can sit beside a student's package in one process.
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
import types
from pathlib import Path

from autograder.harness.contract import SubmissionError
from autograder.harness.lookups import Guard, LookupRule, guarded_builtins

_LOADING = threading.Lock()


class _GuardedLoader(importlib.abc.Loader):
    """Runs a module of a student's package with the guarded built-ins (harness/lookups.py)."""

    def __init__(self, inner, guard: Guard):
        self.inner, self.guard = inner, guard

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.guard.adopt(module)
        module.__dict__["__builtins__"] = self.guard.names  # what every function of the module looks up
        self.inner.exec_module(module)


class _GuardedFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of the packages loaded with a rule, as Python would, and hands them to
    _GuardedLoader."""

    packages = {}  # package name -> its Guard

    def find_spec(self, fullname, path=None, target=None):
        guard = self.packages.get(fullname.partition(".")[0])
        if guard is None or "." not in fullname:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _GuardedLoader(spec.loader, guard)
        return spec


_FINDER = _GuardedFinder()


def _seen_before(directory: str) -> bool:
    """Whether the import system holds a finder for `directory` or a folder in it."""
    inside = directory + "/"
    return any(path == directory or path.startswith(inside) for path in list(sys.path_importer_cache))


class Package:
    """Lazy view of a package: attribute `name` imports `<package>.<name>` on first use."""

    def __init__(self, module, directory):
        self._module = module
        self._directory = directory

    @classmethod
    def load(cls, root, package: str, name: str = None, rule: LookupRule = None) -> "Package":
        """Make `root/<package>` importable as the package `name` (default: `package`),
        replacing any earlier one. With `rule`, its modules look attributes up by names made
        at run time under that rule (harness/lookups.py).

        The package's __init__.py is not run: each step file is imported on its own when first
        used, so nothing in __init__.py (a broken import, or worse) can cost the other steps."""
        name = name or package
        directory = Path(root).resolve() / package
        # A batch's judge threads load packages at the same time: read the registry as a copy,
        # and invalidate the import caches one thread at a time (two at once delete the same entry).
        with _LOADING:
            loaded = [m for m in list(sys.modules) if m == name or m.startswith(name + ".")]
            for module_name in loaded:
                sys.modules.pop(module_name, None)
            # The import system's caches can be stale only where this package or a folder of it
            # was seen before; a worker's first load (a fresh folder) skips the walk over every
            # finder torch's imports left (milliseconds in a fresh fork: _seen_before).
            if loaded or _seen_before(str(directory)):
                importlib.invalidate_caches()
        if not directory.is_dir():
            raise SubmissionError("missing_package", package=package, path=str(Path(root)))
        module = types.ModuleType(name)
        module.__path__ = [str(directory)]
        module.__file__ = str(directory / "__init__.py")
        with _LOADING:
            if rule is None:
                _GuardedFinder.packages.pop(name, None)
            else:
                guard = Guard(rule, name, directory)
                guard.names = guarded_builtins(guard)
                guard.adopt(module)
                _GuardedFinder.packages[name] = guard
                if _FINDER not in sys.meta_path:
                    sys.meta_path.insert(0, _FINDER)
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
