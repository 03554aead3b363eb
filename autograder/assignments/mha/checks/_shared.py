"""What several steps' checks use: their inputs, expectations and pictures (not a step: the
engine loads only checks modules whose names do not start with `_`). The student release
ships what its public checks still use once their oracles are out (engine/generate/stored_checks.py).
"""

import torch

from autograder.engine.checks.check import randn


def qkv(rng, lead, lq, lk, d_k, d_v, dtype=torch.float64):
    return {
        "q": randn(rng, *lead, lq, d_k, dtype=dtype),
        "k": randn(rng, *lead, lk, d_k, dtype=dtype),
        "v": randn(rng, *lead, lk, d_v, dtype=dtype),
    }


def weights_picture(got, expected, title):
    """Check.picture's answer for (B, H, Lq, Lk) weights: batch 0, head 0 of both; None when the
    student's weights have another shape (then the message says more than a picture)."""
    weights = got.get("weights") if isinstance(got, dict) else None
    if not isinstance(weights, torch.Tensor) or weights.shape != expected.shape or weights.dim() != 4:
        return None
    return {"got": weights[0, 0], "expected": expected[0, 0], "title": title}


def causal_by_hand(lq, lk):
    return torch.tensor([[j > i for j in range(lk)] for i in range(lq)])


def concat_heads(x):
    """(B, H, L, d_k) -> (B, L, H*d_k): the heads side by side along the features."""
    return torch.cat([x[:, h] for h in range(x.shape[1])], dim=-1)
