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
* A TorchFunctionMode (the cheapest) sees the overridable Python-level torch functions.

What remains possible: all three live in the worker process that runs the student's code, and
Python code that takes over that process (finds the watch through the interpreter's reflection,
pops the modes with torch's private API, or calls a kernel directly with op.decompose /
torch._C._dispatch_call_boxed) can make it report nothing. scan_tampering flags the means to do
so in the source (the grader's modules, gc, ctypes, importlib, frames, torch._C and the other
dispatcher internals, dynamic code). Copying torch's own Python source of a forbidden function into the
submission is not seen at run time either.
"""
import ast
import functools
import importlib
import sys
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode


def short_name(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


# ---------------------------------------------------------------------------- run time

# The kernels F.scaled_dot_product_attention picks (math, and fused ones per device).
_SDPA_OPS = ("scaled_dot_product_attention", "_scaled_dot_product_attention_math",
             "_scaled_dot_product_attention_math_for_mps", "_scaled_dot_product_flash_attention_for_cpu",
             "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
             "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_fused_attention_overrideable",
             "_flash_attention_forward", "_efficient_attention_forward")


@dataclass(frozen=True)
class Signs:
    """How a forbidden name shows at run time."""

    functions: tuple = ()  # names a TorchFunctionMode sees (func.__name__)
    ops: tuple = ()  # ATen operator names (no namespace, no overload)
    frames: tuple = ()  # dotted names of Python functions whose frame gives the call away


KNOWN_SIGNS = {
    "torch.nn.functional.scaled_dot_product_attention": Signs(("scaled_dot_product_attention",) + _SDPA_OPS, _SDPA_OPS),
    "torch.nn.functional.multi_head_attention_forward": Signs(
        ("multi_head_attention_forward", "_native_multi_head_attention"), ("_native_multi_head_attention",),
        ("torch.nn.functional.multi_head_attention_forward",)),
    # The module is told from the functional form by its forward's frame on the stack.
    "torch.nn.MultiheadAttention": Signs(
        ("_native_multi_head_attention",), ("_native_multi_head_attention",), ("torch.nn.MultiheadAttention.forward",)),
    "torch.nn.utils.rnn.pad_sequence": Signs(("pad_sequence",), ("pad_sequence",), ("torch.nn.utils.rnn.pad_sequence",)),
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


class Watch:
    """The forbidden calls seen while it is active (`seen`: dotted names, in order)."""

    def __init__(self, forbidden):
        self.seen = []
        self.functions, self.ops, self.codes = {}, {}, {}
        for dotted in forbidden:  # a later name wins a shared sign (nn.MultiheadAttention over F.multi_head_...)
            signs = signs_of(dotted)
            self.functions.update(dict.fromkeys(signs.functions, dotted))
            self.ops.update(dict.fromkeys(signs.ops, dotted))
            for frame in signs.frames:
                code = _code_of(frame)
                if code is not None:
                    self.codes.setdefault(code, dotted)

    def note(self, dotted):
        if dotted not in self.seen:
            self.seen.append(dotted)

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

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._opname
        dotted = self.watch.ops.get(name)
        if dotted is not None:
            self.watch.note(dotted)
        elif name in _ANCHOR_OPS and self.watch.codes:
            self.watch.look_at_stack()
        return func(*args, **(kwargs or {}))


_library = torch.library.Library("aten", "IMPL")  # kept alive: our kernels live as long as it does
_registered = set()
# Autograd keys (a call from Python lands there first) and, for calls that skip autograd
# (inference_mode, below-autograd guards), every backend through CompositeExplicitAutograd.
_KEYS = ("AutogradCPU", "AutogradCUDA", "AutogradMeta", "AutogradPrivateUse1", "AutogradOther",
         "CompositeExplicitAutograd")


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
    try:
        with _FunctionWatch(watch), _DispatchWatch(watch):
            yield watch.seen
    finally:
        _active.remove(watch)


# ---------------------------------------------------------------------------- in the source

@functools.lru_cache(maxsize=16)
def nodes(source):
    """Every node of the AST of `source` (None on a syntax error), parsed and walked once: every
    step scans its files for forbidden calls and tampering, twice each, and attention.py belongs
    to two steps. Read-only to callers."""
    try:
        return tuple(ast.walk(ast.parse(source)))
    except (SyntaxError, ValueError):
        return None


def scan_source(source, forbidden):
    """[(forbidden dotted name, line)] for each use of a forbidden name through a torch import."""
    names = {short_name(dotted): dotted for dotted in forbidden}
    every_node = nodes(source)
    if every_node is None:
        return []
    torch_aliases, direct, hits = set(), {}, []
    for node in every_node:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "torch":
                    torch_aliases.add(alias.asname or "torch")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            for alias in node.names:
                if alias.name in names:  # `from torch... import pad_sequence [as ps]`
                    direct[alias.asname or alias.name] = names[alias.name]
                    hits.append((names[alias.name], node.lineno))
                else:  # a torch module or object, e.g. `from torch import nn`
                    torch_aliases.add(alias.asname or alias.name)
    for node in every_node:
        if isinstance(node, ast.Attribute) and node.attr in names and _root(node) in torch_aliases:
            hits.append((names[node.attr], node.lineno))
        elif isinstance(node, ast.Name) and node.id in direct and isinstance(node.ctx, ast.Load):
            hits.append((direct[node.id], node.lineno))
    return sorted(set(hits), key=lambda hit: hit[1])


def _root(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


# ---------------------------------------------------------------------------- tampering

GRADER_REACH = {"autograder", "ctypes", "gc", "builtins", "importlib"}  # modules an MHA file has no use for


def scan_tampering(source):
    """[(what, line)] for code that reaches into the grader or rewrites torch: importing the
    grader (or ctypes, gc, builtins, importlib), touching sys.modules or __builtins__, assigning
    to an attribute of a torch module (`torch.allclose = ...`) or setattr on one. Such code gains
    nothing (judging runs in another process), but it is reported rather than ignored."""
    every_node = nodes(source)
    if every_node is None:
        return []
    torch_names = set()
    hits = []
    for node in every_node:
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root == "torch":
                    torch_names.add(alias.asname or "torch")
                if root in GRADER_REACH:
                    hits.append((f"import {alias.name}", node.lineno))
        elif isinstance(node, ast.ImportFrom):
            root = (node.module or "").split(".")[0]
            if root == "torch":
                torch_names.update(alias.asname or alias.name for alias in node.names)
            if root in GRADER_REACH:
                hits.append((f"from {node.module} import ...", node.lineno))
    for node in every_node:
        if isinstance(node, ast.Attribute) and node.attr == "modules" and _root(node) == "sys":
            hits.append(("sys.modules", node.lineno))
        elif isinstance(node, ast.Name) and node.id in ("__builtins__", "__import__"):
            hits.append((node.id, node.lineno))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and _root(target) in torch_names:
                    hits.append((f"assignment to {ast.unparse(target)}", node.lineno))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and node.args and _root(node.args[0]) in torch_names:
            hits.append(("setattr on a torch module", node.lineno))
    return sorted(set(hits), key=lambda hit: hit[1])
