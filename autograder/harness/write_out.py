"""Writing a student's function out: what computes it, and an adapter in its place.

    tracer = Tracer(package)
    with profiled(tracer):
        result = function(*args, **kwargs)           # tracer.frames: each student frame's code,
                                                     # parameters at entry and result
    mapping = places(code, arguments, parameters)    # where a frame holds the call's arguments
    with swapped([(function, Adapted(version, inspect.signature(function), mapping))]):
        run()                                        # every reference to `function` runs `version`

Used by harness/earlier.py (one mistake, one charge), which decides what to write out. A
function is found by what it does: on a probe call, a frame of the student's code whose
parameters hold the call's own arguments (the same objects) and whose result is the call's
result computes the same function (`places` says where it holds each argument). Its code is
swapped for an adapter with as many free variables as it has (a closure, a method using
super(), a decorator's wrapper can be written out too), whose one keyword default holds the
Adapted that calls the written-out version with the arguments found by name. The function
objects are found from the student's modules through what their objects hold (functions_with).
"""

import inspect
import os
import sys
import sysconfig
import types
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch


def _library_prefixes() -> tuple:
    """Where code that is nobody's submission lives: the standard library, torch, this harness."""
    places = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    places.add(str(Path(torch.__file__).resolve().parent))
    places.add(str(Path(__file__).resolve().parent))
    return tuple(os.path.join(place, "") for place in places if place)


_LIBRARY = _library_prefixes()


def student_code(code, package) -> bool:
    """Whether a code object is the submission's: a file of its folder, or for a package that
    is no folder (a model package of the kit's), any code outside the libraries and the harness."""
    directory = getattr(package, "_directory", None)
    filename = code.co_filename
    if directory is not None:
        return filename.startswith(os.path.join(str(directory), ""))
    return not filename.startswith(_LIBRARY) and not filename.startswith("<")


def code_of(function):
    """The code a call of `function` runs first when it is a Python function (or a method, or a
    callable object whose __call__ is one); else None."""
    target = getattr(function, "__func__", function)
    if not isinstance(target, types.FunctionType) and not inspect.isclass(target):
        target = getattr(type(target), "__call__", None)  # noqa: B004 - the method itself, not a callable test
        target = getattr(target, "__func__", target)
    return target.__code__ if isinstance(target, types.FunctionType) else None


@dataclass(frozen=True)
class Mapping:
    """How a function's parameters hold an earlier function's arguments: for each argument (an
    index for a positional one, a name for a keyword one), where it is: ("param", name),
    ("vararg", index) or ("varkw", name)."""

    places: tuple  # ((key, place), ...)


def places(code, arguments, values):
    """The Mapping of the probe's `arguments` [(key, value)] into a frame's parameter `values`
    ({name: value}), by identity; None where an argument is not there."""
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    flags = code.co_flags
    index = code.co_argcount + code.co_kwonlyargcount
    vararg = code.co_varnames[index] if flags & inspect.CO_VARARGS else None
    varkw = code.co_varnames[index + bool(vararg)] if flags & inspect.CO_VARKEYWORDS else None
    places = []
    for key, value in arguments:
        place = next((("param", name) for name in names if values.get(name) is value), None)
        if place is None and vararg is not None:
            held = values.get(vararg, ())
            place = next((("vararg", i) for i, item in enumerate(held) if item is value), None)
        if place is None and varkw is not None:
            held = values.get(varkw, {})
            place = next((("varkw", k) for k, item in held.items() if item is value), None)
        if place is None:
            if value is None:  # an argument left at its default: the written-out one's default stands
                continue
            return None
        places.append((key, place))
    return Mapping(tuple(places))


class Tracer:
    """Records the student's frames a call runs: their code, parameters at entry and result."""

    def __init__(self, package):
        self.package, self.frames = package, {}

    def __call__(self, frame, event, arg):
        if event == "call" and student_code(frame.f_code, self.package):
            code = frame.f_code
            count = code.co_argcount + code.co_kwonlyargcount
            count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
            local = frame.f_locals
            self.frames[frame] = [code, {n: local[n] for n in code.co_varnames[:count] if n in local}, False, None]
        elif event == "return" and frame in self.frames:
            self.frames[frame][2:] = [True, arg]


