"""The Check base class and the helpers that judge observations.

A check has two halves that never need to share a process:

    observe(student, **inputs) -> dict   runs STUDENT code (their package); returns plain observations
                                         (tensors, tuples, numbers, strings)
    judge(inputs, got, expected, tol)    never runs student code; returns None (pass) or a Fail

`inputs(rng)` makes the inputs from a seeded generator, so both halves can rebuild them, and
`expected` comes from the check's own oracle (public checks: PyTorch built-ins or a definition
written out) or, for hidden checks, from running `observe` on the reference solution.
"""

import math
import weakref
from dataclasses import dataclass, field

import torch

from autograder.engine import messages


@dataclass
class Fail:
    """A judged failure: a message id from `messages.CATALOG` and its parameters."""

    message_id: str
    params: dict = field(default_factory=dict)


class Check:
    """Base class of every check. Subclasses set `id` and override the halves they need."""

    id = None  # unique within its step; classes without an id are helpers, not checks
    step = None  # set by the registry from the module name
    weight = 1.0
    visibility = "public"  # "public": students see and run it; "hidden": instructor only
    requires = None  # e.g. "cuda": the runner reports "not checked" when it is missing
    diagnosis = None  # set on probes: unscored checks whose failure is reported as this diagnosis id

    def inputs(self, rng):
        """Inputs for `observe`, made from `rng` (a torch.Generator)."""
        return {}

    def observe(self, student, **inputs):
        """Run student code from the student's package (lazy: `student.heads` imports heads.py)."""
        raise NotImplementedError

    def expected(self, **inputs):
        """The observations a correct solution gives, or None for a check that judges
        properties of `got` alone. Hidden checks usually leave it out: their expectation is
        then the reference solution's observation on the same inputs."""
        return None

    def judge(self, inputs, got, expected, tol):
        """None if `got` is right, else a Fail. Default: `got` must match `expected`."""
        return compare(got, expected, tol)

    def picture(self, inputs, got, expected):
        """What to draw when this check fails (--plots): {"got": 2-D tensor, "expected": 2-D
        tensor, "title": ...}, or None (the default: no picture helps)."""
        return None

    def __repr__(self):
        return f"{self.step}::{self.id}"


# ---------------------------------------------------------------------------- inputs


def raised_verdict(got: dict, expected: str, case: str):
    """The verdict on a check that expects code to raise `expected` (e.g. "ValueError") in
    `case`: `got` is {"raised": the exception's type name or None, "message": its text}. None
    when it raised that, else the Fail that says what happened instead."""
    if got["raised"] is None:
        return Fail("no_raise", {"expected": expected, "case": case})
    if got["raised"] != expected:
        return Fail(
            "wrong_exception",
            {"expected": expected, "case": case, "type": got["raised"], "message": got.get("message", "")},
        )
    return None


def randn(rng, *shape, dtype=torch.float64):
    """Standard-normal tensor from the seeded generator `rng`."""
    return torch.randn(*shape, generator=rng, dtype=dtype)


def randint(rng, low, high, *shape):
    return torch.randint(low, high, shape, generator=rng)


def randsize(rng, low, high):
    """A random size in [low, high) for a hidden check, at least 2.

    A size of 1 makes mistakes invisible (one head: d_k == d_model; a length-1 axis: a missing
    transpose is a no-op), so a random draw would pass a wrong answer on some seeds and not on
    others. Edge cases of size 1 belong in a fixed check, never in a random draw."""
    if low < 2:
        raise ValueError(f"randsize(low={low}): random sizes start at 2; test size 1 in a fixed check")
    return int(torch.randint(low, high, (), generator=rng))


def randindex(rng, low, high):
    """A random int in [low, high), for ids and positions (not sizes)."""
    return int(torch.randint(low, high, (), generator=rng))


def linear_state(rng, d_in, d_out, bias=True, dtype=torch.float64):
    """Random weights for an nn.Linear(d_in, d_out), with non-zero biases."""
    state = {"weight": randn(rng, d_out, d_in, dtype=dtype) / math.sqrt(d_in)}
    if bias:
        state["bias"] = randn(rng, d_out, dtype=dtype)
    return state


