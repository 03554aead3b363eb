"""Load a submitted `mha` package file by file, so one broken file costs only its own steps.

    mha = Package.load(Path("assignments"))        # the directory that contains mha/
    mha.heads.split_heads(x, 4)                     # imports mha/heads.py on first use

Problems with a file (missing, syntax error, an exception at import) are raised as
SubmissionError when that file is first used, and the runner reports them for the checks that
needed it. The reference solution is loaded the same way under another package name, so it can
sit beside a student's `mha` in one process.
"""
import importlib
import sys
import types
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
