"""Attribute names chosen at run time, in the student's modules: the judge's source policy applied
where the name is known.

    guard = Guard(LookupRule.from_data(data), "mha", directory)  # data: source_reader.lookup_rule()
    names = guarded_builtins(guard)              # the student's modules' __builtins__
    guard.adopt(module)                          # each module of the package, as it loads

The source policy (autograder/engine/scan/source_policy.py) reads every name the code writes;
`getattr(self, name)` with a name made at run time is ordinary Python on the student's own
objects, so the judge accepts it and the name is checked here when it is looked up, by the same
rules: no dunder but the harmless ones (the protocols through which numpy reads raw memory, the
interpreter's frames and code), no private part of a library module, tensor, storage or array,
nor the state nn.Module answers attribute lookups from, no name refused on every object unless
the student's own class defines it, no member of a library module that the code could not
name, nothing of a library's modules, classes or functions changed, and nothing the lookup
returns may be a refused module, a frame, code, a metaclass or a built-in that runs code. A
private name is its definer's: never a library object's, a tensor's or an array's, nor the
state nn.Module keeps on the student's own modules; the student's objects' own private names
are theirs.
`type(x)` gives the type of an object, never of a class (a metaclass: a maker of classes from
run-time names). A refused lookup raises ContractError("refused_lookup") with the place: the
check fails and says why.

Where it holds: in every process that loads the student's package with a rule (the sandboxed
worker, and the student's own run). It is only as strong as the process it runs in, which the
source policy keeps the student from taking over (threat-model.md).
"""

import builtins
import sys
import types
import weakref
from dataclasses import dataclass

from autograder.harness.contract import ContractError

_REAL = {name: getattr(builtins, name) for name in ("getattr", "setattr", "delattr", "hasattr", "type")}
_FRAMES = (types.FrameType, types.CodeType, types.TracebackType)
# Built-ins that run code or reach the interpreter: a lookup may not return them (a library
# object holding one would hand it over).
_RUNS_CODE = tuple(
    getattr(builtins, name)
    for name in (
        "exec",
        "eval",
        "compile",
        "__import__",
        "globals",
        "locals",
        "vars",
        "open",
        "breakpoint",
        "input",
        "help",
        "getattr",
        "setattr",
        "delattr",
        "__build_class__",
    )
    if hasattr(builtins, name)
)
_MISSING = object()


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


@dataclass(frozen=True)
class LookupRule:
    """The judge's rule for names looked up at run time (plain data: it crosses the wire)."""

    readable_dunders: frozenset
    definable_dunders: frozenset
    refused_names: frozenset  # on every object: frames, machinery, file readers ...
    public_underscored: frozenset  # names with an underscore that are documented API
    module_state: frozenset  # what nn.Module keeps per object (its __getattr__ answers from it)
    memory_types: frozenset  # tensors, storages, arrays (dotted): their private parts take addresses
    allowed_modules: frozenset
    some_members: dict  # module -> the only members graded code may use
    module_deny: dict  # module -> members refused on it

    @classmethod
    def from_data(cls, data: dict) -> "LookupRule":
        return cls(
            **{
                key: frozenset(data[key])
                for key in cls.__dataclass_fields__
                if key not in ("some_members", "module_deny")
            },
            some_members={k: frozenset(v) for k, v in data["some_members"].items()},
            module_deny={k: frozenset(v) for k, v in data["module_deny"].items()},
        )