@contextmanager
def profiled(tracer):
    previous = sys.getprofile()
    sys.setprofile(tracer)
    try:
        yield
    finally:
        sys.setprofile(previous)


def wrapped(function, package):
    """The student's function that `function` wraps (a decorator's functools.wraps), or None."""
    for _ in range(8):
        function = getattr(function, "__wrapped__", None)
        if function is None:
            return None
        if isinstance(function, types.FunctionType) and student_code(function.__code__, package):
            return function
    return None


def positional(code, calls):
    """The Mapping of a function's own parameters for `calls` [(args, kwargs)]: positions in
    order, keywords by name."""
    names = code.co_varnames[: code.co_argcount]
    places, keywords = [], set()
    for args, kwargs in calls:
        places += [(i, ("param", names[i])) for i in range(min(len(args), len(names)))]
        keywords |= set(kwargs)
    places += [(name, ("param", name)) for name in sorted(keywords) if name in code.co_varnames]
    return Mapping(tuple(dict(places).items()))


def adapter_code(free: int):
    """The code of `def written_out(*args, _written_out=None, **kwargs)` with `free` free
    variables (unused): it can stand in for any function's code with as many (a closure)."""
    names = [f"_free{i}" for i in range(free)]
    lines = ["def outer():"]
    if names:
        lines.append(f"    {' = '.join(names)} = None")
    lines.append("    def written_out(*args, _written_out=None, **kwargs):")
    if names:
        lines.append(f"        ({', '.join(names)},)")
    lines.append("        return _written_out(args, kwargs)")
    lines.append("    return written_out")
    namespace = {}
    exec(compile("\n".join(lines), "<mha-lab written out>", "exec"), namespace)  # noqa: S102 - our own source
    code = namespace["outer"]().__code__
    assert len(code.co_freevars) == free
    return code


class Adapted:
    """Calls the written-out version with an earlier function's arguments, found where a
    function of the student's (whose code the adapter replaced) holds them: by the Mapping, or
    for a function that only passes on what it is given (*args, **kwargs), as it was given."""

    def __init__(self, version, signature, mapping):
        self.version, self.signature, self.mapping = version, signature, mapping

    def __call__(self, args, kwargs):
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = bound.arguments
        rest = next((v for n, v in values.items() if self._is(n, inspect.Parameter.VAR_POSITIONAL)), ())
        named = next((v for n, v in values.items() if self._is(n, inspect.Parameter.VAR_KEYWORD)), {})
        if self.mapping.places and all(kind != "param" for _, (kind, _) in self.mapping.places):
            return self.version(*rest, **named)  # a wrapper that passes everything on
        positional, keywords = {}, {}
        for key, (kind, where) in self.mapping.places:
            if kind == "param":
                value = values.get(where)
            elif kind == "vararg":
                value = rest[where] if where < len(rest) else None
            else:
                value = named.get(where)
            (positional if isinstance(key, int) else keywords)[key] = value
        return self.version(*[positional[i] for i in sorted(positional)], **keywords)

    def _is(self, name, kind):
        parameter = self.signature.parameters.get(name)
        return parameter is not None and parameter.kind == kind


def functions_with(package, roots, codes, limit=20_000) -> list:
    """The Python functions whose code is one of `codes`, found from `roots` and the package's
    modules through what the student's objects hold (attributes, closures, defaults, partials,
    wrapped functions, containers), within `limit` objects."""
    found, seen = [], {}  # id -> the object, held: a copy made here (dict(vars(...))) is freed
    # once read, and a later copy could get its id and be taken for seen (a class's methods missed)
    pending = list(roots) + [vars(module) for module in holders(package)]
    while pending and len(seen) < limit:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen[id(item)] = item
        if isinstance(item, types.FunctionType):
            if item.__code__ in codes:
                found.append(item)
            if student_code(item.__code__, package) or item.__code__ in codes:
                pending += [cell.cell_contents for cell in (item.__closure__ or ()) if _filled(cell)]
                pending += list(item.__defaults__ or ()) + list((item.__kwdefaults__ or {}).values())
            wrapped = getattr(item, "__wrapped__", None)
            if wrapped is not None:
                pending.append(wrapped)
        elif isinstance(item, (types.MethodType, staticmethod, classmethod)):
            pending.append(item.__func__)
        elif isinstance(item, property):
            pending += [part for part in (item.fget, item.fset) if part is not None]
        elif isinstance(item, dict):
            pending += list(item.values())[:1000]
        elif isinstance(item, (list, tuple, set, frozenset)):
            pending += list(item)[:1000]
        elif isinstance(item, types.ModuleType) or item is None or isinstance(item, (int, float, str, bytes)):
            continue
        elif inspect.isclass(item):
            if _students(item, package):
                pending.append(dict(vars(item)))
        elif hasattr(item, "func") and hasattr(item, "args") and hasattr(item, "keywords"):  # a partial
            pending += [item.func, *item.args, *(item.keywords or {}).values()]
        elif _students(type(item), package):
            pending.append(type(item))
            try:
                pending.append(dict(vars(item)))
            except TypeError:
                pass
    return found


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - reading an empty cell raises: that is the test
    except ValueError:
        return False
    return True


