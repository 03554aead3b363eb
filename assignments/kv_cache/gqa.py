"""Step `grouped_query_attention` — fewer key/value heads than query heads (그룹 쿼리 어텐션).

The KV cache of a big model is big: per token it keeps one key and one value vector per head
and per layer. Grouped-query attention (GQA, used by Llama 2 70B, Llama 3, Mistral) shrinks it:
the model keeps H query heads but only H_kv key/value heads, and each K/V head serves a GROUP
of n_rep = H // H_kv consecutive query heads. The cache shrinks by a factor of n_rep. H_kv == H
is ordinary multi-head attention; H_kv == 1 is multi-query attention (MQA), one K/V for all.

Which K/V head does query head h use?  kv head h // n_rep.  With H = 6, H_kv = 2 (n_rep = 3):

    query heads   0 1 2 | 3 4 5
    kv head       0 0 0 | 1 1 1

The simplest correct implementation copies each K/V head n_rep times, next to itself, so that
the K/V tensor has H heads again and ordinary attention applies. That is repeat_interleave,
not repeat (tile):

    >>> x = torch.tensor([[[[10.]], [[20.]]]])        # (B=1, H_kv=2, L=1, d=1)
    >>> x.repeat_interleave(3, dim=1).flatten()       # kv head j -> heads 3j, 3j+1, 3j+2
    tensor([10., 10., 10., 20., 20., 20.])
    >>> x.repeat(1, 3, 1, 1).flatten()                # WRONG: query head h gets kv head h % 2
    tensor([10., 20., 10., 20., 10., 20.])

(The copy is for clarity; fast kernels index the shared heads instead of copying them, and
x[:, :, None].expand(B, H_kv, n_rep, L, d).reshape(B, H_kv * n_rep, L, d) copies the same way
with one allocation.)
"""
import math

import torch


def repeat_kv(x, n_rep):
    """(B, H_kv, L, d) -> (B, H_kv * n_rep, L, d): kv head j becomes heads j*n_rep ... j*n_rep + n_rep - 1."""
    # TODO: each head n_rep times, next to itself (repeat_interleave semantics).
    raise NotImplementedError("TODO")


def grouped_query_attention(q, k, v, mask=None):
    """q (B, H, Lq, d_k), k (B, H_kv, Lk, d_k), v (B, H_kv, Lk, d_v), mask bool broadcastable
    to (B, H, Lq, Lk) with True = blocked. Returns out (B, H, Lq, d_v).

    Raises ValueError when H is not a multiple of H_kv."""
    # TODO: check that H is a multiple of H_kv, and give every query head its K/V head.
    raise NotImplementedError("TODO")
    # TODO: then attention as usual: scaled scores, the mask (a very negative finite fill),
    # softmax over the keys, the weighted sum of the values.
    raise NotImplementedError("TODO")