class Guard:
    """The lookups of one student package. What is the student's own is known by identity, never
    by a name the student could set (`__module__`, `__name__`: functools.update_wrapper copies
    them onto anything): the modules its loader ran, the classes its `class` statements made,
    the functions whose code is in its files."""

    def __init__(self, rule: LookupRule, package: str, directory):
        self.rule, self.package, self.directory = rule, package, str(directory)
        self._kinds = None  # the memory types, found once torch and numpy are loaded
        self.modules = set()  # ids of the student's module objects (sys.modules keeps them)
        self.classes = weakref.WeakSet()  # the classes its class statements made
        self.names = None  # its modules' built-ins (guarded_builtins)

    # ------------------------------------------------------------ whose is it

    def adopt(self, module) -> None:
        """`module` is one of the student's (made by its loader, or its package's own)."""
        self.modules.add(id(module))

    def own(self, value) -> bool:
        """A module, class or function of the student's package."""
        if isinstance(value, types.ModuleType):
            return id(value) in self.modules
        if isinstance(value, type):
            return value in self.classes
        if isinstance(value, types.MethodType):
            value = value.__func__
        if isinstance(value, types.FunctionType):
            return value.__code__.co_filename.startswith(self.directory + "/")
        return False

    def _definer(self, target, name: str):
        """Who defines `name` for `target`: "own" (the student's package) or "library": the first
        class of its type that defines it (of its own MRO, for a class), else the class of the
        object that holds it as its own attribute; None where neither does."""
        if isinstance(target, types.ModuleType):
            return "own" if self.own(target) else "library"
        cls = target if isinstance(target, type) else _REAL["type"](target)
        for klass in cls.__mro__:
            if name in vars(klass):
                return "own" if self.own(klass) else "library"
        if isinstance(target, type):
            return None
        try:
            held = name in vars(target)
        except TypeError:  # no __dict__
            held = False
        if not held:
            return None  # answered, if at all, by a __getattr__ (nn.Module's: from its state)
        return "own" if self.own(cls) else "library"

    def _holds_memory(self, target) -> bool:
        """A tensor, storage or array (or one of their classes): its private parts take addresses."""
        kinds = self._memory_types()
        cls = target if isinstance(target, type) else _REAL["type"](target)
        return bool(kinds) and issubclass(cls, kinds)

    def _memory_types(self) -> tuple:
        if self._kinds is None:
            found = []
            for dotted in self.rule.memory_types:
                module, _, name = dotted.rpartition(".")
                value = _REAL["getattr"](sys.modules.get(module), name, None)
                if isinstance(value, type):
                    found.append(value)
            self._kinds = tuple(found)
        return self._kinds

    def _nn_module(self, target) -> bool:
        torch = sys.modules.get("torch")
        module_class = _REAL["getattr"](_REAL["getattr"](torch, "nn", None), "Module", None)
        cls = target if isinstance(target, type) else _REAL["type"](target)
        return isinstance(module_class, type) and issubclass(cls, module_class)

    def _refused(self, target, name: str):
        """The rules a name obeys whether read or written (after its dunder rule)."""
        rule = self.rule
        if name in rule.refused_names and (self._definer(target, name) != "own" or name in rule.module_state):
            return name
        if name.startswith("_") and name not in rule.public_underscored:
            if isinstance(target, types.ModuleType) and not self.own(target):
                return f"{target.__name__}.{name}"
            cls = target if isinstance(target, type) else _REAL["type"](target)
            if not self.own(cls) or self._holds_memory(target):
                return name  # a library's object: its private names are the library's
            if self._definer(target, name) == "library":
                return name  # inherited from a library's class (nn.Module's _version): the library's
            if name in rule.module_state and self._nn_module(target):
                return name
        return None

    # ------------------------------------------------------------ the rules

    def why_not_read(self, target, name: str):
        """None where graded code may read `name` of `target`, else what it is."""
        rule = self.rule
        if _dunder(name):
            if name not in rule.readable_dunders or (name == "__class__" and isinstance(target, type)):
                return name
            return None
        if isinstance(target, types.ModuleType) and self.own(target) and name.startswith(("test_", "Test")):
            return name  # another file's test code is not read by the judge (source_reader.skipped)
        if isinstance(target, types.ModuleType) and not self.own(target) and not name.startswith("_"):
            member = vars(target).get(name)
            if isinstance(member, types.ModuleType):  # decided by what it is, as in the code (`torch.nn`)
                return None if member.__name__ in rule.allowed_modules else f"{target.__name__}.{name}"
        why = self._refused(target, name)
        if why is not None:
            return why
        if isinstance(target, types.ModuleType) and not self.own(target):
            module = target.__name__
            if module not in rule.allowed_modules:
                return f"{module}.{name}"
            if name not in rule.some_members.get(module, (name,)) or name in rule.module_deny.get(module, ()):
                return f"{module}.{name}"
        return None

    def why_not_value(self, value):
        """None where graded code may hold what a lookup returned, else what it is."""
        if isinstance(value, types.ModuleType):
            if value.__name__ not in self.rule.allowed_modules and not self.own(value):
                return value.__name__
        elif isinstance(value, _FRAMES):
            return _REAL["type"](value).__name__
        elif isinstance(value, type) and issubclass(value, type) or any(value is code for code in _RUNS_CODE):
            return value.__name__
        return None

    def why_not_write(self, target, name: str):
        """None where graded code may set (or delete) `name` of `target`, else what it is."""
        if _dunder(name):
            return None if name in self.rule.definable_dunders else name
        why = self._refused(target, name)
        if why is not None:
            return why
        library = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType)
        if isinstance(target, library) and not self.own(target):  # a library's: not the student's to change
            return f"{_REAL['getattr'](target, '__name__', '?')}.{name}"
        return None

    def refuse(self, function: str, what: str):
        raise ContractError("refused_lookup", function=function, name=str(what)[:80], where=self.where())

    def where(self) -> str:
        """'mha/cache.py, line 12' of the innermost student frame calling the guard, or ''."""
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(self.directory + "/"):
                return f"{self.package}/{filename[len(self.directory) + 1 :]}, line {frame.f_lineno}"
            frame = frame.f_back
        return ""


