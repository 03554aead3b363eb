"""Where a student's module keeps its projections, found by what the layers do (a traced run), not
by their names; and loading the grader's weights into them.

    roles = find_projections(module, d_model)      # {"w_q": Slot("c_attn", 0), ...}
    load_projections(module, roles, states)
    roles = find_qkv(module, d_model)               # QKVProjection: {"w_q": Slot("query"), ...}

A linear map is seen however forward applies it (linear_calls): an nn.Linear (any subclass,
anywhere in the module: a list, an nn.Sequential, the student's own sub-modules) called, or
F.linear on one of the module's parameters or on a block of its rows (a slice, split, chunk or
view of the weight, as nanoGPT's cross-attention cuts c_attn). A block is mapped back to the
parameter it is cut from and its first row.

Over 400 lines: finding projections by what they do is one traced run read several ways
(calls, slices, fused blocks); the parts share the trace's types.
"""

import weakref
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from autograder.harness.contract import ContractError
from autograder.harness.layers import load_parameter_rows, load_rows

PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")  # the four roles, called by the contract's names
ROLE_OF_SOURCE = {"query": "w_q", "key": "w_k", "value": "w_v", "other": "w_o"}
FUSED_BLOCKS = {3: ("w_q", "w_k", "w_v"), 2: ("w_k", "w_v")}  # blocks of d_model rows, in order
QKV = ("w_q", "w_k", "w_v")  # QKVProjection's roles: the outputs (q, k, v), in order
DESCRIPTION_LIMIT = 240  # characters of the layers seen, in a message


@dataclass(frozen=True)
class Slot:
    """Where one projection lives in a student's module: rows block * d_model .. (block + 1) *
    d_model of the weight parameter `weight` of the sub-module at `path` (dotted, from the module;
    "" is the module itself). For an nn.Linear (weight "weight") its own bias goes with it; for
    other parameters, `bias` is the dotted name of the bias parameter forward adds (None: none)."""

    path: str
    block: int = 0
    weight: str = "weight"
    bias: str = None

    def layer(self, module):
        """The sub-module that holds the weight (an nn.Linear for a layer's slot)."""
        return module.get_submodule(self.path)

    def is_layer(self, module) -> bool:
        return self.weight == "weight" and isinstance(self.layer(module), torch.nn.Linear)

    def parameter(self, module):
        """The whole weight parameter (the slot is `rows(d_model)` of it)."""
        return getattr(self.layer(module), self.weight)

    def bias_parameter(self, module):
        if self.is_layer(module):
            return self.layer(module).bias
        return None if self.bias is None else module.get_parameter(self.bias)

    def rows(self, d_model) -> slice:
        return slice(self.block * d_model, (self.block + 1) * d_model)

    def places(self) -> set:
        """The slots it loads (itself): two roles that share one share weights."""
        return {self}

    def gradient_size(self, module, d_model):
        """The total |gradient| of the slot's weight rows, None where it has none."""
        grad = self.parameter(module).grad
        return None if grad is None else grad.reshape(-1, grad.shape[-1])[self.rows(d_model)].abs().sum().item()

    def describe(self) -> str:
        """'w_q', 'qkv.c_attn block 2' (the second d_model rows), 'in_proj_weight block 3'."""
        name = self.path if self.weight == "weight" else dotted(self.path, self.weight)
        return f"{name} block {self.block + 1}" if self.block else name

    def weight_name(self) -> str:
        """The weight parameter's dotted name, with the block where it is one: 'w_q.weight'."""
        name = dotted(self.path, self.weight)
        return f"{name} block {self.block + 1}" if self.block else name


def dotted(*names) -> str:
    return ".".join(name for name in names if name)


@dataclass(frozen=True)
class Heads:
    """One projection kept as one layer per head (a Head module each, as in Karpathy's GPT): the
    parts, nn.Linear slots of d_model / n output rows each, in the order their outputs are merged;
    together they are one (d_model -> d_model) map whose rows are the parts' rows in that order."""

    parts: tuple

    def places(self) -> set:
        return set(self.parts)

    def gradient_size(self, module, d_model):
        grads = [part.parameter(module).grad for part in self.parts]
        return None if any(g is None for g in grads) else sum(g.abs().sum().item() for g in grads)

    def describe(self) -> str:
        return f"{self.parts[0].describe()} .. {self.parts[-1].describe()} ({len(self.parts)} heads)"

    def weight_name(self) -> str:
        return f"{self.parts[0].weight_name()} .. {self.parts[-1].weight_name()}"


