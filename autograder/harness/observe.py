"""Run one observer on the student's package, under a time limit and the forbidden-call watch,
and report what happened as plain data.

    report = observe(observer, student, inputs, timeout=10, forbidden=("torch.nn.MultiheadAttention",))
    report["kind"]   # "values" | "raised" | "timeout" | "contract" | "trapped"

    {"kind": "values", "values": {...}, "forbidden": []}
    {"kind": "raised", "type": "RuntimeError", "message": "...", "where": ["heads.py", 12, "split_heads"], ...}
    {"kind": "timeout", "where": ["attention.py", 30, "scaled_dot_product_attention"], ...}
    {"kind": "contract", "what": "missing_attribute", "params": {...}, ...}
    {"kind": "trapped", "function": ["heads.py", "split_heads"], ...}

A report says what was seen, never a verdict: the judge reads it with its own facts
(autograder/engine/judge/observation.py) and decides. `where` is the innermost frame in the student's
files: the file relative to the package folder, the line, the function's qualified name.

A function that once ran past its time limit is *trapped* (`trap`): its code is replaced by one
that stops at once, so a later check that calls it costs no second time limit, while checks
that never reach it run as usual.
"""

import copy
import difflib
import importlib
import signal
import sys
import threading
import types
from contextlib import contextmanager
from pathlib import Path

import torch

from autograder.harness.contract import ContractError
from autograder.harness.summary import summarise_text
from autograder.harness.watch import watching

TRAP_MARK = "mha-lab: trapped"  # GeneratorExit(TRAP_MARK, file, qualname): raised by a trapped function


