"""The Check base class and the helpers that judge observations.

A check has two halves that never share a process:

    observer(student, **inputs, **arguments) -> dict
        a function of the assignment's observers/ package, which runs beside STUDENT code
        (autograder/harness/): it runs their package and returns plain observations (tensors,
        tuples, numbers, strings). The check names it; the worker knows nothing else of the check.
    judge(inputs, got, expected, tol)
        in the judge, never runs student code; returns None (pass) or a Fail

`inputs(rng)` makes the inputs from a seeded generator, so both halves can rebuild them, and
`expected` comes from the check's own oracle (public checks: PyTorch built-ins or a definition
written out) or, for hidden checks, from running the observer on the reference solution, in the
judge.
"""

import math
from dataclasses import dataclass, field

import torch

from autograder.engine.checks import messages
from autograder.harness.contract import describe


@dataclass
class Fail:
    """A judged failure: a message id from `messages.CATALOGS` and its parameters."""

    message_id: str
    params: dict = field(default_factory=dict)


class Check:
    """Base class of every check. Subclasses set `id` and override the halves they need."""

    id = None  # unique within its step; classes without an id are helpers, not checks
    observer = None  # the function of the assignment's observers/ package that runs student code
    arguments = {}  # the observer's fixed keyword arguments besides the inputs (plain data)
    step = None  # set by the registry from the module name
    weight = 1.0
    visibility = "public"  # "public": students see and run it; "hidden": instructor only
    requires = None  # e.g. "cuda": the runner reports "not checked" when it is missing
    diagnosis = None  # set on probes: unscored checks whose failure is reported as this diagnosis id

    def inputs(self, rng):
        """Inputs for `observe`, made from `rng` (a torch.Generator)."""
        return {}

    def observe(self, student, **inputs):
        """The observer on a package, in this process: the reference's or a known mistake's (the
        judge's expectation and diagnosis), or a student's own run. (`student.heads` imports
        heads.py on first use.)"""
        return type(self).observer(student, **inputs, **self.arguments)

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


def randsize(rng, low, high, avoid=()):
    """A random size in [low, high) for a hidden check, at least 2, stepped up past the sizes in
    `avoid` (so it may end at high or above).

    A size of 1 makes mistakes invisible (one head: d_k == d_model; a length-1 axis: a missing
    transpose is a no-op), so a random draw would pass a wrong answer on some seeds and not on
    others. Edge cases of size 1 belong in a fixed check, never in a random draw. `avoid` does
    the same for sizes that make two different computations agree: a square d_k, whose square
    root other sizes can equal, or d_k equal to the head count."""
    if low < 2:
        raise ValueError(f"randsize(low={low}): random sizes start at 2; test size 1 in a fixed check")
    size = int(torch.randint(low, high, (), generator=rng))
    while size in avoid:
        size += 1
    return size


def randindex(rng, low, high):
    """A random int in [low, high), for ids and positions (not sizes)."""
    return int(torch.randint(low, high, (), generator=rng))


def linear_state(rng, d_in, d_out, bias=True, dtype=torch.float64):
    """Random weights for an nn.Linear(d_in, d_out), with non-zero biases."""
    state = {"weight": randn(rng, d_out, d_in, dtype=dtype) / math.sqrt(d_in)}
    if bias:
        state["bias"] = randn(rng, d_out, dtype=dtype)
    return state


# ---------------------------------------------------------------------------- judging


def judged(check, inputs, values, expected, tol):
    """check.judge(), which must not take the grader down on values it cannot read: they come
    from student code, or from a worker that student code has taken over."""
    try:
        return check.judge(inputs, values, expected, tol)
    except Exception as error:  # noqa: BLE001 - malformed observations
        detail = f"{type(error).__name__}: {error}".splitlines()[0][:160]
        return Fail("unreadable_observation", {"step": check.step, "detail": detail})


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
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            fail = compare(g, e, tol, name=f"{name}[{i}]")
            if fail:
                return fail
        return None
    if got != expected:
        return Fail("not_equal", {"name": name, "expected": expected, "got": got})
    return None


# A float64 result also passes when it is as close as float32 arithmetic gets (docs/how-grading-works.md, "Tolerance"):
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
