"""Checks for step `grouped_query_attention`: kv_cache/gqa.py, repeat_kv and grouped_query_attention.

Oracle: F.scaled_dot_product_attention(..., enable_gqa=True), PyTorch's own grouped-query
attention (query head h uses K/V head h // (H // H_kv)), and for repeat_kv that rule written out.
"""

import torch
import torch.nn.functional as F

from autograder.assignments.kv_cache.observers import grouped_query_attention as observers
from autograder.engine.checks.check import Check, raised_verdict, randn, randsize

from ._shared import mask_by_hand

FILES = ["gqa.py"]  # what the step grades (scanned for forbidden calls)


def heads_by_rule(x, n_rep):
    """(B, H_kv, L, d) -> (B, H_kv * n_rep, L, d) written as 'head h is kv head h // n_rep'."""
    return torch.stack([x[:, h // n_rep] for h in range(x.shape[1] * n_rep)], dim=1)


def gqa_inputs(rng, B=2, H=6, H_kv=2, Lq=4, Lk=5, d_k=4, d_v=3, dtype=torch.float64):
    return {
        "q": randn(rng, B, H, Lq, d_k, dtype=dtype),
        "k": randn(rng, B, H_kv, Lk, d_k, dtype=dtype),
        "v": randn(rng, B, H_kv, Lk, d_v, dtype=dtype),
    }


def oracle(q, k, v, mask=None):
    """PyTorch's GQA; its mask convention is the opposite one (True = may attend)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask, enable_gqa=True)


class AgainstTorch(Check):
    """Helper: grouped_query_attention(q, k, v, mask) against PyTorch's on `shape` inputs."""

    shape = {}
    masked = False
    dtype = torch.float64
    observer = observers.attend

    def inputs(self, rng):
        inputs = gqa_inputs(rng, dtype=self.dtype, **self.shape)
        inputs["mask"] = mask_by_hand(inputs["q"].shape[2], inputs["k"].shape[2]) if self.masked else None
        return inputs

    def expected(self, q, k, v, mask):
        return {"out": oracle(q, k, v, mask)}


class RepeatValues(Check):
    """repeat_kv(x, 3) on (B=2, H_kv=2, L=3, d=4): kv head j becomes heads 3j, 3j+1, 3j+2; and
    repeat_kv(x, 1) gives x's values back (H_kv == H: nothing to share)."""

    id = "repeat_kv_values"
    weight = 2
    observer = observers.repeated
    arguments = {"times": (3, 1)}

    def inputs(self, rng):
        return {"x": randn(rng, 2, 2, 3, 4)}

    def expected(self, x):
        return {"repeated": heads_by_rule(x, 3), "once": x}


class Grouped(AgainstTorch):
    """H=6 query heads share H_kv=2 K/V heads (groups of 3); B=2, Lq=4, Lk=5, d_k=4, d_v=3."""

    id = "grouped"
    weight = 3


class GroupedCausal(AgainstTorch):
    """With a causal mask (True = blocked), H=8 query heads and H_kv=2 K/V heads."""

    id = "grouped_causal"
    shape = {"H": 8, "H_kv": 2, "Lq": 5, "Lk": 5}
    masked = True
    weight = 2


class MultiQuery(AgainstTorch):
    """H_kv = 1 (multi-query attention): one K/V head for all 4 query heads."""

    id = "multi_query"
    shape = {"H": 4, "H_kv": 1}


class EqualHeads(AgainstTorch):
    """H_kv = H = 3: ordinary multi-head attention."""

    id = "equal_heads"
    shape = {"H": 3, "H_kv": 3}


class Float32(AgainstTorch):
    """float32 inputs give float32 outputs of the same values (with a causal mask)."""

    id = "float32"
    shape = {"H": 6, "H_kv": 3, "Lq": 4, "Lk": 4, "d_k": 8}
    masked = True
    dtype = torch.float32


class NotDivisible(Check):
    """H=6 query heads cannot share H_kv=4 K/V heads: ValueError."""

    id = "not_divisible"
    observer = observers.not_divisible

    def inputs(self, rng):
        return gqa_inputs(rng, H=6, H_kv=4)

    def judge(self, inputs, got, expected, tol):
        case = "grouped_query_attention with q of 6 heads and k, v of 4"
        return raised_verdict(got, "ValueError", case)


# ### BEGIN HIDDEN CHECKS


class RandomSizes(AgainstTorch):
    """Random sizes, groups of 2 or more, and a random mask, against PyTorch's GQA."""

    id = "random_sizes"
    visibility = "hidden"
    weight = 3
    observer = observers.attend_and_repeat

    def inputs(self, rng):
        H_kv, n_rep = randsize(rng, 2, 4), randsize(rng, 2, 4)
        Lq, Lk = randsize(rng, 2, 6), randsize(rng, 3, 8)
        inputs = gqa_inputs(
            rng,
            B=randsize(rng, 2, 4),
            H=H_kv * n_rep,
            H_kv=H_kv,
            Lq=Lq,
            Lk=Lk,
            d_k=randsize(rng, 2, 9),
            d_v=randsize(rng, 2, 9),
        )
        mask = torch.rand(Lq, Lk, generator=rng) < 0.3  # (Lq, Lk)
        mask[:, :2] = False  # every query keeps two keys: with one, the scale would not matter
        mask[:, -1] = True  # and loses one: an ignored mask shows on every seed
        return {**inputs, "mask": mask}

    def expected(self, q, k, v, mask):
        return {"out": oracle(q, k, v, mask), "repeated": heads_by_rule(k, q.shape[1] // k.shape[1])}


# ### PROBES (unscored: run when the step fails, to explain why)


class LocaliseGQA(Check):
    """Localisation (engine/mistakes/localise.py): the repeated keys and values, the scores, the
    blocked keys and the weights against the reference's. B=3, H=8, H_kv=2, Lq=5, Lk=6, d_k=7,
    d_v=9: every size different."""

    diagnosis = "localised"
    localise = True
    observer = observers.traced

    def inputs(self, rng):
        inputs = gqa_inputs(rng, B=3, H=8, H_kv=2, Lq=5, Lk=6, d_k=7, d_v=9)
        return {**inputs, "mask": mask_by_hand(5, 6)}
