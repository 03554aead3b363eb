"""Step `incremental_decoding` — attention for new tokens against everything cached (증분 디코딩).

With a KV cache (cache.py) a model no longer runs attention over the whole text at every step.
It runs it for the NEW chunk only: its L_new queries against all L = L_past + L_new cached keys
(the old ones and the chunk's own, appended first). The result must be exactly what full causal
attention over the whole text gives for those rows: caching is an optimisation, not a new model.

The catch is the causal mask (인과 마스크). In full attention query i may see keys 0..i. In a chunk, query i
is not at position i: it sits after the L_past cached tokens, at the absolute position

    p = L_past + i = (L - L_new) + i,       and may see keys 0..p.

So the mask of a chunk is the bottom-right corner of the full (L, L) causal mask: the last
L_new rows. Worked example with 3 cached tokens (True = blocked):

    a 2-token chunk:  offset_causal_mask(2, 5)        one token:  offset_causal_mask(1, 4)
        tensor([[False, False, False, False,  True],      tensor([[False, False, False, False]])
                [False, False, False, False, False]])

    The usual top-left mask, triu(ones(1, 4), diagonal=1) = [[False, True, True, True]], would
    let the newest token see token 0 only, as if positions restarted at 0 in every chunk.

With L_new == L (no cache yet, the prompt) this is the ordinary (L, L) causal mask. In torch,
triu(ones(L_new, L), diagonal=d) keeps the entries with column - row >= d; here blocked means
column j > p = (L - L_new) + i, i.e. j - i >= L - L_new + 1.

The attention itself is the one of the mha assignment: scores = q K^T / sqrt(d_k), blocked
scores filled with a very negative finite number, softmax over the keys (the last dim), times V.
Precision: float32 arithmetic inside is accepted on float64 inputs, as long as the result
comes back in the input's dtype.
"""
import math

import torch


def offset_causal_mask(q_len, k_len, device=None):
    """-> bool (q_len, k_len) on `device`, True = blocked. The q_len queries are the LAST q_len
    of k_len positions: query i (absolute position k_len - q_len + i) may see keys 0..that."""
    # TODO: block key j for query i when j > (k_len - q_len) + i.
    raise NotImplementedError("TODO")


def cached_attention(q, k, v, cache):
    """Causal attention of a new chunk over the cache.

    q (B, H, L_new, d_k), k (B, H, L_new, d_k), v (B, H, L_new, d_v): the chunk's projections.
    cache: anything with update(k, v) -> (K, V) returning the whole cache, such as KVCache.
    Appends k, v to the cache, then returns out (B, H, L_new, d_v).
    """
    # TODO: append the chunk to the cache first (its own keys are among those it may see).
    raise NotImplementedError("TODO")
    # TODO: scaled scores of the new queries against all cached keys, the offset causal mask
    # (a very negative finite fill), softmax over the keys, and the weighted sum of V.
    raise NotImplementedError("TODO")
