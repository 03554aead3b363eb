"""The run-time watch for forbidden calls (grading.yml: a step's `forbidden` list): it sees a call
however it is reached (an alias, getattr with a built name, `torch.ops.aten.*`, `torch._C._nn.*`,
inside `torch._C.DisableTorchFunction()` or `inference_mode`) and on whichever thread it runs.

    with watching(("torch.nn.functional.scaled_dot_product_attention",)) as seen:
        student_code()
    seen  # ["torch.nn.functional.scaled_dot_product_attention"] if it was called

Four parts, installed once per process (`install`, before any student code loads):

* Process-wide kernels at the ATen dispatcher, for the operators each forbidden name runs as
  (`Signs.ops`: F.scaled_dot_product_attention -> aten::scaled_dot_product_attention, its math
  decomposition and the fused kernels it picks on CPU and CUDA; pad_sequence -> aten::pad_sequence;
  nn.MultiheadAttention's fast path -> aten::_native_multi_head_attention). A composite operator
  (one ATen decomposes above autograd) gets a kernel of ours that notes the call and runs ATen's
  own decomposition, so values and gradients are unchanged. In a grading worker (`install(
  every_thread=True)`) any other gets a kernel on its autograd keys that notes the call and hands
  it on below autograd: its gradient is lost, which costs nothing there (the check fails for the
  call anyway) but would change a student's own process, where it is not installed. The
  dispatcher is one per process, so these see calls from every thread; a Watch is active
  process-wide while its block runs.
* A TorchDispatchMode on the grading thread sees every operator that reaches a backend kernel
  (in inference_mode too, where autograd keys are skipped), and at each softmax or matrix product
  it looks at the Python stack for the frames of forbidden Python functions (`Signs.frames`:
  F.multi_head_attention_forward, nn.MultiheadAttention.forward), which have no operator of
  their own.
* A TorchFunctionMode (the cheapest) sees the overridable Python-level torch functions.
* A module registration hook sees a forbidden nn.Module made part of the student's module.

The two modes cost a Python call per torch function and per operator (a third of a worker's CPU).
A grading worker watches grading.yml's names (those of KNOWN_SIGNS) without them (`lean`): each
runs as an operator with a kernel of ours, or shows its frame at a softmax or a matrix product,
which get process-wide kernels there too (the matrix products and `_softmax` at ADInplaceOrView,
below autograd: gradients kept; hit by every tensor but those made in inference mode, where the
composite softmax above and the forbidden operators' composite kernels still see). There the
fast path of nn.MultiheadAttention (one fused operator, reached in inference mode by no key of
ours) is switched off: the module computes through F.multi_head_attention_forward, same values.

Where the watch cannot see: a call on another thread in inference_mode (no autograd key is hit
and modes are per thread). Sandboxed CPU workers refuse new threads once student code loads
(sandbox/confine.py), and the source policy refuses threading modules, so student code has no
other thread. Code that takes its process over (by means the source policy does not see) can
still switch all of this off: that changes only its own grade (docs/threat-model.md).

One module, though long: the kernels, the modes and the Watch they report to are one mechanism,
and which parts watch (`lean`) is decided from what the others cover; kept together, a route
that one part would miss is seen to be covered by another in one place.
"""

import functools
import importlib
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch._C._dynamo.eval_frame import set_eval_frame as _set_eval_frame
from torch.nn.modules.module import register_module_module_registration_hook
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode


