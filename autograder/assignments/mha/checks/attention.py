"""Checks for step `attention`: mha/attention.py, scaled_dot_product_attention without a mask.

Oracle: F.scaled_dot_product_attention. It does not return the weights, but with the identity
matrix as values its output IS the weight matrix, so both outputs are checked against PyTorch.
"""

import torch
import torch.nn.functional as F

from autograder.assignments.mha.observers import attention as observers
from autograder.engine.checks import messages
from autograder.engine.checks.check import Check, Fail, randsize

from ._shared import qkv, weights_picture

FILES = ["attention.py"]  # what the step grades (scanned for forbidden calls)


def oracle(q, k, v):
    """(out, weights) from PyTorch's own implementation."""
    eye = torch.eye(k.shape[-2], dtype=q.dtype).expand(*k.shape[:-1], k.shape[-2])
    return {"out": F.scaled_dot_product_attention(q, k, v), "weights": F.scaled_dot_product_attention(q, k, eye)}


class AgainstTorch(Check):
    """Helper: (out, weights) of the student's attention against PyTorch's, on `shape` inputs.
    `outputs` names the observations judged (both, or one for a finer-grained check)."""

    # d_k = 8, not 4: d_k / 2 == sqrt(d_k) only at 4, and `d_k ** 1/2` (operator precedence: d_k / 2)
    # would pass. All sizes differ, so that an axis mistaken for another shows.
    shape = {"lead": (2, 3), "lq": 5, "lk": 7, "d_k": 8, "d_v": 6}
    dtype = torch.float64
    outputs = ("out", "weights")
    observer = observers.outputs

    @property
    def arguments(self):
        return {"names": self.outputs}

    def inputs(self, rng):
        return qkv(
            rng,
            self.shape["lead"],
            self.shape["lq"],
            self.shape["lk"],
            self.shape["d_k"],
            self.shape["d_v"],
            dtype=self.dtype,
        )

    def expected(self, q, k, v):
        want = oracle(q, k, v)
        return {name: want[name] for name in self.outputs}

    def picture(self, inputs, got, expected):
        """The first head's weights, the student's next to the expected ones (a check of the
        output alone has none to show)."""
        if not isinstance(expected, dict) or "weights" not in expected:
            return None
        return weights_picture(got, expected["weights"], messages.render("picture.attention_weights", check=self.id))


class Weights(AgainstTorch):
    """weights = softmax(q k^T / sqrt(d_k)) over the keys: (B, H, Lq, Lk), rows sum to 1.
    Heads batched as (B, H, L, d), sizes B=2, H=3, Lq=5, Lk=7, d_k=8, d_v=6 (all different)."""

    id = "weights"
    outputs = ("weights",)
    weight = 3


class Output(AgainstTorch):
    """out = weights @ v: (B, H, Lq, d_v)."""

    id = "output"
    outputs = ("out",)
    weight = 3


class ThreeDims(AgainstTorch):
    """Works for any number of leading dims, e.g. (B, L, d) without a head axis."""

    id = "three_dims"
    shape = {"lead": (2,), "lq": 5, "lk": 7, "d_k": 8, "d_v": 6}


class SquareKeys(AgainstTorch):
    """Lk == d_k: a shape where q @ k (without the transpose) would run, but give other numbers.
    B=2, H=4, Lq=3, Lk=d_k=6, d_v=5: another head size and head count than the other checks."""

    id = "square_keys"
    shape = {"lead": (2, 4), "lq": 3, "lk": 6, "d_k": 6, "d_v": 5}


class Float32(AgainstTorch):
    """float32 inputs give float32 outputs of the same values."""

    id = "float32"
    shape = {"lead": (2, 3), "lq": 5, "lk": 7, "d_k": 8, "d_v": 6}
    dtype = torch.float32


# ### BEGIN HIDDEN CHECKS


class RandomSizes(Check):
    """Random sizes, against the reference."""

    id = "random_sizes"
    visibility = "hidden"
    weight = 3
    observer = observers.outputs

    def inputs(self, rng):
        lead = (randsize(rng, 2, 4), randsize(rng, 2, 5))  # (B, H)
        # d_k not a square (4, 9, 16): sqrt(d_k) is then no whole number, so no scale made of
        # sizes (d_k / 2, H, ...) equals it by chance on some seeds only; nor the head count
        # (scaled by sqrt(q.size(1)))
        lq, lk = randsize(rng, 2, 9), randsize(rng, 2, 9)
        d_k, d_v = randsize(rng, 2, 17, avoid=(4, 9, 16, lead[1])), randsize(rng, 2, 9)
        d_v += d_v == d_k  # d_v != d_k: else scaling by sqrt(d_v) would pass on some seeds only
        return qkv(rng, lead, lq=lq, lk=lk, d_k=d_k, d_v=d_v)


# ### PROBES (unscored: run when the step fails, to explain why)


class RowsNotNormalised(Check):
    """The weights of each row sum to 1."""

    diagnosis = "rows_not_normalised"
    observer = observers.row_sums

    def inputs(self, rng):
        return qkv(rng, (2, 3), lq=5, lk=7, d_k=4, d_v=6)

    def judge(self, inputs, got, expected, tol):
        sums = got["sums"]
        if isinstance(sums, torch.Tensor) and sums.numel() and not torch.allclose(sums, torch.ones_like(sums)):
            return Fail("rows_not_normalised", {"low": sums.min().item(), "high": sums.max().item()})
        return None


class LocaliseAttention(Check):
    """Localisation (engine/mistakes/localise.py): the scores, the weights and the output of the
    student's attention against the reference's, stage by stage. B=2, H=3, Lq=4, Lk=6, d_k=5,
    d_v=7: every size different, d_k no square."""

    diagnosis = "localised"
    localise = True
    observer = observers.traced

    def inputs(self, rng):
        return {**qkv(rng, (2, 3), 4, 6, 5, 7), "mask": None}
