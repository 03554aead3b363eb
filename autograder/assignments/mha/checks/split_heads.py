"""Checks for step `split_heads`: mha/heads.py, split_heads(x, num_heads) and merge_heads(x)."""

import torch

from autograder.assignments.mha.observers import split_heads as observers
from autograder.engine.checks.check import Check, raised_verdict, randn, randsize

from ._shared import concat_heads

FILES = ["heads.py"]  # what the step grades (scanned for forbidden calls)


def heads_by_slicing(x, num_heads):
    """(B, L, D) -> (B, H, L, d_k) written as 'head h = features h*d_k ... (h+1)*d_k - 1'."""
    d_k = x.shape[-1] // num_heads
    return torch.stack([x[..., h * d_k : (h + 1) * d_k] for h in range(num_heads)], dim=1)


class SplitValues(Check):
    """(B, L, D) -> (B, H, L, d_k): head h holds features h*d_k ... (h+1)*d_k - 1 of every token."""

    id = "split_values"
    weight = 3
    observer = observers.split

    def inputs(self, rng):
        return {"x": randn(rng, 2, 5, 12), "num_heads": 3}

    def expected(self, x, num_heads):
        return {"heads": heads_by_slicing(x, num_heads)}


class SplitOtherSizes(Check):
    """Works for other sizes too (nothing hard-coded): (3, 7, 10) into 2 heads and into 5."""

    id = "split_other_sizes"
    observer = observers.split_twice

    def inputs(self, rng):
        return {"x": randn(rng, 3, 7, 10)}

    def expected(self, x):
        return {"two_heads": heads_by_slicing(x, 2), "five_heads": heads_by_slicing(x, 5)}


class SplitNotDivisible(Check):
    """D not divisible by num_heads raises ValueError."""

    id = "split_not_divisible"
    observer = observers.split_not_divisible

    def inputs(self, rng):
        return {"x": randn(rng, 2, 5, 12), "num_heads": 5}

    def judge(self, inputs, got, expected, tol):
        case = "split_heads(x of shape (2, 5, 12), num_heads=5)"
        return raised_verdict(got, "ValueError", case)


class MergeValues(Check):
    """(B, H, L, d_k) -> (B, L, H*d_k): the heads side by side again, token by token."""

    id = "merge_values"
    weight = 3
    observer = observers.merge

    def inputs(self, rng):
        return {"x": randn(rng, 2, 3, 5, 4)}

    def expected(self, x):
        return {"merged": concat_heads(x)}


class MergeNonContiguous(Check):
    """merge_heads works on a non-contiguous input (e.g. straight out of a transpose)."""

    id = "merge_non_contiguous"
    weight = 2
    observer = observers.merge
    arguments = {"transposed": True}  # (B, H=3, L=6, d_k=4), not contiguous

    def inputs(self, rng):
        return {"x": randn(rng, 2, 6, 3, 4)}

    def expected(self, x):
        return {"merged": concat_heads(x.transpose(1, 2))}


class RoundTrip(Check):
    """merge_heads(split_heads(x, H)) gives x back."""

    id = "round_trip"
    observer = observers.round_trip
    arguments = {"num_heads": 4}

    def inputs(self, rng):
        return {"x": randn(rng, 2, 5, 12)}

    def expected(self, x):
        return {"x": x}


# ### BEGIN HIDDEN CHECKS


class RandomSplit(Check):
    """Random sizes, split and merge, against the reference."""

    id = "random_split_merge"
    visibility = "hidden"
    weight = 3
    observer = observers.split_and_merge

    def inputs(self, rng):
        num_heads = randsize(rng, 2, 6)
        d_k = randsize(rng, 2, 7)
        x = randn(rng, randsize(rng, 2, 4), randsize(rng, 2, 9), num_heads * d_k)  # (B, L, d_model)
        return {"x": x, "num_heads": num_heads, "heads": randn(rng, 2, num_heads, 5, d_k)}


# ### PROBES (unscored: run when the step fails, to explain why)


class LocaliseSplit(Check):
    """Localisation (engine/mistakes/localise.py): split_heads of (B=2, L=4, D=15) into H=3
    heads, then merge_heads of (B=2, H=3, L=4, d_k=5), against the reference's."""

    diagnosis = "localised"
    localise = True
    observer = observers.traced

    def inputs(self, rng):
        return {"x": randn(rng, 2, 4, 15), "num_heads": 3, "heads": randn(rng, 2, 3, 4, 5)}
