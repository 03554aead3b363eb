"""Step `multi_head_attention` — the whole module.

    x -> w_q, w_k, w_v -> split_heads -> scores = q k^T / sqrt(d_k) -> mask -> softmax
      -> dropout -> weights @ v -> merge_heads -> w_o

It must agree with torch.nn.MultiheadAttention given the same weights (nn.MultiheadAttention
keeps w_q, w_k, w_v stacked in one in_proj_weight; out_proj is our w_o).

query (B, Lq, D) attends to key/value (B, Lk, D); for self-attention key = value = query.
pad_mask (B, Lk) is True at padding keys; the padding comes after the real tokens, as pad_batch
makes it (so a mask rebuilt from the lengths is fine). causal=True blocks key j for query i when
j > i (top-left aligned, also when Lq != Lk). Dropout acts on the attention weights (after the
softmax, before @ v), and nn.Dropout is automatically off after .eval().

How the grader finds your projections: by what they do, not by their names. Any of these works,
with nn.Linear or nn.LazyLinear layers, anywhere inside the module (in your own QKVProjection /
OutputProjection too): four (D -> D) layers applied to the query, the key, the value and the
merged heads; one fused (D -> 3*D) layer whose output is cut into q, k, v blocks of D in that
order (as FusedQKVProjection does; D -> 2*D for k, v next to a q layer works too). Projections
written as bare nn.Parameter with F.linear cannot be told apart: use layers. The names below are
the suggestion the TODO makes.

Precision: float32 arithmetic inside (a float32 softmax, a float32 scale) is accepted on float64
inputs, as long as the result comes back in the input's dtype.
"""
import math

import torch
import torch.nn as nn

from .heads import merge_heads, split_heads


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True, causal=False):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.causal = causal
        # TODO: create w_q, w_k, w_v, w_o (each nn.Linear(d_model, d_model, bias=bias)) and
        # self.dropout = nn.Dropout(dropout).
        ### BEGIN SOLUTION
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, query, key=None, value=None, pad_mask=None):
        # query: (B, Lq, D); key, value: (B, Lk, D); pad_mask: bool (B, Lk), True = padding
        key = query if key is None else key
        value = key if value is None else value
        # TODO: project, split into heads, attend (with the pad and causal masks, dropout on
        # the weights), merge the heads, apply w_o. Return (B, Lq, D).
        ### BEGIN SOLUTION
        q = split_heads(self.w_q(query), self.num_heads)  # (B, H, Lq, d_k)
        k = split_heads(self.w_k(key), self.num_heads)  # (B, H, Lk, d_k)
        v = split_heads(self.w_v(value), self.num_heads)  # (B, H, Lk, d_k)

        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)
        Lq, Lk = scores.shape[-2:]
        blocked = torch.zeros(Lq, Lk, dtype=torch.bool, device=scores.device)  # (Lq, Lk)
        if self.causal:
            blocked = torch.ones_like(blocked).triu(diagonal=1)  # (Lq, Lk)
        if pad_mask is not None:
            blocked = blocked | pad_mask[:, None, None, :]  # (B, 1, Lq, Lk)
        scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)

        weights = torch.softmax(scores, dim=-1)  # (B, H, Lq, Lk)
        weights = self.dropout(weights)  # (B, H, Lq, Lk)
        out = merge_heads(weights @ v)  # (B, Lq, D)
        return self.w_o(out)  # (B, Lq, D)
        ### END SOLUTION
