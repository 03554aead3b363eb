"""A stage seen up to a difference the rest of the computation does not see (localise.py): the
differences each stage `cancels` or `moves` to a later factor, found by trying them on the
assignment's pipeline (cancelled.py) and stored with the stages.

    loosely(got, stage, tol)   # "cancelled", "factor" or None
    rebased(stage, stages, shifted, values)   # the stage computed from the student's own input
    as_computed(stage, stages, shifted, values)   # the student's own value there, else rebased
    relate(value, stage, stages, sizes, tol)  # relations, the scale applied early where it moves
"""

import dataclasses

import torch

from autograder.engine.mistakes import relations
from autograder.engine.mistakes.relations import blocked_of, close, is_float


def loosely(got, stage, tol) -> "str | None":
    """How `got` is the stage's value up to a difference the rest of the computation does not see
    (cancelled.py): "cancelled", by one that varies only along axes the stage `cancels` (a bias the
    softmax cancels); "factor", by a constant factor that the later stage the stage `moves` to
    takes in (the scale applied to the queries); None, neither. The same layout only."""
    value = stage.value
    if not (stage.cancels or stage.moves) or not isinstance(got, torch.Tensor) or got.shape != value.shape:
        return None
    if not is_float(got) or not is_float(value):
        return None
    got, value = got.detach().to(torch.float64), value.to(torch.float64)
    valid = torch.isfinite(value)
    if stage.kind == "masked" and stage.blocked is not None:
        ours = stage.blocked.expand_as(value)
        theirs = blocked_of(got, "masked")
        if theirs is None or not torch.equal(theirs, ours):
            return None
        valid &= ~ours
    if not valid.any() or not bool(torch.isfinite(got)[valid].all()):
        return None  # a NaN or inf where the reference has a number is a difference everything after sees
    if stage.moves:
        ours_, theirs_ = value[valid], got[valid]
        norm = float((ours_ * ours_).sum())
        if norm > 1e-12 * ours_.numel():
            c = float((theirs_ * ours_).sum()) / norm
            if abs(c) > 1e-9 and close(theirs_, c * ours_, tol):
                return "factor"
    difference = torch.where(valid, got - value, torch.zeros((), dtype=torch.float64))
    weight = valid.to(torch.float64)
    for axes in stage.cancels:
        constant = tuple(a for a in range(value.dim()) if a not in axes)
        mean = difference.sum(constant, keepdim=True) / weight.sum(constant, keepdim=True).clamp(min=1)
        if close(got, value + mean.expand_as(value), tol, where=valid):
            return "cancelled"
    return None


def rebased(stage, stages, shifted, values):
    """The stage as the reference computes it from the student's own input, where that input is
    the reference's up to a difference that nothing later sees (`shifted`: stage -> the position
    of the student's value): a key without its bias shifts every row of scores, and a mask or a
    softmax over the wrong axis is then said of the student's scores, not the reference's. Only
    the stages whose computation from their input is data: a mask (kind masked), the softmax
    (kind weights), a factor (scale); any other stage as it is."""
    by_name = {s.name: s for s in stages}

    def own(name):
        reference = by_name[name].value
        got = values[shifted[name]] if name in shifted else None
        return got.detach().to(reference.dtype) if got is not None and got.shape == reference.shape else None

    if stage.kind in ("masked", "weights") and stage.source is not None:
        source = next(
            (
                s.name
                for s in stages
                if s.name in shifted and s.value.shape == stage.source.shape and torch.equal(s.value, stage.source)
            ),
            None,
        )
        theirs = own(source) if source else None
        if theirs is None:
            return stage
        masked = theirs if stage.blocked is None else theirs.masked_fill(stage.blocked, torch.finfo(theirs.dtype).min)
        value = masked if stage.kind == "masked" else torch.softmax(masked, dim=stage.axis)
        return dataclasses.replace(stage, value=value, source=theirs)
    if stage.scale and len(stage.parents) == 1 and stage.parents[0] in shifted:
        theirs = own(stage.parents[0])
        return stage if theirs is None else dataclasses.replace(stage, value=theirs * stage.scale[0])
    return stage


def as_computed(stage, stages, shifted, values):
    """The stage as the student's code has it: its own value where it was seen up to a difference
    nothing later sees (`shifted`: stage -> position), else rebased on the student's inputs."""
    got = values[shifted[stage.name]] if stage.name in shifted else None
    if got is not None and got.shape == stage.value.shape:
        return dataclasses.replace(stage, value=got.detach().to(stage.value.dtype))
    return rebased(stage, stages, shifted, values)


def relate(value, stage, stages, sizes, tol, moving=True) -> list:
    """The relations of `value` to the stage's value, or, where none fits, to its value with the
    factor of the later stage it `moves` to applied already (the scale applied to the queries,
    then their heads sliced wrong: the slicing is what happened). Not where the code keeps the
    reference's scale where it belongs (`moving` False: scale_kept): then no factor was moved."""
    found = relations.relate(value, stage, sizes, tol)
    later = next((s for s in stages if s.name == stage.moves and s.scale), None)
    if found or later is None or not moving:
        return found
    c = later.scale[0]
    others = {label: other * c for label, other in stage.others.items()} if stage.others else stage.others
    moved = dataclasses.replace(stage, value=stage.value * c, others=others, moves=None, cancels=())
    found = relations.relate(value, moved, sizes, tol)
    if found or not (is_float(value) and value.numel() == stage.value.numel()):
        return found
    # any factor (the scale split between the queries and the keys): a map of the values keeps
    # their norm, so the factor is the ratio of the norms, of either sign
    norm = float(stage.value.to(torch.float64).norm())
    ratio = float(value.detach().to(torch.float64).norm()) / norm if norm > 0 else 0.0
    for sign in (1.0, -1.0) if ratio > 0 else ():
        found = [f for f in relations.relate(value / (sign * ratio), stage, sizes, tol) if f.family != "factor"]
        if found:
            return found
    return []


def scale_kept(stages, call, values, positions, tol) -> bool:
    """Whether a value the computation goes on from (`positions`) is one it was computed from times
    the reference's own factor of a scale stage, in that stage's shape: the code applies the scale
    where the reference does, so a factor before it was made there (q = -q), not moved."""
    inputs = call.get("from")
    if not isinstance(inputs, list):
        return False
    scales = [(tuple(s.value.shape), s.scale[0]) for s in stages if s.scale]
    for i in positions:
        got = values[i] if i < len(values) else None
        sources = inputs[i] if i < len(inputs) and isinstance(inputs[i], list) else []
        if not is_float(got):
            continue
        for shape, c in scales:
            if tuple(got.shape) != shape:
                continue
            for j in sources:
                source = values[j] if isinstance(j, int) and 0 <= j < len(values) else None
                if (
                    is_float(source)
                    and source.shape == got.shape
                    and close(got.detach().to(torch.float64), source.detach().to(torch.float64) * c, tol)
                ):
                    return True
    return False
