"""Calls a step may not use (grading.yml: a step's `forbidden` list), caught at run time where the
call is made, and in the source as evidence.

At run time (in the process that runs the student's code) three watches run together while a
check observes; each sees a call however it was reached (an alias, getattr with a built name,
`torch.ops.aten.*`, `torch._C._nn.*`, inside `torch._C.DisableTorchFunction()`):

* ATen kernels. For each forbidden name, the ATen operators it runs as (`Signs.ops`: e.g.
  F.scaled_dot_product_attention -> aten::scaled_dot_product_attention, its math decomposition
  aten::_scaled_dot_product_attention_math and the fused kernels it picks on CPU and CUDA;
  pad_sequence -> aten::pad_sequence). Composite operators (those ATen decomposes above autograd,
  which no TorchDispatchMode ever sees) get a Python kernel of ours on the autograd and backend
  keys, registered once at import: it notes the call and runs ATen's own decomposition, so
  values and gradients are unchanged, and it costs nothing to the other operators.
* A TorchDispatchMode sees every operator that reaches a backend kernel (the fused attention
  kernels, aten::_native_multi_head_attention), and at each softmax or matrix product it looks
  at the Python stack for the frames of forbidden Python functions (`Signs.frames`:
  F.multi_head_attention_forward, nn.MultiheadAttention.forward), which have no operator of
  their own. DisableTorchFunction does not switch it off.
* A TorchFunctionMode (the cheapest) sees the overridable Python-level torch functions, and a
  module registration hook sees a forbidden nn.Module made part of the student's module.

What remains possible: all three live in the worker process that runs the student's code, and
Python code that takes over that process (finds the watch through the interpreter's reflection,
pops the modes with torch's private API, or calls a kernel directly with op.decompose /
torch._C._dispatch_call_boxed) can make it report nothing. scan_tampering refuses every means
to do so in the source: graded code may use only what an attention exercise needs
(source_policy.py, an allow-list). Copying torch's own Python source of a forbidden function
into the submission is not seen at run time either.
"""

import ast
import functools
import importlib
import sys
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch.nn.modules.module import register_module_module_registration_hook
from torch.overrides import TorchFunctionMode
from torch._C._dynamo.eval_frame import set_eval_frame as _set_eval_frame
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.engine import messages, source_policy
from autograder.engine.submission import refusal  # what staging refuses (links, pipes, oversized files) is not parsed


