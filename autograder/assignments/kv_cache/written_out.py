"""The earlier steps' functions written out, for the integration step `decoder`: one mistake, one
charge.

Instructor-only, like mistakes/: each is a correct version of a step's function (the cache as
the public checks of step `kv_cache` state it), so the student release never ships this file.
The worker server loads it before any student code (harness/serve.py) and the run with earlier
steps written out uses it (harness/earlier.py); a student release judges its module against the
stored probe results instead (autograder/harness/answers.py).

Plain torch ops, the contract's signatures, never a forbidden call.
"""

import torch


def repeat_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


def grouped_query_attention(q, k, v, mask=None):
    H, H_kv = q.size(1), k.size(1)
    if H % H_kv != 0:
        raise ValueError(f"n_heads={H} is not a multiple of n_kv_heads={H_kv}")
    k, v = k.repeat_interleave(H // H_kv, dim=1), v.repeat_interleave(H // H_kv, dim=1)
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=-1) @ v


def offset_causal_mask(q_len, k_len, device=None):
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).triu(k_len - q_len + 1)


def cached_attention(q, k, v, cache):
    K, V = cache.update(k, v)
    L_new, L = q.size(-2), K.size(-2)
    scores = q @ K.transpose(-2, -1) / q.size(-1) ** 0.5
    blocked = torch.ones(L_new, L, dtype=torch.bool, device=q.device).triu(L - L_new + 1)
    scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=-1) @ V


class KVCache:
    """Every chunk given so far, concatenated along the sequence axis (dim 2)."""

    def __init__(self):
        self.chunks = []  # [(k, v)]: (B, H_kv, L_chunk, d_k), (B, H_kv, L_chunk, d_v)

    def update(self, k, v):
        self.chunks.append((k, v))
        return torch.cat([k for k, _ in self.chunks], dim=2), torch.cat([v for _, v in self.chunks], dim=2)

    def __len__(self):
        return sum(k.size(2) for k, _ in self.chunks)

    def reset(self):
        self.chunks = []


WRITTEN_OUT = {
    "repeat_kv": repeat_kv,
    "grouped_query_attention": grouped_query_attention,
    "offset_causal_mask": offset_causal_mask,
    "cached_attention": cached_attention,
    "KVCache": KVCache,
}