def load_linear(module, name, state):
    """Copy `state` into the nn.Linear `module.<name>` (or the module's only nn.Linear, whatever
    its name), checking it is one of the right size.

    Raises ContractError with a readable message when the attribute is missing or wrong, so a
    mis-named layer reads as such and not as a tensor-size traceback. An nn.LazyLinear is
    materialised first (one call on zeros: that is all a dry run would do to it)."""
    owner = type(module).__name__
    layer = getattr(module, name, None)
    linears = [(path, sub) for path, sub in module.named_modules() if isinstance(sub, torch.nn.Linear)]
    if layer is None and len(linears) == 1:  # the only layer there is: its name does not matter
        name, layer = linears[0]
    if layer is None:
        raise ContractError("missing_attribute", owner=owner, name=name, expected="an nn.Linear")
    if not isinstance(layer, torch.nn.Linear):
        raise ContractError("bad_attribute", owner=owner, name=name, expected="an nn.Linear", got=type(layer).__name__)
    load_rows(layer, state, f"{owner}.{name}", 0, d_in=state["weight"].shape[1], whole=True)


def materialise(layer, d_in):
    """An nn.LazyLinear that has not seen an input yet gets its size from one of d_in features."""
    if isinstance(layer.weight, torch.nn.parameter.UninitializedParameter):
        with torch.no_grad():
            layer(torch.zeros(1, d_in, dtype=layer.weight.dtype, device=layer.weight.device))


def load_rows(layer, state, path, block, d_in, whole=False):
    """Copy `state` (weight (d_out, d_in), maybe bias) into block `block` of d_out output rows of
    `layer` (the whole layer if `whole`); ContractError when the sizes or the bias do not fit."""
    materialise(layer, d_in)
    owner, _, name = path.rpartition(".")
    owner = owner or path
    d_out = state["weight"].shape[0]
    rows = slice(block * d_out, (block + 1) * d_out)
    want = tuple(state["weight"].shape) if whole else (f"a multiple of {d_out}", d_in)
    shape = tuple(layer.weight.shape)
    if shape[1] != d_in or (shape[0] != d_out if whole else shape[0] < rows.stop):
        raise ContractError(
            "bad_attribute", owner=owner, name=f"{name}.weight", expected=f"shape {want}", got=f"shape {shape}"
        )
    if ("bias" in state) != (layer.bias is not None):
        expected = "a bias" if "bias" in state else "no bias (bias=False)"
        got = "a bias" if layer.bias is not None else "no bias"
        raise ContractError("bad_attribute", owner=owner, name=f"{name}.bias", expected=expected, got=got)
    with torch.no_grad():
        layer.weight[rows].copy_(state["weight"])
        if layer.bias is not None:
            layer.bias[rows].copy_(state["bias"])


# ---------------------------------------------------------------------------- projections by role

PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")  # the four roles, called by the contract's names
ROLE_OF_SOURCE = {"query": "w_q", "key": "w_k", "value": "w_v", "other": "w_o"}
FUSED_BLOCKS = {3: ("w_q", "w_k", "w_v"), 2: ("w_k", "w_v")}  # blocks of d_model rows, in order


@dataclass(frozen=True)
class Slot:
    """Where one projection lives in a student's module: block `block` (of d_model output rows)
    of the nn.Linear at `path` (dotted, from the module)."""

    path: str
    block: int = 0

    def layer(self, module):
        return module.get_submodule(self.path)

    def weight(self, module, d_model):
        rows = slice(self.block * d_model, (self.block + 1) * d_model)
        return self.layer(module).weight[rows]


_found = weakref.WeakKeyDictionary()  # a module's class -> {(d_model, key, layers): roles}


def find_projections(module, d_model, key=None):
    """{role: Slot} for the q, k, v and output projections of a MultiHeadAttention-like module.

    Found by what the layers do, not by their names: the module runs once on cross-attention
    probes (query, key and value all different); each nn.Linear call is traced to the probe it
    was applied to, and the gradient of the output tells which calls (and which d_model-row
    blocks of a fused layer) the result depends on. A (d_model -> d_model) layer applied to the
    query is the q projection, to the key k, to the value v, to anything else (the merged heads)
    the output projection; a fused (d_model -> 3 d_model) layer is cut into q, k, v blocks in
    that order, a (d_model -> 2 d_model) one into k, v. Layers may sit in the student's own
    sub-modules; an nn.LazyLinear is materialised by the same run. Where that does not give one
    place per role, the contract's names (w_q, w_k, w_v, w_o) decide; failing those, a
    ContractError says what the contract accepts.

    A layer may play two roles (k computed with the query projection, a mistake): then both roles
    map to it and loading the weights keeps the first, so the module is graded as it computes.

    `key` (hashable): the arguments the module was made with. Given, the roles found are kept
    for modules of the same class made with the same arguments and holding the same layers (a
    check builds the same module many times over): the trace, a forward and a backward under
    the forbidden-call watch, is the costliest part of building. Roles only say where weights
    are loaded; a module that matches the reference with them computes what it should."""
    if key is not None:
        signature = (d_model, key, layer_signature(module))
        known = _found.get(type(module), {}).get(signature)
        if known is not None:
            return dict(known)
        roles = find_projections(module, d_model)
        _found.setdefault(type(module), {})[signature] = dict(roles)
        return roles
    failure = None
    try:
        found = trace_projections(module, d_model)
    except Exception as error:  # noqa: BLE001 - student code; the names may still do
        found, failure = None, error
    if found and found[0]:
        return found[0]
    named = {role: Slot(role) for role in PROJECTIONS if isinstance(getattr(module, role, None), torch.nn.Linear)}
    if len(named) == len(PROJECTIONS):
        return named
    if failure is not None:
        raise failure
    raise ContractError("projections_not_found", owner=type(module).__name__, found=found[1] if found else "none")