def short_name(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


# ---------------------------------------------------------------------------- run time

# The kernels F.scaled_dot_product_attention picks (math, and fused ones per device).
_SDPA_OPS = (
    "scaled_dot_product_attention",
    "_scaled_dot_product_attention_math",
    "_scaled_dot_product_attention_math_for_mps",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_fused_attention_overrideable",
    "_flash_attention_forward",
    "_efficient_attention_forward",
)


@dataclass(frozen=True)
class Signs:
    """How a forbidden name shows at run time."""

    functions: tuple = ()  # names a TorchFunctionMode sees (func.__name__)
    ops: tuple = ()  # ATen operator names (no namespace, no overload)
    frames: tuple = ()  # dotted names of Python functions whose frame gives the call away


KNOWN_SIGNS = {
    "torch.nn.functional.scaled_dot_product_attention": Signs(("scaled_dot_product_attention",) + _SDPA_OPS, _SDPA_OPS),
    "torch.nn.functional.multi_head_attention_forward": Signs(
        ("multi_head_attention_forward", "_native_multi_head_attention"),
        ("_native_multi_head_attention",),
        ("torch.nn.functional.multi_head_attention_forward",),
    ),
    # The module is told from the functional form by its forward's frame on the stack.
    "torch.nn.MultiheadAttention": Signs(
        ("_native_multi_head_attention",), ("_native_multi_head_attention",), ("torch.nn.MultiheadAttention.forward",)
    ),
    "torch.nn.utils.rnn.pad_sequence": Signs(
        ("pad_sequence",), ("pad_sequence",), ("torch.nn.utils.rnn.pad_sequence",)
    ),
}
KNOWN_SIGNS["torch.nn.modules.activation.MultiheadAttention"] = KNOWN_SIGNS["torch.nn.MultiheadAttention"]
# Operators at which the dispatch watch looks at the Python stack: every attention computes a
# softmax and matrix products, so a forbidden Python function shows there (cheap: a few per check).
_ANCHOR_OPS = frozenset({"_softmax", "_safe_softmax", "bmm", "baddbmm", "addmm", "mm"})
_ANCHOR_COMPOSITES = ("softmax.int",)  # composite: seen only by a kernel of ours (e.g. under fake tensors)


def resolve(dotted: str):
    """The object a dotted torch name stands for, or None."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                value = getattr(value, part)
        except AttributeError:
            return None
        return value
    return None


def _is_aten_op(name: str) -> bool:
    try:
        getattr(torch.ops.aten, name)
        return True
    except (AttributeError, RuntimeError):
        return False


@functools.lru_cache(maxsize=None)
def signs_of(dotted: str) -> Signs:
    """KNOWN_SIGNS, or for another name: its own function name, an ATen operator of that name,
    and its Python code (a module's forward) as a frame."""
    if dotted in KNOWN_SIGNS:
        return KNOWN_SIGNS[dotted]
    name = short_name(dotted)
    value = resolve(dotted)
    frames = ()
    if isinstance(value, type) and issubclass(value, torch.nn.Module):
        frames = (dotted + ".forward",)
        name = name.lower()
    elif hasattr(value, "__code__"):
        frames = (dotted,)
    return Signs((short_name(dotted),), (name,) if _is_aten_op(name) else (), frames)


def _code_of(dotted: str):
    value = resolve(dotted)
    return getattr(value, "__code__", None)


@functools.lru_cache(maxsize=64)
def _watched(forbidden: tuple) -> tuple:
    """(functions, ops, codes, classes): what a Watch of `forbidden` looks for, worked out once
    per list (resolving names imports modules: too slow to repeat for every check). Read-only."""
    functions, ops, codes = {}, {}, {}
    classes = {}  # forbidden nn.Module classes: made a submodule of the student's module = used
    for dotted in forbidden:  # a later name wins a shared sign
        signs = signs_of(dotted)
        value = resolve(dotted)
        if isinstance(value, type) and issubclass(value, torch.nn.Module):
            classes[value] = dotted
        functions.update(dict.fromkeys(signs.functions, dotted))
        ops.update(dict.fromkeys(signs.ops, dotted))
        for frame in signs.frames:
            code = _code_of(frame)
            if code is not None:
                codes.setdefault(code, dotted)
    return functions, ops, codes, classes


class Watch:
    """The forbidden calls seen while it is active (`seen`: dotted names, in order)."""

    def __init__(self, forbidden):
        self.seen = []
        self.functions, self.ops, self.codes, self.classes = _watched(tuple(forbidden))

    def note(self, dotted):
        if dotted not in self.seen:
            self.seen.append(dotted)

    def module_registered(self, parent, name, module):
        for cls, dotted in self.classes.items():
            if isinstance(module, cls):
                self.note(dotted)

    def look_at_stack(self):
        frame = sys._getframe(2)
        while frame is not None:
            dotted = self.codes.get(frame.f_code)
            if dotted is not None:
                self.note(dotted)
            frame = frame.f_back


_active = []  # Watches in force, innermost last (read by the composite kernels below)


class _FunctionWatch(TorchFunctionMode):
    def __init__(self, watch):
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        dotted = self.watch.functions.get(getattr(func, "__name__", None))
        if dotted is not None:
            self.watch.note(dotted)
        return func(*args, **(kwargs or {}))


class _DispatchWatch(TorchDispatchMode):
    def __init__(self, watch):
        super().__init__()
        self.watch = watch

    @classmethod
    def _should_skip_dynamo(cls):
        # torch would wrap __torch_dispatch__ in torch._dynamo.disable, whose first call imports
        # torch._dynamo (seconds: most of a student's `pytest assignments/`) and whose every
        # call costs Python work. The handler below does what that wrapper does, in C: no
        # frame under it is ever compiled.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        prior = _set_eval_frame(None)
        try:
            name = func._opname
            dotted = self.watch.ops.get(name)
            if dotted is not None:
                self.watch.note(dotted)
            elif name in _ANCHOR_OPS and self.watch.codes:
                self.watch.look_at_stack()
            return func(*args, **(kwargs or {}))
        finally:
            _set_eval_frame(prior)


_library = torch.library.Library("aten", "IMPL")  # kept alive: our kernels live as long as it does
_registered = set()
# Autograd keys (a call from Python lands there first) and, for calls that skip autograd
# (inference_mode, below-autograd guards), every backend through CompositeExplicitAutograd.
_KEYS = (
    "AutogradCPU",
    "AutogradCUDA",
    "AutogradMeta",
    "AutogradPrivateUse1",
    "AutogradOther",
    "CompositeExplicitAutograd",
)


def _composite(op):
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")


def _watch_composite(qualified: str, anchor: bool = False) -> None:
    """Give the composite ATen operator `qualified` ('name' or 'name.overload') a kernel of ours
    that tells the active watches and runs ATen's own decomposition."""
    if qualified in _registered:
        return
    _registered.add(qualified)
    name, _, overload = qualified.partition(".")
    try:
        op = getattr(getattr(torch.ops.aten, name), overload or "default")
    except (AttributeError, RuntimeError):
        return
    if not _composite(op):
        return  # a real kernel: the dispatch watch sees it

    def kernel(*args, **kwargs):
        for watch in _active:
            if anchor:
                if watch.codes:
                    watch.look_at_stack()
            elif name in watch.ops:
                watch.note(watch.ops[name])
        return op.decompose(*args, **kwargs)

    for key in _KEYS:
        try:
            _library.impl(qualified, kernel, key)
        except RuntimeError:
            pass  # a key this build does not have


for _signs in KNOWN_SIGNS.values():
    for _op in _signs.ops:
        _watch_composite(_op)
for _op in _ANCHOR_COMPOSITES:
    _watch_composite(_op, anchor=True)


@contextmanager
def watching(forbidden):
    """Run the block recording forbidden calls; yields the list of dotted names seen (filled in place)."""
    if not forbidden:
        yield []
        return
    watch = Watch(forbidden)
    for op in watch.ops:
        _watch_composite(op)
    _active.append(watch)
    hook = register_module_module_registration_hook(watch.module_registered) if watch.classes else None
    try:
        with _FunctionWatch(watch), _DispatchWatch(watch):
            yield watch.seen
    finally:
        _active.remove(watch)
        if hook is not None:
            hook.remove()


# ---------------------------------------------------------------------------- in the source


@functools.lru_cache(maxsize=16)  # a submission's files: each entry holds a whole tree
def nodes(source: str):
    """The nodes of the graded code of `source` (None on a syntax error, or for a file too large
    to be graded: source_policy refuses it unread), parsed and walked once per source. Graded
    code is all of it but `if __name__ == "__main__":` blocks and test functions (`def test_*`,
    at module level or in a `class Test*`), which the grader never runs: such a block counts as
    graded where the file rebinds `__name__`, and such a function where the file names it
    anywhere else (it could be called). Read-only to callers. (Forbidden-call evidence only:
    what is tampering is source_policy's, which also reads the bodies of `class Test*`.)"""
    if len(source) > source_policy.MAX_SOURCE_CHARS:
        return None
    try:
        tree = ast.parse(source.encode("utf-8", "surrogatepass"))  # as an import reads it (a byte-order mark)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    every = tuple(ast.walk(tree))
    loads = {n.id for n in every if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    loads |= {n.attr for n in every if isinstance(n, ast.Attribute)}
    rebinds_name = any(
        isinstance(n, ast.Name) and n.id == "__name__" and not isinstance(n.ctx, ast.Load) for n in every
    )
    skipped = set()

    def skip(node):
        skipped.update(id(n) for n in ast.walk(node))

    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_test(node.test) and not rebinds_name:
            for child in node.body:
                skip(child)
        elif _is_test_function(node, loads):
            skip(node)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test") and node.name not in loads:
            skip(node)
    return tuple(n for n in every if id(n) not in skipped)


def _is_main_test(test) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
    )


def _is_test_function(node, loads) -> bool:
    return (
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name.startswith("test_")
        and node.name not in loads
        and not node.decorator_list
    )


def folded(node):
    """The value of a string expression built from literals ('a' + 'b', f'{"a"}b', ''.join([...]),
    'ba'[::-1], '%s' % 'a'), or None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp):
        left, right = folded(node.left), folded(node.right)
        if isinstance(node.op, ast.Add) and left is not None and right is not None:
            return left + right
        if isinstance(node.op, ast.Mod) and left is not None:
            values = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            parts = [folded(v) for v in values]
            if None not in parts:
                try:
                    return left % tuple(parts)
                except (TypeError, ValueError):
                    return None
        return None
    if isinstance(node, ast.JoinedStr):
        parts = [folded(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values]
        return None if None in parts else "".join(parts)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and isinstance(node.args[0], (ast.List, ast.Tuple))
    ):
        glue = folded(node.func.value)
        parts = [folded(v) for v in node.args[0].elts]
        return None if glue is None or None in parts else glue.join(parts)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        text = folded(node.value)
        bounds = [
            b.value if isinstance(b, ast.Constant) else b for b in (node.slice.lower, node.slice.upper, node.slice.step)
        ]
        if text is not None and all(b is None or isinstance(b, int) for b in bounds):
            return text[slice(*bounds)]
    return None


def _root(node):
    """'torch' for torch.nn.functional.x: the name an attribute chain starts from."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _torch_aliases(every_node):
    """Names bound to torch or to something imported from it."""
    aliases = set()
    for node in every_node:
        if isinstance(node, ast.Import):
            aliases.update(a.asname or "torch" for a in node.names if a.name.split(".")[0] == "torch")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch" and not node.level:
            aliases.update(a.asname or a.name for a in node.names)
    return aliases


_LOOKUPS = {"getattr", "hasattr", "setattr", "delattr", "__import__"}


def scan_source(source: str, forbidden) -> list:
    """[(forbidden dotted name, line)] where graded code names a forbidden call: through a torch
    import (`F.scaled_dot_product_attention`, `from torch.nn.utils.rnn import pad_sequence`), or
    as a string built from literals (getattr(F, 'scaled_dot_' + 'product_attention')). Evidence
    for the run-time watch's report, which alone decides."""
    names = {short_name(dotted): dotted for dotted in forbidden}
    every_node = nodes(source)
    if every_node is None or not names:
        return []
    torch_aliases, direct, hits = _torch_aliases(every_node), {}, []
    for node in every_node:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch" and not node.level:
            for alias in node.names:
                if alias.name in names:  # `from torch... import pad_sequence [as ps]`
                    direct[alias.asname or alias.name] = names[alias.name]
                    hits.append((names[alias.name], node.lineno))
    for node in every_node:
        if isinstance(node, ast.Attribute) and node.attr in names and _root(node) in torch_aliases:
            hits.append((names[node.attr], node.lineno))
        elif isinstance(node, ast.Name) and node.id in direct and isinstance(node.ctx, ast.Load):
            hits.append((direct[node.id], node.lineno))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _LOOKUPS
            and len(node.args) >= 2
            and folded(node.args[1]) in names
        ):
            hits.append((names[folded(node.args[1])], node.lineno))
        elif isinstance(node, (ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript)) and folded(node) in names:
            hits.append((names[folded(node)], node.lineno))
    return sorted(set(hits), key=lambda hit: hit[1])


# ---------------------------------------------------------------------------- tampering


def scan_tampering(source: str) -> list:
    """[(what, line)] for each construct of a graded file outside what an attention exercise
    needs (autograder/engine/source_policy.py: an allow-list of modules, built-ins and
    attributes, read from every statement), by line; `what` says the construct and why it is
    refused, in the chosen language. Such code could reach into the grader or switch off its
    watch; it scores zero in the steps that run it."""
    return [
        (messages.render(found.message_id, code=found.code, name=found.name), found.line)
        for found in source_policy.findings(source)
    ]


# ---------------------------------------------------------------------------- the submission's files


def package_files(directory) -> dict:
    """{'<package>/<relative path>': source} for every .py file under `directory` (a submission's
    package folder), subfolders included, that is a regular file within the size limit."""
    from pathlib import Path

    root = Path(directory)
    files = {}
    for path in sorted(root.rglob("*.py")) if root.is_dir() else []:
        if refusal(path.lstat()) is not None:
            continue
        # utf-8-sig: a byte-order mark is not part of the source (Python's import skips it)
        files[f"{root.name}/" + path.relative_to(root).as_posix()] = path.read_text(
            encoding="utf-8-sig", errors="replace"
        )
    return files


def _module_of(file: str) -> str:
    """'<package>/sub/x.py' -> 'sub.x'; '<package>/sub/__init__.py' -> 'sub'."""
    parts = file.split("/", 1)[1][: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_files(files: dict, file: str) -> set:
    """The files of `files` that `file` imports (relative, rooted at the package's name or a bare
    sibling name), with the packages on the way."""
    by_module = {_module_of(f): f for f in files}
    top = file.split("/", 1)[0]  # the package's name
    every_node = nodes(files[file]) or ()
    here = _module_of(file).split(".")
    package = here if file.endswith("/__init__.py") else here[:-1]
    wanted = []
    for node in every_node:
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                wanted.append(parts[1:] if parts[0] == top else parts)
        elif isinstance(node, ast.ImportFrom):
            module = (node.module or "").split(".") if node.module else []
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
            elif module and module[0] == top:
                base, module = [], module[1:]
            else:
                base = []
            wanted.append(base + module)
            wanted.extend(base + module + [a.name] for a in node.names)
    found = set()
    for parts in wanted:
        for cut in range(1, len(parts) + 1):  # a module and the packages on its way
            target = by_module.get(".".join(p for p in parts[:cut] if p))
            if target is not None:
                found.add(target)
    return found


def reached_files(files: dict, start) -> list:
    """The files the step files `start` run, directly or through imports, in a stable order."""
    todo = [f for f in start if f in files]
    seen = []
    while todo:
        file = todo.pop(0)
        if file in seen:
            continue
        seen.append(file)
        todo.extend(sorted(imported_files(files, file) - set(seen)))
    return seen