def seed_generators(seed: int) -> None:
    """torch.manual_seed(seed) for the generators a check can draw from: the CPU's, and CUDA's
    where this process has initialised it (a real-GPU worker). torch.manual_seed itself also
    queues a seed for every device library not initialised (CUDA, XPU, MTIA), each with the text
    of the caller's stack: about a millisecond a call, a dozen calls per submission."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


class CheckTimeout(BaseException):
    """Raised inside student code when a check overruns its time limit (BaseException so that
    a bare `except Exception` in student code cannot swallow it)."""


@contextmanager
def time_limit(seconds):
    """Interrupt the block after `seconds` with CheckTimeout (main thread, POSIX; else no limit)."""
    usable = seconds and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise CheckTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def observe(
    observer, student, inputs, timeout=None, forbidden=(), arguments=None, private=False, keep_exception=False
) -> dict:
    """Run `observer(student, **inputs, **arguments)` and report it (never raises for student
    faults). `inputs` are copied first unless `private` (nobody else will use them).
    `keep_exception`: a "raised" report also holds the exception itself under "exception" (the
    pytest route re-raises it, for a traceback into the student's file; never sent anywhere)."""
    seen = []
    arguments = arguments or {}
    try:
        with time_limit(timeout):
            copied = inputs if private else copy.deepcopy(inputs)  # outside the watch: not student code
            with watching(forbidden) as seen:
                values = observer(student, **copied, **arguments)
        return {"kind": "values", "values": values, "forbidden": list(seen)}
    except CheckTimeout as error:
        report = {"kind": "timeout", "where": where(error, student)}
    except ContractError as error:
        report = {"kind": "contract", "what": error.what, "params": dict(error.params)}
    except GeneratorExit as error:
        report = trapped(error) or raised(error, student)
    except BaseException as error:  # noqa: BLE001 - student code: anything it raises is reported
        report = near_miss(error, student) or not_implemented(error, student) or raised(error, student)
        if keep_exception and report["kind"] == "raised":
            report["exception"] = error
    report["forbidden"] = list(seen)
    return report


def raised(error, student) -> dict:
    text = summarise_text(str(error)).strip()
    return {
        "kind": "raised",
        "type": type(error).__name__,
        "message": text.splitlines()[0][:300] if text else "",
        "where": where(error, student),
    }


def not_implemented(error, student):
    """The TODO still there: NotImplementedError raised in the student's files."""
    if isinstance(error, NotImplementedError) and not _is_forward_stand_in(error):
        return {"kind": "contract", "what": "not_implemented", "params": {"where": where_text(error, student)}}
    return None


def where(error, student):
    """[file relative to the package folder, line, function] of the innermost frame of `error`'s
    traceback that is in the student's files, or None when no frame is theirs."""
    directory = str(getattr(student, "_directory", "") or "")
    if not directory:
        return None
    found, tb = None, error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith(directory + "/"):
            code = tb.tb_frame.f_code
            found = [filename[len(directory) + 1 :], tb.tb_lineno, getattr(code, "co_qualname", code.co_name)]
        tb = tb.tb_next
    return found


def where_text(error, student) -> str:
    """'mha/heads.py, line 12, in split_heads', or '' (the judge words a missing place)."""
    place = where(error, student)
    if place is None:
        return ""
    return f"{Path(student._directory).name}/{place[0]}, line {place[1]}, in {place[2].rsplit('.', 1)[-1]}"


def trapped(error):
    args = getattr(error, "args", ())
    if len(args) == 3 and args[0] == TRAP_MARK:
        return {"kind": "trapped", "function": [str(args[1]), str(args[2])]}
    return None


def _innermost_frame(error):
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return None if tb is None else tb.tb_frame


def _is_forward_stand_in(error):
    frame = _innermost_frame(error)
    return frame is not None and frame.f_code.co_name == "_forward_unimplemented"


def near_miss(error, student):
    """A contract report "near_miss" when the code lacks a name the grader calls and the
    student's class or module has a close spelling of it (`def foward(` for forward): said as
    such, not as "not implemented yet" or a bare AttributeError. None otherwise."""
    module = getattr(student, "_module", None)
    if module is None:
        return None
    package = module.__name__
    if isinstance(error, (NotImplementedError, TypeError)):
        # nn.Module's stand-in for a missing forward: it raises NotImplementedError, or, called
        # with keywords, a TypeError raised in the module's __call__ before it starts
        frame = _innermost_frame(error)
        stand_in = "_forward_unimplemented"
        if frame is None or not (
            frame.f_code.co_name == stand_in
            or (isinstance(error, TypeError) and str(error).startswith(stand_in + "()"))
        ):
            return None
        owner, name = frame.f_locals.get("self"), "forward"
    elif isinstance(error, AttributeError) and isinstance(getattr(error, "name", None), str):
        owner, name = getattr(error, "obj", None), error.name
    else:
        return None
    if isinstance(owner, types.ModuleType):
        if not owner.__name__.startswith(package + "."):
            return None
        label = f"{Path(student._directory).name}/{owner.__name__.rsplit('.', 1)[-1]}.py"
        candidates = list(vars(owner))
    elif owner is not None:
        cls = owner if isinstance(owner, type) else type(owner)
        mine = [c for c in cls.__mro__ if c.__module__.startswith(package + ".")]
        if not mine:
            return None
        label = cls.__name__
        candidates = [attr for c in mine for attr in vars(c)] + list(getattr(owner, "__dict__", {}))
    else:
        return None
    close = difflib.get_close_matches(name, [c for c in candidates if not c.startswith("__")], n=1, cutoff=0.8)
    if not close or close[0] == name:
        if isinstance(error, NotImplementedError):  # the stand-in with nothing close: forward is missing
            return {"kind": "contract", "what": "not_implemented", "params": {"where": where_text(error, student)}}
        return None
    params = {"owner": label[:100], "name": name[:100], "near": close[0][:100], "where": where_text(error, student)}
    return {"kind": "contract", "what": "near_miss", "params": params}


# ---------------------------------------------------------------------------- traps


TRAPS = [0]  # traps set in this process so far: what a probe found of the code holds until the next


def trap(student, file: str, qualname: str) -> bool:
    """Make the student's function `qualname` of `file` (relative to the package folder) stop at
    once when called, wherever it is called from. True if it was found and trapped."""
    TRAPS[0] += 1
    package = getattr(student, "_module", None)
    if package is None or not file.endswith(".py"):
        return False
    name = package.__name__ + "." + file[: -len(".py")].replace("/", ".")
    if qualname == "<module>":  # its own code hung while it was imported: it is not imported again
        sys.modules[name] = _stopped_module(name, file, qualname)
        return True
    try:
        owner = importlib.import_module(name)
    except BaseException:  # noqa: BLE001 - a file that no longer imports: nothing to trap
        return False
    parts = qualname.split(".")
    if "<locals>" in parts:  # a nested function: trap the function that holds it
        parts = parts[: parts.index("<locals>")]
    target = owner
    for part in parts:
        owner, target = target, getattr(target, part, None)
        if target is None:
            return False
    function = getattr(target, "__func__", target)  # a classmethod, seen through its class
    if not isinstance(function, types.FunctionType):
        return False
    stop = _stopper(file, qualname)
    if not function.__code__.co_freevars:
        function.__code__ = stop.__code__  # every reference to it stops, however it was imported
        function.__defaults__, function.__kwdefaults__ = None, None
        return True
    try:
        setattr(owner, parts[-1], stop)  # a closure (a method using super()): where it is looked up
    except (AttributeError, TypeError):
        return False
    return True


def _stopper(file, qualname):
    """A function without free variables or globals that raises GeneratorExit(TRAP_MARK, file,
    qualname): its code can stand in for any function's (a BaseException, so that
    `except Exception` in student code does not swallow it)."""
    namespace = {}
    source = f"def stop(*args, **kwargs):\n    raise GeneratorExit({TRAP_MARK!r}, {file!r}, {qualname!r})\n"
    exec(compile(source, "<mha-lab trap>", "exec"), namespace)  # noqa: S102 - our own constant source
    return namespace["stop"]


def _stopped_module(name, file, qualname):
    """A stand-in for a student module whose own code hung at import: any name taken from it stops."""
    module = types.ModuleType(name)
    stop = _stopper(file, qualname)

    def __getattr__(attribute):
        stop()

    module.__getattr__ = __getattr__
    return module
