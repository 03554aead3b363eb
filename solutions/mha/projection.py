"""Step `qkv_projection` — vectors -> queries, keys and values.

Every token vector x (d_model numbers) is mapped three times by three different learned linear
maps:  q = x W_q^T + b_q,  k = x W_k^T + b_k,  v = x W_v^T + b_v.  Each keeps the size d_model,
so x (B, L, D) gives q, k, v each (B, L, D).

Two ways to write it, both used in practice and both asked for here:
  * three separate nn.Linear(D, D): w_q, w_k, w_v;
  * one fused nn.Linear(D, 3*D) called c_attn (GPT-2 style): one bigger matmul, then cut the
    last dimension into three consecutive pieces of size D — q first, then k, then v.

A classic bug: projecting k and v with w_q too. Each of q, k, v needs its own weights.

The grader loads its weights into your layers: in QKVProjection by the names w_q, w_k, w_v (three
layers of one size cannot be told apart otherwise); in FusedQKVProjection into c_attn, or into
the class's only layer, whatever its name. nn.LazyLinear works too.
"""
import torch.nn as nn


class QKVProjection(nn.Module):
    """Three separate projections: forward(x (B, L, D)) -> (q, k, v), each (B, L, D)."""

    def __init__(self, d_model, bias=True):
        super().__init__()
        # TODO: create self.w_q, self.w_k, self.w_v: each nn.Linear(d_model, d_model, bias=bias).
        ### BEGIN SOLUTION
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        ### END SOLUTION

    def forward(self, x):
        # x: (B, L, D)
        # TODO: return (q, k, v), each (B, L, D), each from its own projection.
        ### BEGIN SOLUTION
        q = self.w_q(x)  # (B, L, D)
        k = self.w_k(x)  # (B, L, D)
        v = self.w_v(x)  # (B, L, D)
        return q, k, v
        ### END SOLUTION


class FusedQKVProjection(nn.Module):
    """One fused projection c_attn: forward(x (B, L, D)) -> (q, k, v), each (B, L, D)."""

    def __init__(self, d_model, bias=True):
        super().__init__()
        self.d_model = d_model
        # TODO: create self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias).
        ### BEGIN SOLUTION
        self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)
        ### END SOLUTION

    def forward(self, x):
        # x: (B, L, D)
        # TODO: one call of c_attn gives (B, L, 3*D); cut its last dimension into three
        # consecutive pieces of size D and return them in the order q, k, v.
        ### BEGIN SOLUTION
        qkv = self.c_attn(x)  # (B, L, 3*D)
        q, k, v = qkv.split(self.d_model, dim=-1)  # 3 x (B, L, D)
        return q, k, v
        ### END SOLUTION