def short_name(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


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


@functools.cache
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
        self.stacks = None  # while attributed(): {(dotted name, the codes on its call's stack, innermost first)}
        self.functions, self.ops, self.codes, self.classes = _watched(tuple(forbidden))

    def note(self, dotted):
        if dotted not in self.seen:
            self.seen.append(dotted)
        stacks = self.stacks
        if stacks is not None:
            stacks.add((dotted, _stack_codes()))

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


def _stack_codes() -> tuple:
    """The code objects of the frames on the current thread's stack, innermost first."""
    codes, frame = [], sys._getframe(1)
    while frame is not None:
        codes.append(frame.f_code)
        frame = frame.f_back
    return tuple(codes)


_active = []  # Watches in force, innermost last: process-wide (read by the kernels below, on any thread)


@contextmanager
def apart(keep: bool = False):
    """Within the block, the innermost watch in force records into a list of its own, yielded
    (every call, also those seen before the block); after it, they are added to the watch's
    record only if `keep`. Where no watch is in force, the list stays empty."""
    if not _active:
        yield []
        return
    watch = _active[-1]
    record, watch.seen = watch.seen, []
    stacks, watch.stacks = watch.stacks, None  # the calls apart are nobody's to attribute
    try:
        yield watch.seen
    finally:
        calls, watch.seen = watch.seen, record
        watch.stacks = stacks
        if keep:
            for dotted in calls:
                if dotted not in watch.seen:
                    watch.seen.append(dotted)


@contextmanager
def attributed():
    """Within the block, every call the innermost watch in force notes is also kept with the
    code objects on its stack: yields that set of (dotted name, codes innermost first), which
    tells whose code made each call (harness/earlier.py). Where no watch is in force, it stays
    empty."""
    if not _active:
        yield set()
        return
    watch = _active[-1]
    previous, watch.stacks = watch.stacks, set()
    try:
        yield watch.stacks
    finally:
        watch.stacks = previous


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


# Autograd keys (a call from Python lands there first) and, for calls that skip autograd
# (inference_mode, below-autograd guards), every backend through CompositeExplicitAutograd.
_COMPOSITE_KEYS = (
    "AutogradCPU",
    "AutogradCUDA",
    "AutogradMeta",
    "AutogradPrivateUse1",
    "AutogradOther",
    "CompositeExplicitAutograd",
)
_AUTOGRAD_KEYS = ("AutogradCPU", "AutogradCUDA", "AutogradMeta", "AutogradPrivateUse1", "AutogradOther")
_installed = {"library": None, "ops": set(), "every_thread": False}
_install_lock = threading.Lock()


def _composite(op):
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")


def _note(name):
    for watch in tuple(_active):
        dotted = watch.ops.get(name)
        if dotted is not None:
            watch.note(dotted)


def _guard(qualified: str, anchor: bool = False) -> None:
    """Give the ATen operator `qualified` ('name' or 'name.overload') a process-wide kernel of
    ours that tells the active watches (or, for an anchor, looks at the stack) and then does what
    the operator would have done."""
    if qualified in _installed["ops"]:
        return
    _installed["ops"].add(qualified)
    name, _, overload = qualified.partition(".")
    try:
        op = getattr(getattr(torch.ops.aten, name), overload or "default")
    except (AttributeError, RuntimeError):
        return
    library = _installed["library"]
    if _composite(op):

        def kernel(*args, **kwargs):
            if anchor:
                for watch in tuple(_active):
                    if watch.codes:
                        watch.look_at_stack()
            else:
                _note(name)
            return op.decompose(*args, **kwargs)

        for key in _COMPOSITE_KEYS:
            try:
                library.impl(qualified, kernel, key)
            except RuntimeError:
                pass  # a key this build does not have
        return
    if not _installed["every_thread"]:
        return  # a real kernel: the dispatch watch sees it on the grading thread
    if anchor:
        # Below autograd, so the gradient is kept: ADInplaceOrView is in every tensor's keys but
        # those made in inference mode, where the composite anchors above still look.
        below_view = torch._C._after_ADInplaceOrView_keyset

        def anchor_kernel(keyset, *args, **kwargs):
            for watch in tuple(_active):
                if watch.codes:
                    watch.look_at_stack()
            return op.redispatch(keyset & below_view, *args, **kwargs)

        library.impl(qualified, anchor_kernel, "ADInplaceOrView", with_keyset=True)
        return

    below_autograd = torch._C._after_autograd_keyset

    def autograd_kernel(keyset, *args, **kwargs):
        _note(name)
        return op.redispatch(keyset & below_autograd, *args, **kwargs)

    for key in _AUTOGRAD_KEYS:
        try:
            library.impl(qualified, autograd_kernel, key, with_keyset=True)
        except RuntimeError:
            pass


def install(forbidden: tuple = (), every_thread: bool = False) -> None:
    """Register the process-wide kernels for every known forbidden name (and for `forbidden`'s
    own operators): once per process, before student code loads (the worker server's warm-up,
    with `every_thread`; a student's own run on its first watch, without)."""
    with _install_lock:
        if _installed["library"] is None:
            _installed["every_thread"] = every_thread
            _installed["library"] = torch.library.Library("aten", "IMPL")  # our kernels live as long as it does
            for signs in KNOWN_SIGNS.values():
                for op in signs.ops:
                    _guard(op)
            for op in _ANCHOR_COMPOSITES:
                _guard(op, anchor=True)
            if every_thread:
                for op in sorted(_ANCHOR_OPS):
                    _guard(op, anchor=True)
                # Its fast path calls one fused operator, in inference mode too (where no key of
                # ours is hit): the module then computes through F.multi_head_attention_forward,
                # whose frame the anchors see. Values are the same either way.
                torch.backends.mha.set_fastpath_enabled(False)
        for op in _watched(tuple(forbidden))[1]:
            _guard(op)


def lean(forbidden) -> bool:
    """Whether the process-wide kernels alone see every call of `forbidden`: in a grading worker
    (installed `every_thread`), for names whose signs are known (KNOWN_SIGNS). Each of those runs
    as an ATen operator with a kernel of ours, or shows its Python frame at a softmax or a
    matrix product (anchors, kernels of ours there too); so no mode is needed, and every other
    operator runs at full speed (the two modes cost a Python call per torch function and per
    operator: a third of a worker's CPU). Elsewhere (a student's own run, where the kernels
    would change gradients, or a name of no known sign), the modes watch as well."""
    return _installed["every_thread"] and all(name in KNOWN_SIGNS for name in forbidden)


@contextmanager
def watching(forbidden):
    """Run the block recording forbidden calls; yields the list of dotted names seen (filled in place)."""
    if not forbidden:
        yield []
        return
    install(tuple(forbidden))
    watch = Watch(forbidden)
    _active.append(watch)
    hook = register_module_module_registration_hook(watch.module_registered) if watch.classes else None
    try:
        if lean(forbidden):
            yield watch.seen
        else:
            with _FunctionWatch(watch), _DispatchWatch(watch):
                yield watch.seen
    finally:
        _active.remove(watch)
        if hook is not None:
            hook.remove()
