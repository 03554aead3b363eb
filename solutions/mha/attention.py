"""Steps `attention` and `masking` — scaled dot-product attention.

For every query, compare it with every key (a dot product), turn the scores into weights that
are >= 0 and sum to 1 over the keys (softmax), and return the weighted sum of the values:

    scores  = q @ k^T / sqrt(d_k)      (..., Lq, Lk)
    weights = softmax(scores, over keys, i.e. the LAST dim)
    out     = weights @ v              (..., Lq, d_v)

Why divide by sqrt(d_k)? A dot product of two random d_k-dim vectors with unit-variance entries
has variance d_k. Big scores push softmax into saturation (one weight ~1, the rest ~0, tiny
gradients). Dividing by sqrt(d_k) brings the variance back to 1. Note: d_k is the size of ONE
head (q.size(-1)), not d_model.

Masking (the `masking` step grades this part): `mask` is a bool tensor that broadcasts to
(..., Lq, Lk), True = BLOCKED. A blocked key must get weight exactly 0 and the remaining weights
of the row must still sum to 1, so the mask goes on the scores BEFORE the softmax. Fill blocked
scores with a very negative number; if you use -inf, a row whose keys are ALL blocked turns into
NaN (0 / 0) — it must come out finite. (F.scaled_dot_product_attention uses the opposite mask
convention, True = may attend, and is not allowed here: this is the function you write.)

Precision: the checks use float64 inputs, and a result as close as float32 arithmetic gets is
accepted (softmax(..., dtype=torch.float32), a float32 scale tensor), as long as out and weights
come back in the input's dtype. Mind the fill then: float64's most negative number is -inf in
float32.
"""
import math

import torch


def scaled_dot_product_attention(q, k, v, mask=None):
    """q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), mask bool broadcastable to
    (..., Lq, Lk) with True = blocked.

    Returns (out, weights): out (..., Lq, d_v), weights (..., Lq, Lk).
    """
    # TODO (attention): compute the scaled scores, shape (..., Lq, Lk).
    ### BEGIN SOLUTION
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)
    ### END SOLUTION
    if mask is not None:
        # TODO (masking): give every blocked score a very negative (finite) value.
        ### BEGIN SOLUTION
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)  # (..., Lq, Lk)
        ### END SOLUTION
    # TODO (attention): softmax over the keys, then the weighted sum of the values.
    ### BEGIN SOLUTION
    weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)
    out = weights @ v  # (..., Lq, d_v)
    return out, weights
    ### END SOLUTION