def layer_signature(module) -> tuple:
    """What find_projections' answer rests on besides the class: every nn.Linear's place, type,
    size and bias, and the module's dtype."""
    layers = []
    for path, layer in module.named_modules():
        if isinstance(layer, torch.nn.Linear):
            weight = layer.weight
            lazy = isinstance(weight, torch.nn.parameter.UninitializedParameter)
            layers.append((path, type(layer), None if lazy else tuple(weight.shape), layer.bias is None, weight.dtype))
    return tuple(layers)


def trace_projections(module, d_model):
    """(roles, description): roles as find_projections returns them, or None when the run does
    not give one place per role; the description lists what each layer was seen doing."""
    layers = [(path, layer) for path, layer in module.named_modules() if isinstance(layer, torch.nn.Linear)]
    rng = torch.Generator().manual_seed(0)
    dtype = next((p.dtype for p in module.parameters()), torch.float64)
    query, key, value = (torch.randn(2, n, d_model, generator=rng, dtype=dtype) for n in (3, 4, 4))
    sources = {"query": query, "key": key, "value": value}
    rows = {name: row_set(probe, d_model) for name, probe in sources.items()}
    calls = []  # (path, source, output)

    def record(path):
        def hook(layer, args, output):
            if isinstance(output, torch.Tensor) and output.requires_grad:
                output.retain_grad()
            calls.append((path, source_of(args[0] if args else None, sources, d_model, rows), output))

        return hook

    handles = [layer.register_forward_hook(record(path)) for path, layer in layers]
    try:
        with torch.enable_grad():
            result = module(query, key, value)
            if isinstance(result, torch.Tensor) and result.requires_grad:
                (result * torch.randn(result.shape, generator=rng, dtype=result.dtype)).sum().backward()
    finally:
        for handle in handles:
            handle.remove()
        module.zero_grad(set_to_none=True)  # the checks' own backward starts clean
    by_gradient, by_input = {}, {}  # role -> {Slot}
    seen = {path: set() for path, _ in layers}
    for path, source, output in calls:
        seen[path].add(source)
        if not isinstance(output, torch.Tensor) or output.shape[-1] % d_model:
            continue
        blocks = output.shape[-1] // d_model
        for block in range(blocks):
            role = (
                FUSED_BLOCKS[blocks][block]
                if blocks in FUSED_BLOCKS
                else ROLE_OF_SOURCE[source]
                if blocks == 1
                else None
            )
            if role is None:
                continue
            by_input.setdefault(role, set()).add(Slot(path, block))
            grad = output.grad
            if grad is not None and grad[..., block * d_model : (block + 1) * d_model].abs().sum() > 0:
                by_gradient.setdefault(role, set()).add(Slot(path, block))
    description = ", ".join(f"{path} ({' '.join(sorted(seen[path])) or 'never called'})" for path, _ in layers)
    for found in (by_gradient, by_input):
        if all(len(found.get(role, ())) == 1 for role in PROJECTIONS):
            return {role: next(iter(found[role])) for role in PROJECTIONS}, description
    return None, description or "no nn.Linear"


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
    for role in PROJECTIONS:
        slot = roles[role]
        if slot in done:
            continue
        done.add(slot)
        path = f"{type(module).__name__}.{slot.path}"
        load_rows(slot.layer(module), states[role], path, slot.block, d_in=states[role]["weight"].shape[1])


class ContractError(Exception):
    """Student code does not have the shape the contract asks for (a name, a layer, a size).
    Raised from `observe`; the runner turns it into the Fail it carries."""

    def __init__(self, message_id, **params):
        super().__init__(message_id)
        self.fail = Fail(message_id, params)


