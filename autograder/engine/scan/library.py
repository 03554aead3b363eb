"""What the allowed libraries are, read from the libraries themselves (imported here, in the
judge: trusted code): their modules' members, the private names their classes and objects
own, their metaclasses, the types graded code may not subclass. The source policy's rules
(source_policy.py) name kinds of things; this module finds which library objects are of each
kind, so that a torch or numpy upgrade is decided by the same rules, not by a stale list.

    member("torch", "nn")           # ('module', 'torch.nn'): what torch.nn is
    resolve("torch.nn.Module")      # the object itself, or None
    private_owners()["_buffers"]    # {'torch.nn.modules.module.Module'}: whose private name it is
"""

import functools
import importlib
import importlib.util
import pkgutil
import types

from autograder.engine.scan.source_policy import (
    ALLOWED_MODULES,
    PRIVATE_ESCAPES,
    PUBLIC_UNDERSCORED,
    UNSUBCLASSABLE,
)


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def is_private(name: str) -> bool:
    """A name with a leading underscore that is not a dunder nor documented public API."""
    return name.startswith("_") and not is_dunder(name) and name not in PUBLIC_UNDERSCORED


@functools.cache
def loaded(module_name: str):
    """The module object of an allowed module, imported here in the judge (trusted library code),
    or None where it is not installed (einops)."""
    if module_name not in ALLOWED_MODULES:
        return None
    try:
        return importlib.import_module(module_name)
    except Exception:  # noqa: BLE001 - not installed or broken: its members stay unknown
        return None


@functools.lru_cache(maxsize=8192)
def member(module_name: str, attr: str):
    """What `attr` of the allowed module `module_name` is: ('module', real dotted name),
    ('object',) or None where this process cannot tell (a missing name fails at run time)."""
    module = loaded(module_name)
    if module is None or not attr.isidentifier():  # `getattr(torch, "a.b")`: nothing, and nothing to import
        return None
    value = vars(module).get(attr, member)
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    if value is not member:
        return ("object",)
    try:  # a submodule not imported yet (torch and numpy load some lazily)
        spec = importlib.util.find_spec(f"{module_name}.{attr}")
    except (ImportError, ValueError, AttributeError):
        spec = None
    return ("module", f"{module_name}.{attr}") if spec is not None else None


@functools.lru_cache(maxsize=8192)
def resolve(dotted: str):
    """The library object a dotted name of an allowed module stands for (`torch.nn.Module`,
    `enum.Enum`), or None where it is unknown. Reads attributes only (no call)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = loaded(".".join(parts[:cut]))
        if module is None:
            continue
        value = module
        for part in parts[cut:]:
            try:
                value = vars(value)[part] if isinstance(value, types.ModuleType) else getattr(value, part)
            except (KeyError, AttributeError, TypeError):
                return None
        return value
    return None


def qualified(cls) -> str:
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', '?')}"


@functools.lru_cache(maxsize=1)
def private_deny() -> frozenset:
    """Private names that lead into a library's internals from any object (an object handed
    over from another graded file may be such a library module): the private submodules of the
    allowed packages (torch._C, torch._ops, torch._dynamo, numpy._core ...), the private
    module-valued members of the allowed modules (random._os, collections._sys), and a few
    private functions that load code or reach frames."""
    names = set(PRIVATE_ESCAPES)
    for module_name in ALLOWED_MODULES:
        module = loaded(module_name)
        if module is None:
            continue
        for name, value in vars(module).items():
            if name.startswith("_") and not is_dunder(name) and isinstance(value, types.ModuleType):
                names.add(name)
        for found in pkgutil.iter_modules(getattr(module, "__path__", None) or []):
            if found.name.startswith("_") and not is_dunder(found.name):
                names.add(found.name)
    return frozenset(names)


def _classes():
    """Every class the allowed modules hold (public or private members), once each."""
    seen = {}
    for module_name in sorted(ALLOWED_MODULES):
        module = loaded(module_name)
        if module is None:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, type):
                seen.setdefault(id(value), value)
    return list(seen.values())


@functools.lru_cache(maxsize=1)
def private_owners() -> dict:
    """{private name: frozenset of the qualified names of the library classes that own it}: the
    private attributes (not dunders, not documented API) of the types that hold raw memory
    (tensors, storages, arrays: UNSUBCLASSABLE, and their subclasses the allowed modules hold),
    which take addresses, file names and descriptors (`_new_with_weak_ptr`, `_set_from_file`,
    `_cdata` ...), and the state nn.Module keeps per object, from which its `__getattr__`
    answers any attribute name (`_buffers`, `_modules` ...). Other libraries' private methods
    are Python code like their public ones (`_reset_parameters`): names as good as any other."""
    owners = {}
    for cls in _classes():
        if not any(issubclass(cls, kind) for kind in _unsubclassable()):
            continue
        try:
            names = dir(cls)
        except Exception:  # noqa: BLE001 - a class whose dir() raises: nothing known of it
            continue
        for name in names:
            if is_private(name):
                owners.setdefault(name, set()).add(qualified(cls))
    for name in module_state():
        owners.setdefault(name, set()).add("torch.nn.Module")
    return {name: frozenset(classes) for name, classes in owners.items()}


@functools.lru_cache(maxsize=1)
def module_state() -> frozenset:
    """The private names nn.Module keeps on each object (`_parameters`, `_buffers`, `_modules`,
    its hooks): its `__getattr__` answers from the first three, so they are never a subclass's."""
    module_class = resolve("torch.nn.Module")
    return frozenset(name for name in vars(module_class()) if is_private(name)) if module_class else frozenset()


def is_metaclass(value) -> bool:
    """A maker of classes (type, abc.ABCMeta, enum.EnumType ...)."""
    return isinstance(value, type) and issubclass(value, type)


@functools.lru_cache(maxsize=1)
def _unsubclassable() -> tuple:
    found = []
    for dotted in UNSUBCLASSABLE:
        value = resolve(dotted)
        if isinstance(value, type):
            found.append(value)
    return tuple(found)


def unsubclassable(value) -> bool:
    """A tensor, storage or array type, or a dict type (numpy reads memory addresses from dicts)."""
    if not isinstance(value, type):
        return False
    return issubclass(value, dict) or any(issubclass(value, kind) for kind in _unsubclassable())


def is_enum_class(value) -> bool:
    enum_type = resolve("enum.Enum")
    return isinstance(value, type) and enum_type is not None and issubclass(value, enum_type)
