"""The earlier steps' functions written out, for the integration steps: one mistake, one charge.

Instructor-only, like mistakes/: each is a correct version of a step's function, so the student
release never ships this file (publish/student_release.py copies an assignment's observers and
checks, not this). The worker server loads it before any student code (harness/serve.py) and the
run with earlier steps written out uses it (harness/earlier.py); a student release judges its
module against the stored probe results instead (autograder/harness/answers.py).

Plain torch ops, the contract's signatures, never a forbidden call.
"""

import torch


def split_heads(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, L, num_heads, D // num_heads).transpose(1, 2)


def merge_heads(x):
    B, H, L, d_k = x.shape
    return x.transpose(1, 2).reshape(B, L, H * d_k)


def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)


def padding_mask(ids, pad_id=0):
    return (ids == pad_id)[:, None, None, :]


WRITTEN_OUT = {
    "split_heads": split_heads,
    "merge_heads": merge_heads,
    "scaled_dot_product_attention": scaled_dot_product_attention,
    "causal_mask": causal_mask,
    "padding_mask": padding_mask,
}