# ---------------------------------------------------------------------------- judging


def judged(check, inputs, values, expected, tol):
    """check.judge(), which must not take the grader down on values it cannot read: they come
    from student code, or from a worker that student code has taken over."""
    try:
        return check.judge(inputs, values, expected, tol)
    except Exception as error:  # noqa: BLE001 - malformed observations
        detail = f"{type(error).__name__}: {error}".splitlines()[0][:160]
        return Fail("unreadable_observation", {"step": check.step, "detail": detail})


def describe(value):
    """Short human description of an observed value, for messages."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"{type(value).__name__} {value!r}"[:80]


def compare(got, expected, tol, name="output"):
    """None if `got` matches `expected` (recursing into dicts, tuples and lists), else a Fail."""
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return Fail("wrong_type", {"name": name, "expected": "a dict", "got": describe(got)})
        for key in expected:
            fail = compare(got.get(key), expected[key], tol, name=key)
            if fail:
                return fail
        return None
    if isinstance(expected, torch.Tensor):
        return compare_tensor(got, expected, tol, name)
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)):
            return Fail("wrong_type", {"name": name, "expected": describe(expected), "got": describe(got)})
        if len(got) != len(expected):
            return Fail("wrong_length", {"name": name, "expected": len(expected), "got": len(got)})
        for i, (g, e) in enumerate(zip(got, expected)):
            fail = compare(g, e, tol, name=f"{name}[{i}]")
            if fail:
                return fail
        return None
    if got != expected:
        return Fail("not_equal", {"name": name, "expected": expected, "got": got})
    return None


# A float64 result also passes when it is as close as float32 arithmetic gets (README, "Tolerance"):
# softmax(..., dtype=torch.float32), a float32 scale tensor or float32 intermediates are correct
# code. Float32 rounding of a computation grows with the largest values in it, so the bound is
# relative to |expected| + max|expected|. benchmarks/tolerance.py measured correct float32-style
# code at most 1.4 of these units and the smallest real mistakes (a scale of d_k ** 0.49, sqrt(d_k
# +- 1), a causal mask off by one) at 1e4 and more: 32 keeps a wide margin on both sides.
LOWER_PRECISION = {torch.float64: torch.float32}
ROUNDING_UNITS = 32


def allowed_error(expected, tol, care=None):
    """Per position, the largest |got - expected| that passes.

    `tol[dtype] = (rtol, atol)` gives the rounding allowed for the result's own dtype: atol +
    rtol * |expected|. For float64 results the rounding of float32 arithmetic is allowed too:
    ROUNDING_UNITS * eps(float32) * (|expected| + max |expected|), the max over the compared
    (`care`) positions. An infinite expectation bounds nothing (its difference is never finite).
    A value beyond float32's range (float64's most negative number as a mask fill, say) cannot
    come from float32 arithmetic: it gets no float32 allowance and sets no magnitude."""
    rtol, atol = tol[expected.dtype]
    size = expected.abs().nan_to_num(0.0, posinf=0.0)
    allowed = atol + rtol * size
    lower = LOWER_PRECISION.get(expected.dtype)
    if lower is None or not size.numel():
        return allowed
    in_range = size <= torch.finfo(lower).max
    care = in_range if care is None else care * in_range
    rounding = rounding_unit(lower) * (size + magnitude(size, care))
    return torch.maximum(allowed, torch.where(in_range, rounding, torch.zeros_like(rounding)))


def rounding_unit(dtype):
    return ROUNDING_UNITS * torch.finfo(dtype).eps


def magnitude(size, care=None):
    return (size if care is None else size * care).max().item() if size.numel() else 0.0


def tolerance_words(expected, tol, care=None):
    """allowed_error() in words, for a message."""
    rtol, atol = tol[expected.dtype]
    lower = LOWER_PRECISION.get(expected.dtype)
    if lower is None:
        return messages.render("tolerance", atol=atol, rtol=rtol)
    size = expected.abs().nan_to_num(0.0, posinf=0.0)
    in_range = size <= torch.finfo(lower).max  # as in allowed_error
    care = in_range if care is None else care * in_range
    return messages.render(
        "tolerance_lower",
        atol=atol,
        rtol=rtol,
        unit=rounding_unit(lower),
        scale=magnitude(size, care),
        lower=str(lower).removeprefix("torch."),
    )


def compare_tensor(got, expected, tol, name="output", where=None):
    """None if tensor `got` matches `expected` in shape, dtype, device and values.

    Floating values are compared with the tolerance of allowed_error(); other dtypes exactly.
    `where` (bool, broadcastable) limits the value comparison to the positions where it is True,
    for entries whose values the contract leaves unspecified."""
    fail = check_form(got, tuple(expected.shape), expected.dtype, expected.device, name)
    if fail:
        return fail
    got, expected = got.detach(), expected.detach()
    if passes_everywhere(got, expected, tol):  # the common case, in a few ops; else find out why
        return None
    care = torch.ones_like(expected, dtype=torch.bool) if where is None else where.expand_as(expected)
    if not expected.is_floating_point():
        differ = (got != expected) & care
        if differ.any():
            index = first_index(differ)
            return Fail(
                "exact_values",
                {"name": name, "index": index, "expected": expected[index].item(), "got": got[index].item()},
            )
        return None
    bad = ~torch.isfinite(got) & torch.isfinite(expected) & care
    if bad.any():
        index = first_index(bad)
        return Fail(
            "not_finite", {"name": name, "index": index, "got": got[index].item(), "expected": expected[index].item()}
        )
    diff = (got - expected).abs().nan_to_num(0.0) * care
    too_far = diff > allowed_error(expected, tol, care)
    if too_far.any():
        return values_fail(name, got, expected, diff, too_far, tolerance_words(expected, tol, care))
    return None


def values_fail(name, got, expected, diff, too_far, words):
    """The Fail of a value mismatch: where it starts, how large it gets, and what was allowed."""
    index = first_index(too_far)
    relative = diff / expected.abs().nan_to_num(0.0, posinf=0.0)  # inf where expected is 0
    relative = torch.where(too_far, relative.nan_to_num(0.0), torch.zeros_like(relative))
    largest = unravel(int(torch.argmax(torch.where(too_far, diff, -1.0))), expected.shape)
    return Fail(
        "values",
        {
            "name": name,
            "index": index,
            "expected": expected[index].item(),
            "got": got[index].item(),
            "count": int(too_far.sum()),
            "total": too_far.numel(),
            "max_abs": diff[largest].item(),
            "max_abs_index": largest,
            "max_rel": relative.max().item(),
            "tolerance": words,
            "got_dtype": str(got.dtype).removeprefix("torch."),
            "expected_dtype": str(expected.dtype).removeprefix("torch."),
        },
    )


def passes_everywhere(got, expected, tol):
    """True if `got` (of `expected`'s form) is within tolerance at every position, every
    difference finite: then compare_tensor passes whatever its `where`. False: let the full
    comparison decide (it also accepts, e.g., matching infinities)."""
    if not expected.is_floating_point():
        return torch.equal(got, expected)
    rtol, atol = tol[expected.dtype]
    # A NaN or infinite difference compares False.
    difference = (got - expected).abs()
    if bool((difference <= atol + rtol * expected.abs().nan_to_num(0.0)).all()):
        return True
    return bool((difference <= allowed_error(expected, tol)).all())


def check_form(got, shape, dtype, device, name="output"):
    """None if `got` is a tensor of this shape, dtype and device, else the Fail that says which."""
    if not isinstance(got, torch.Tensor):
        return Fail("not_tensor", {"name": name, "got": describe(got)})
    if tuple(got.shape) != tuple(shape):
        return Fail("shape", {"name": name, "expected": tuple(shape), "got": tuple(got.shape)})
    if got.dtype != dtype:
        return Fail("dtype", {"name": name, "expected": dtype, "got": got.dtype})
    if got.device != torch.device(device):
        return Fail("device", {"name": name, "expected": torch.device(device), "got": got.device})
    return None


def first_index(flags):
    """Index tuple of the first True in `flags`."""
    return unravel(int(flags.flatten().nonzero()[0]), flags.shape)


def unravel(flat, shape):
    index = []
    for size in reversed(tuple(shape)):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))


# ---------------------------------------------------------------------------- mistakes


@dataclass
class Mistake:
    """A known, specific mistake: the reference file `file` with each (old, new) of `patches`
    applied (each `old` must occur exactly once). `also_breaks` names other steps that this
    mistake genuinely breaks as well (besides the integration and cuda steps)."""

    id: str
    file: str
    patches: list
    also_breaks: tuple = ()

    def apply(self, source):
        for old, new in self.patches:
            count = source.count(old)
            if count != 1:
                raise ValueError(f"mistake {self.id}: {old!r} occurs {count} times in {self.file}")
            source = source.replace(old, new)
        return source