def _name(function: str, name):
    if _REAL["type"](name) is not str:  # a str subclass could show the guard one name, getattr another
        raise TypeError(f"{function}(): attribute name must be a string")
    return name


def guarded_builtins(guard: Guard) -> dict:
    """The built-ins of the student's modules: Python's, with getattr, setattr, delattr, hasattr
    and type checked by the guard's rule, and the `class` statement telling it which classes are
    the student's."""
    real_build_class = builtins.__build_class__
    real_getattr, real_setattr, real_delattr, real_hasattr, real_type = (
        _REAL[n] for n in ("getattr", "setattr", "delattr", "hasattr", "type")
    )

    def getattr(target, name, default=_MISSING, /):  # noqa: A001 - the student's getattr
        name = _name("getattr", name)
        why = guard.why_not_read(target, name)
        if why is not None:
            guard.refuse("getattr", why)
        value = real_getattr(target, name) if default is _MISSING else real_getattr(target, name, default)
        why = guard.why_not_value(value)
        if why is not None:
            guard.refuse("getattr", why)
        return value

    def hasattr(target, name, /):  # noqa: A001 - a yes or no: nothing is handed over
        return real_hasattr(target, _name("hasattr", name))

    def setattr(target, name, value, /):  # noqa: A001
        name = _name("setattr", name)
        why = guard.why_not_write(target, name)
        if why is not None:
            guard.refuse("setattr", why)
        real_setattr(target, name, value)

    def delattr(target, name, /):  # noqa: A001
        name = _name("delattr", name)
        why = guard.why_not_write(target, name)
        if why is not None:
            guard.refuse("delattr", why)
        real_delattr(target, name)

    def type(*args):  # noqa: A001 - type(x) only: never a class's type, never a new class
        if len(args) != 1 or isinstance(args[0], real_type):
            guard.refuse("type", "type(...) of a class, or with a namespace")
        return real_type(args[0])

    def __build_class__(function, name, *bases, **keywords):
        made = real_build_class(function, name, *bases, **keywords)
        if isinstance(made, real_type):
            guard.classes.add(made)
        return made

    names = dict(vars(builtins))
    names.update(
        getattr=getattr, setattr=setattr, delattr=delattr, hasattr=hasattr, type=type, __build_class__=__build_class__
    )
    return names
