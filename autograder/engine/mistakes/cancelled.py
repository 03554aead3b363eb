"""Which differences at a stage the rest of the computation does not see, found by trying them on
the reference's own pipeline (a build step: an assignment's mistakes/stages.py calls it, and the
answers are stored with the stages, Stage.cancels and Stage.moves).

An equivalent program may leave the reference at a stage by such a difference and still be right:
a key projection without a bias (the softmax cancels what it shifts a row of scores by), the
scale applied to the queries (a product carries a constant factor to the scores, where the
reference applies its own). Localisation (localise.py) sees a stage up to these differences, so
that a finding is where the computation truly leaves the reference.

    mark(stages, run)   # run({stage name: function}) -> the outputs with those stages changed
"""

import itertools
from collections.abc import Callable

import torch

from autograder.engine.mistakes.scenario import Stage

FACTOR = 2.0


def mark(stages: list, run: Callable) -> None:
    """Set `cancels` and `moves` on each of `stages` by trying its differences with `run`."""
    base = run({})
    by_name = {stage.name: stage for stage in stages}
    generator = torch.Generator().manual_seed(0)
    for stage in stages:
        if stage.kind in ("input", "mask", "dropout") or not stage.value.is_floating_point() or stage.fixed:
            continue
        anything = torch.randn(stage.value.shape, generator=generator, dtype=torch.float64).to(stage.value.dtype)
        if _same(run({stage.name: lambda x, d=anything: x + d}), base):
            continue  # the outputs are not computed from it (the values in train(), before the dropout)
        stage.cancels = _cancelled(stage, run, base, generator)
        stage.moves = _moved_to(stage, stages, by_name, run, base)


def _cancelled(stage: Stage, run, base, generator) -> tuple:
    """The largest sets of axes along which a difference may vary and leave the outputs the same."""
    shape = stage.value.shape
    found = []
    for count in range(stage.value.dim() - 1, -1, -1):
        for axes in itertools.combinations(range(stage.value.dim()), count):
            if any(set(axes) <= set(larger) for larger in found):
                continue
            if all(shape[a] == 1 for a in range(len(shape)) if a not in axes):
                continue  # varies along every axis that has more than one position: any difference
            size = [n if a in axes else 1 for a, n in enumerate(shape)]
            difference = torch.randn(size, generator=generator, dtype=torch.float64).to(stage.value.dtype) + 0.5
            if _same(run({stage.name: lambda x, d=difference: x + d}), base):
                found.append(axes)
    return tuple(found)


def _moved_to(stage: Stage, stages, by_name, run, base) -> "str | None":
    """The later stage with a factor of its own that a constant factor here is the same as."""
    if _same(run({stage.name: lambda x: x * FACTOR}), base):
        return None  # a factor here is cancelled: nothing to move
    for later in _descendants(stages, stage):
        if by_name[later].scale and _same(
            run({stage.name: lambda x: x * FACTOR, later: lambda x: x / FACTOR}),
            base,
        ):
            return later
    return None


def _descendants(stages, stage) -> list:
    found = {stage.name}
    for other in stages:  # in the order of the computation: a parent comes before its children
        if any(p in found for p in other.parents):
            found.add(other.name)
    return [s.name for s in stages if s.name in found and s.name != stage.name]


def _same(outputs, base) -> bool:
    return len(outputs) == len(base) and all(
        a.shape == b.shape and torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(outputs, base, strict=True)
    )