# ---------------------------------------------------------------------------- tracing


@dataclass
class Call:
    """One linear map that forward applied."""

    layer: str  # the nn.Linear's path, for a layer called; None for F.linear
    input: object  # what it was applied to
    output: object  # what it gave (its gradient kept)
    weight: object = None  # F.linear's weight and bias (mapped to parameters afterwards)
    bias: object = None


class _FunctionalLinear(TorchFunctionMode):
    """Records F.linear calls made outside an nn.Linear's own forward (the layers' hooks record
    those). A mode on top of the forbidden-call watch: the watch still sees every call."""

    def __init__(self, calls, depth):
        super().__init__()
        self.calls, self.depth = calls, depth

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        output = func(*args, **kwargs)
        if func is F.linear and not self.depth[0]:
            named = dict(zip(("input", "weight", "bias"), args, strict=False))
            named.update(kwargs)
            keep_grad(output)
            self.calls.append(Call(None, named.get("input"), output, named.get("weight"), named.get("bias")))
        return output


def keep_grad(output):
    if isinstance(output, torch.Tensor) and output.requires_grad and output.grad_fn is not None:
        output.retain_grad()


@contextmanager
def linear_calls(module):
    """Yields the list of Calls that forward makes inside the block: every nn.Linear of `module`
    called (any subclass, wherever it sits) and every F.linear applied outside those layers."""
    calls, depth = [], [0]

    def enter(layer, args):
        depth[0] += 1

    def leave(path):
        def hook(layer, args, output):
            depth[0] -= 1
            keep_grad(output)
            calls.append(Call(path, args[0] if args else None, output))

        return hook

    handles = []
    try:
        for path, layer in module.named_modules():
            if isinstance(layer, torch.nn.Linear):
                handles.append(layer.register_forward_pre_hook(enter))
                handles.append(layer.register_forward_hook(leave(path)))
        with _FunctionalLinear(calls, depth):
            yield calls
    finally:
        for handle in handles:
            handle.remove()