def _students(cls, package) -> bool:
    """Whether a class is defined by the student's code (one of its methods is)."""
    for value in vars(cls).values():
        value = getattr(value, "__func__", value)
        if isinstance(value, types.FunctionType):
            return student_code(value.__code__, package)
    return False


def holders(package, files=None):
    """The modules of a package loaded from files (every one under its name), or else the
    package's own namespaces `files` (all of them by default: a model package of namespaces)."""
    loaded = getattr(package, "_module", None)
    if loaded is not None:
        prefix = loaded.__name__ + "."
        return [module for key, module in list(sys.modules.items()) if key.startswith(prefix) and module is not None]
    files = files if files is not None else [n for n in vars(package) if not n.startswith("_")]
    found = []
    for name in files:
        try:
            found.append(getattr(package, name))
        except Exception:  # noqa: BLE001
            continue
    return found


@contextmanager
def swapped(targets):
    """Within the block, each function of `targets` [(function, Adapted)] runs its Adapted: its
    code is an adapter's (as many free variables as its own), its one keyword default the
    Adapted. Restored after, whatever happens."""
    saved = []
    try:
        for function, adapted in targets:
            if any(function is done for done, _ in saved):
                continue
            saved.append((function, (function.__code__, function.__defaults__, function.__kwdefaults__)))
            function.__code__ = adapter_code(len(function.__code__.co_freevars))
            function.__defaults__ = None
            function.__kwdefaults__ = {"_written_out": adapted}
        yield
    finally:
        for function, (code, defaults, kwdefaults) in reversed(saved):
            function.__code__, function.__defaults__, function.__kwdefaults__ = code, defaults, kwdefaults


@contextmanager
def pointed(modules, value, replacement):
    """Within the block, every name of `modules` that holds `value` holds `replacement`."""
    changed = []
    try:
        for module in modules:
            for name, held in list(vars(module).items()):
                if held is value:
                    changed.append((module, name))
                    setattr(module, name, replacement)
        yield
    finally:
        for module, name in reversed(changed):
            setattr(module, name, value)


# ---------------------------------------------------------------------------- comparing results

# How close the student's function must be to the written-out one on the probe for no second run:
# far tighter than any check's tolerance, so that the judge sees every function it deems wrong.
CLOSE = {"rtol": 1e-9, "atol": 1e-12}


def plain(result):
    """A result as tensors (detached) or a list of them, or None for anything else."""
    if isinstance(result, torch.Tensor):
        return result.detach()
    if isinstance(result, (tuple, list)) and 0 < len(result) <= 4 and all(isinstance(r, torch.Tensor) for r in result):
        return [r.detach() for r in result]
    return None


def close(theirs, mine) -> bool:
    if isinstance(mine, (list, tuple)):
        return isinstance(theirs, (list, tuple)) and len(theirs) == len(mine) and all(map(close, theirs, mine))
    if not isinstance(theirs, torch.Tensor) or not isinstance(mine, torch.Tensor):
        return False
    if theirs.shape != mine.shape or theirs.dtype != mine.dtype:
        return False
    if not mine.is_floating_point():
        return torch.equal(theirs, mine)
    return bool(torch.allclose(theirs, mine, equal_nan=True, **CLOSE))