def parameter_rows(tensor, names):
    """(dotted name, first row) where `tensor` is one of the module's parameters (names: {id:
    name}) or a block of whole rows of one, its leading axes read as rows (a slice, split, chunk
    or view of an (R, d_in) weight, or w[i] of a (3, D, d_in) one); None otherwise (a
    transposed or computed tensor)."""
    if not isinstance(tensor, torch.Tensor) or not tensor.dim():
        return None
    if id(tensor) in names:
        return names[id(tensor)], 0
    base = tensor._base
    if base is None or id(base) not in names or tensor.dim() > 2 or not base.is_contiguous():
        return None
    width = base.shape[-1] if tensor.dim() == 2 else 1
    if tensor.dim() == 2 and (tensor.shape[1] != width or tensor.stride(1) != 1):
        return None
    if tensor.dim() == 1 and tensor.stride(0) != 1:
        return None
    if tensor.dim() == 2 and tensor.shape[0] > 1 and tensor.stride(0) != width:
        return None
    offset = tensor.storage_offset() - base.storage_offset()
    return (names[id(base)], offset // width) if offset % width == 0 else None


def places(module, calls, d_model):
    """[(call, label, [Slot of each d_model-row block it computes] or None)] for the recorded
    calls: None where the weight is not a block of whole rows of the module's parameters."""
    names = {id(p): name for name, p in module.named_parameters()}
    found = []
    for call in calls:
        output = call.output
        width = output.shape[-1] if isinstance(output, torch.Tensor) and output.dim() else 0
        if call.layer is not None:
            label = call.layer
            slots = [Slot(call.layer, block) for block in range(width // d_model)] if width % d_model == 0 else None
            found.append((call, label, slots))
            continue
        weight = parameter_rows(call.weight, names)
        if weight is None:
            found.append((call, "F.linear on a tensor that is not a parameter", None))
            continue
        name, first = weight
        rows = call.weight.shape[0]
        whole = module.get_parameter(name).shape[:-1].numel()
        label = f"F.linear on {name}" + (f" rows {first}:{first + rows}" if rows != whole else "")
        bias = parameter_rows(call.bias, names)
        path, _, attribute = name.rpartition(".")
        if first % d_model or rows % d_model or width != rows:
            found.append((call, label, None))
            continue
        owner = module.get_submodule(path)
        if attribute == "weight" and isinstance(owner, torch.nn.Linear):  # a layer's weight: its own bias
            slots = [Slot(path, first // d_model + i) for i in range(rows // d_model)]
        else:
            bias_name = None if bias is None else bias[0]
            slots = [Slot(path, first // d_model + i, attribute, bias_name) for i in range(rows // d_model)]
        found.append((call, label, slots))
    return found


def describe(module, seen) -> str:
    """'c_attn (never called), F.linear on c_attn.weight[0:12] (query), c_proj (other)': every
    nn.Linear of the module and every F.linear seen, with what each was applied to."""
    order = {path: {} for path, layer in module.named_modules() if isinstance(layer, torch.nn.Linear)}
    for label, source in seen:
        order.setdefault(label, {})[source] = True  # a dict keeps the order they were seen in
    text = ", ".join(f"{label} ({' and '.join(sources) or 'never called'})" for label, sources in order.items())
    return (text[: DESCRIPTION_LIMIT - 3] + "...") if len(text) > DESCRIPTION_LIMIT else text


# ---------------------------------------------------------------------------- the cache


_found = weakref.WeakKeyDictionary()  # a module's class -> {(what, d_model, key, signature): roles}


def cached(what, module, d_model, key, find):
    """find(module, d_model), kept per class, constructor arguments (`key`) and parameters: a
    check builds the same module many times over, and the trace (a forward and a backward under
    the forbidden-call watch) is the costliest part of building. Without `key`, not kept."""
    if key is None:
        return find(module, d_model)
    signature = (what, d_model, key, layer_signature(module))
    known = _found.get(type(module), {}).get(signature)
    if known is not None:
        return dict(known)
    roles = find(module, d_model)
    if not any(isinstance(slot, Heads) for slot in roles.values()):  # the heads' order is the instance's own
        _found.setdefault(type(module), {})[signature] = dict(roles)
    return roles


def layer_signature(module) -> tuple:
    """What a finder's answer rests on besides the class: every nn.Linear's place and type, every
    parameter's place, size (None: not materialised yet) and dtype."""
    layers = tuple((path, type(layer)) for path, layer in module.named_modules() if isinstance(layer, torch.nn.Linear))
    parameters = tuple(
        (name, None if isinstance(p, torch.nn.parameter.UninitializedParameter) else tuple(p.shape), p.dtype)
        for name, p in module.named_parameters()
    )
    return layers, parameters


# ---------------------------------------------------------------------------- MultiHeadAttention


def find_projections(module, d_model, key=None):
    """{role: Slot} for the q, k, v and output projections of a MultiHeadAttention-like module.

    Found by what the layers do, not by their names: the module runs once on cross-attention
    probes (query, key and value all different; where that run raises, on probes of one length:
    code that fails only across lengths is still graded, and its checks say where it raises); each linear map (linear_calls) is traced to the
    probe it was applied to, and the gradient of the output tells which calls (and which
    d_model-row blocks of a fused layer) the result depends on. A (d_model -> d_model) map
    applied to the query is the q projection, to the key k, to the value v, to anything else
    (the merged heads) the output projection; a fused (d_model -> 3 d_model) one is cut into q,
    k, v blocks in that order, a (d_model -> 2 d_model) one into k, v. An nn.LazyLinear is
    materialised by the same run. Where that does not give one place per role, the contract's
    names (w_q, w_k, w_v, w_o) decide; failing those, a ContractError says what was seen.

    A place may play two roles (k computed with the query projection, a mistake): then both
    roles map to it and loading the weights keeps the first, so the module is graded as it
    computes.

    `key` (hashable): the arguments the module was made with; given, the roles are kept (cached).
    Roles only say where weights are loaded; a module that matches the reference with them
    computes what it should."""
    return cached("projections", module, d_model, key, _find_projections)


def _find_projections(module, d_model):
    failure, found = None, None
    # Cross-attention first (every length different: the most each layer's input tells); where that
    # raises, self-attention lengths: code that fails only across lengths (attention over the heads
    # axis) still has its layers found, and the checks say where it raises.
    for lengths in (CROSS, SELF):
        try:
            found = trace_projections(module, d_model, lengths)
            break
        except Exception as error:  # noqa: BLE001 - student code; the names may still do
            failure = failure or error
    if found and found[0]:
        return found[0]
    named = {role: Slot(role) for role in PROJECTIONS if isinstance(getattr(module, role, None), torch.nn.Linear)}
    if len(named) == len(PROJECTIONS):
        return named
    if failure is not None:
        raise failure
    raise ContractError("projections_not_found", owner=type(module).__name__, found=found[1] if found else "none")


CROSS, SELF = (3, 4, 4), (4, 4, 4)  # the probes' lengths: query, key, value


def trace_projections(module, d_model, lengths=CROSS):
    """(roles, description): roles as find_projections returns them, or None when the run does
    not give one place per role; the description lists what each linear map was seen doing.
    `lengths`: of the probes' query, key and value (three different tensors however long)."""
    rng = torch.Generator().manual_seed(0)
    dtype = next((p.dtype for p in module.parameters()), torch.float64)
    query, key, value = (torch.randn(2, n, d_model, generator=rng, dtype=dtype) for n in lengths)
    sources = {"query": query, "key": key, "value": value}
    rows = {name: row_set(probe, d_model) for name, probe in sources.items()}
    try:
        with torch.enable_grad():
            with linear_calls(module) as calls:
                result = module(query, key, value)
            if isinstance(result, torch.Tensor) and result.requires_grad:
                (result * torch.randn(result.shape, generator=rng, dtype=result.dtype)).sum().backward()
    finally:
        module.zero_grad(set_to_none=True)  # the checks' own backward starts clean
    by_gradient, by_input = {}, {}  # role -> {Slot}
    seen = []
    found = [
        (call, label, slots, source_of(call.input, sources, d_model, rows))
        for call, label, slots in places(module, calls, d_model)
    ]
    for role, heads, fed in per_head(found, d_model):  # in the order called: ordered below
        by_input.setdefault(role, set()).add(heads)
        if fed:
            by_gradient.setdefault(role, set()).add(heads)
    for call, label, slots, source in found:
        seen.append((label, source))
        blocks = len(slots or ())
        for block, slot in enumerate(slots or ()):
            role = (
                FUSED_BLOCKS[blocks][block]
                if blocks in FUSED_BLOCKS
                else ROLE_OF_SOURCE[source]
                if blocks == 1
                else None
            )
            if role is None:
                continue
            by_input.setdefault(role, set()).add(slot)
            grad = call.output.grad
            if grad is not None and grad[..., block * d_model : (block + 1) * d_model].abs().sum() > 0:
                by_gradient.setdefault(role, set()).add(slot)
    description = describe(module, seen)
    for found in (by_gradient, by_input):
        if all(len(found.get(role, ())) == 1 for role in PROJECTIONS):
            roles = {role: next(iter(found[role])) for role in PROJECTIONS}
            return merged_order(module, roles, (query, key, value)), description
    return None, description or "no nn.Linear and no F.linear"


def per_head(found, d_model):
    """[(role, Heads in the order called, whether every part fed the result)] for the q, k and v
    projections kept as one nn.Linear per head: n layers of d_model / n outputs each applied to
    the same probe (merged_order puts the parts in the order the merged heads take them)."""
    groups = {}
    for call, _, slots, source in found:
        width = call.output.shape[-1] if isinstance(call.output, torch.Tensor) and call.output.dim() else 0
        if call.layer is None or slots is not None or source == "other" or not 0 < width < d_model:
            continue
        if d_model % width == 0:
            groups.setdefault((ROLE_OF_SOURCE[source], width), []).append(call)
    heads = []
    for (role, width), calls in groups.items():
        paths = [call.layer for call in calls]
        if len(calls) * width != d_model or len(set(paths)) != len(paths):
            continue
        fed = all(call.output.grad is not None and call.output.grad.abs().sum() > 0 for call in calls)
        heads.append((role, Heads(tuple(Slot(path) for path in paths)), fed))
    return heads


def merged_order(module, roles, probes):
    """`roles` with each Heads' parts in the order the merged heads take them, or None where that
    cannot be told. Asked of forward runs alone (the student's backward runs once, in the trace):
    the module runs on the probes again with one part's output moved, and the block of columns of
    the output projection's input that moves with it is that part's place."""
    heads = {role: slot for role, slot in roles.items() if isinstance(slot, Heads)}
    if not heads:
        return roles
    output = roles["w_o"]
    if not (isinstance(output, Slot) and output.is_layer(module) and not output.block):
        return None
    base = _merged_input(module, output, probes)
    if base is None:
        return None
    ordered = dict(roles)
    for role, slot in heads.items():
        count = len(slot.parts)
        places = []
        for part in slot.parts:
            handle = part.layer(module).register_forward_hook(_moved)
            try:
                moved = _merged_input(module, output, probes)
            finally:
                handle.remove()
            if moved is None or moved.shape != base.shape or base.shape[-1] % count:
                return None
            change = (moved - base).abs().reshape(-1, count, base.shape[-1] // count).sum(dim=(0, 2))
            blocks = [block for block in range(count) if change[block] > 0]
            if len(blocks) != 1:
                return None
            places.append(blocks[0])
        if sorted(places) != list(range(count)):
            return None
        ordered[role] = Heads(tuple(part for _, part in sorted(zip(places, slot.parts, strict=False))))
    return ordered


def _moved(layer, args, out):
    """A layer's output moved by an amount that differs at every position and feature (a key
    moved by the same vector everywhere changes no softmax)."""
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        return out
    return out + torch.linspace(0.5, 1.5, out.numel(), dtype=out.dtype, device=out.device).reshape(out.shape)


def _merged_input(module, output, probes):
    """What the output projection's layer is given when the module runs on the probes (the
    global generator seeded alike for every run: a dropout draws the same), or None."""
    seen = []
    handle = output.layer(module).register_forward_pre_hook(lambda layer, args: seen.append(args[0] if args else None))
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.default_generator.manual_seed(0)
            module(*probes)
    finally:
        handle.remove()
    return seen[0].detach().clone() if len(seen) == 1 and isinstance(seen[0], torch.Tensor) else None


def row_set(x, d_model):
    """The rows of a CPU tensor `x` (last axis d_model) as a set of bytes, or None where they
    cannot be read so (a tensor subclass, another device). Adding 0.0 turns -0.0 into 0.0, so
    equal bytes are equal values (a NaN equals nothing: the probes hold none)."""
    try:
        array = x.detach().reshape(-1, d_model).numpy() + 0.0
    except (RuntimeError, TypeError, ValueError):
        return None
    return {row.tobytes() for row in array}


def source_of(x, sources, d_model, rows=None):
    """Which probe a layer was applied to ('query', 'key', 'value'), or 'other': every row of
    its input is a row of that probe (so a call on a slice or a reshape still counts).
    `rows`: row_set() of each probe, to compare bytes in numpy rather than run a dozen tensor
    ops (each one costly under the forbidden-call watch) per layer call."""
    if not isinstance(x, torch.Tensor) or x.shape[-1] != d_model or not x.numel():
        return "other"
    seen = row_set(x, d_model) if rows is not None and x.dtype.is_floating_point else None
    flat = x.detach().reshape(-1, d_model)
    for name, probe in sources.items():
        if probe.dtype != flat.dtype:
            continue
        if seen is not None and rows.get(name) is not None:
            if seen <= rows[name]:
                return name
        elif (flat[:, None, :] == probe.reshape(1, -1, d_model)).all(-1).any(-1).all():
            return name
    return "other"


def load_projections(module, roles, states):
    """Copy states[role] into each role's Slot. A slot shared by two roles keeps the first."""
    done = set()
    owner = type(module).__name__
    for role in roles:
        slot = roles[role]
        if slot.places() & done:
            continue
        done |= slot.places()
        state = states[role]
        d_in = state["weight"].shape[1]
        if isinstance(slot, Heads):  # the state's rows dealt out to the heads' layers in order
            width = state["weight"].shape[0] // len(slot.parts)
            for i, part in enumerate(slot.parts):
                rows = slice(i * width, (i + 1) * width)
                share = {name: value[rows] for name, value in state.items() if name in ("weight", "bias")}
                load_rows(part.layer(module), share, dotted(owner, part.path), 0, d_in=d_in, whole=True)
            continue
        if slot.is_layer(module):
            load_rows(slot.layer(module), state, dotted(owner, slot.path), slot.block, d_in=d_in)
        else:
            weight_name = dotted(slot.path, slot.weight)
            bias_name = slot.bias or f"bias of {weight_name}"
            bias = slot.bias_parameter(module)
            load_parameter_rows(slot.parameter(module), bias, state, owner, weight_name, bias_name, slot.block, d_in)


# ---------------------------------------------------------------------------- QKVProjection


def find_qkv(module, d_model, key=None):
    """{"w_q", "w_k", "w_v": Slot} for a QKVProjection-like module (forward(x) -> (q, k, v)):
    the place whose output each of q, k and v depends on, told by the gradient of that output
    alone (one run on a probe), whatever the layers are called or however they are kept (a list,
    an nn.ModuleList, sub-modules, F.linear on blocks of one weight). Where that does not give
    one place per output, the names w_q, w_k, w_v decide; failing those, a ContractError says
    what was seen. A place that gives two outputs (k computed with w_q) plays both roles, as in
    find_projections. `key`: as there (the arguments the module was made with)."""
    return cached("qkv", module, d_model, key, _find_qkv)


def _find_qkv(module, d_model):
    failure, description = None, "none"
    try:
        roles, description = trace_qkv(module, d_model)
    except Exception as error:  # noqa: BLE001 - student code; the names may still do
        roles, failure = None, error
    if roles:
        return roles
    named = {role: Slot(role) for role in QKV if isinstance(getattr(module, role, None), torch.nn.Linear)}
    if len(named) == len(QKV):
        return named
    if failure is not None:
        raise failure
    raise ContractError("qkv_layers_not_found", owner=type(module).__name__, found=description)


def trace_qkv(module, d_model):
    """(roles, description) of find_qkv: roles None where the run does not give one place per
    output; the description lists each linear map and the outputs it gives."""
    rng = torch.Generator().manual_seed(0)
    dtype = next((p.dtype for p in module.parameters()), torch.float64)
    x = torch.randn(2, 3, d_model, generator=rng, dtype=dtype)
    roles = {role: set() for role in QKV}
    try:
        with torch.enable_grad():
            with linear_calls(module) as calls:
                result = module(x)
            found = places(module, calls, d_model)
            if not (isinstance(result, (tuple, list)) and len(result) == 3):
                return None, "forward did not return (q, k, v)"
            traced = [(call.output, slots) for call, _, slots in found if slots and call.output.grad_fn is not None]
            for role, out in zip(QKV, result, strict=False):
                if not (traced and isinstance(out, torch.Tensor) and out.grad_fn is not None):
                    continue
                weights = torch.randn(out.shape, generator=rng, dtype=out.dtype)
                grads = torch.autograd.grad(
                    (out * weights).sum(), [output for output, _ in traced], allow_unused=True, retain_graph=True
                )
                for (_, slots), grad in zip(traced, grads, strict=True):
                    for block, slot in enumerate(slots):
                        if grad is not None and grad[..., block * d_model : (block + 1) * d_model].abs().sum() > 0:
                            roles[role].add(slot)
    finally:
        module.zero_grad(set_to_none=True)
    seen = []
    for _, label, slots in found:
        given = [role[-1] for role in QKV if set(slots or ()) & roles[role]]
        seen += [(label, output) for output in given] or [(label, "no output")]
    description = describe(module, seen)
    if all(len(roles[role]) == 1 for role in QKV):
        return {role: next(iter(roles[role])) for role in QKV}, description
    return None, description
