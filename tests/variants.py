"""Correct submissions written differently from the reference. Each must get full marks and no
diagnosis: the grader measures behaviour, not style. Each variant is a patch set (planted.Patched) on
the reference (file -> [(old, new)]), so it stays in step with the reference."""

from planted import Patched


def variant(name, file, patches):
    return Patched(name, file, patches)


ATT_SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)"
ATT_OUT = "out = weights @ v  # (..., Lq, d_v)"
SOFTMAX = "weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)"
FILL = "scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)  # (..., Lq, Lk)"

VARIANTS = [
    variant(
        "fused_chunk",
        "projection.py",
        [("q, k, v = qkv.split(self.d_model, dim=-1)", "q, k, v = qkv.chunk(3, dim=-1)")],
    ),
    variant(
        "fused_slices",
        "projection.py",
        [
            (
                "q, k, v = qkv.split(self.d_model, dim=-1)",
                "D = self.d_model\n        q, k, v = qkv[..., :D], qkv[..., D:2 * D], qkv[..., 2 * D:]",
            )
        ],
    ),
    variant(
        "attention_einsum",
        "attention.py",
        [
            (ATT_SCORES, "scores = torch.einsum('...qd,...kd->...qk', q, k) / math.sqrt(d_k)"),
            (ATT_OUT, "out = torch.einsum('...qk,...kd->...qd', weights, v)"),
        ],
    ),
    variant(
        "attention_baddbmm",
        "attention.py",
        [
            (
                ATT_SCORES,
                "lead, lq, lk = q.shape[:-2], q.shape[-2], k.shape[-2]\n"
                "    q3, k3 = q.reshape(-1, lq, d_k), k.reshape(-1, lk, d_k)\n"
                "    zeros = torch.zeros(q3.shape[0], lq, lk, dtype=q.dtype, device=q.device)\n"
                "    scores = torch.baddbmm(zeros, q3, k3.transpose(1, 2), beta=0.0, alpha=1 / math.sqrt(d_k))\n"
                "    scores = scores.reshape(*lead, lq, lk)",
            )
        ],
    ),
    variant(
        "attention_scale_query_first", "attention.py", [(ATT_SCORES, "scores = (q / d_k ** 0.5) @ k.transpose(-2, -1)")]
    ),
    variant("softmax_method", "attention.py", [(SOFTMAX, "weights = scores.softmax(dim=-1)")]),
    variant(
        "softmax_by_hand",
        "attention.py",
        [
            (
                SOFTMAX,
                "exp = (scores - scores.amax(dim=-1, keepdim=True)).exp()\n"
                "    weights = exp / exp.sum(dim=-1, keepdim=True)",
            )
        ],
    ),
    variant("mask_fill_minus_1e9", "attention.py", [(FILL, "scores = scores.masked_fill(mask, -1e9)")]),
    variant(
        "mask_additive_float",
        "attention.py",
        [(FILL, "scores = scores + torch.zeros_like(scores).masked_fill(mask, -1e9)")],
    ),
    variant(
        "mask_minus_inf_with_nan_guard",
        "attention.py",
        [
            (FILL, "scores = scores.masked_fill(mask, float('-inf'))"),
            (SOFTMAX, "weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)"),
        ],
    ),
    variant(
        "mask_where", "attention.py", [(FILL, "scores = torch.where(mask, torch.full_like(scores, -1e30), scores)")]
    ),
    variant(
        "heads_unflatten_flatten",
        "heads.py",
        [
            (
                "    x = x.view(B, L, num_heads, d_k)  # (B, L, H, d_k)\n    return x.transpose(1, 2)",
                "    return x.unflatten(-1, (num_heads, d_k)).transpose(1, 2)",
            ),
            (
                "    x = x.transpose(1, 2).contiguous()  # (B, L, H, d_k)\n    return x.view(B, L, H * d_k)",
                "    return x.transpose(1, 2).flatten(2)",
            ),
        ],
    ),
    variant(
        "merge_reshape",
        "heads.py",
        [
            (
                "    x = x.transpose(1, 2).contiguous()  # (B, L, H, d_k)\n    return x.view(B, L, H * d_k)",
                "    return x.transpose(1, 2).reshape(B, L, H * d_k)",
            )
        ],
    ),
    variant(
        "output_permute_reshape",
        "output.py",
        [
            (
                "heads.transpose(1, 2).contiguous().view(B, L, H * d_k)",
                "heads.permute(0, 2, 1, 3).reshape(B, L, H * d_k)",
            )
        ],
    ),
    variant("causal_not_tril", "masking.py", [("return torch.triu(ones, diagonal=1)", "return ~torch.tril(ones)")]),
    variant(
        "padding_mask_unsqueeze",
        "masking.py",
        [("(ids == pad_id)[:, None, None, :]", "ids.eq(pad_id).unsqueeze(1).unsqueeze(2)")],
    ),
    variant(
        "pad_lists_then_tensor",
        "padding.py",
        [
            (
                "    ids = torch.full((len(sequences), L), pad_id, dtype=torch.long)  # (B, L)\n"
                "    pad_mask = torch.ones(len(sequences), L, dtype=torch.bool)  # (B, L)\n"
                "    for b, (seq, n) in enumerate(zip(sequences, lengths)):\n"
                "        ids[b, :n] = torch.tensor(list(seq[:n]), dtype=torch.long)  # (n,)\n"
                "        pad_mask[b, :n] = False  # (n,): 행 b의 실제 토큰 / the real tokens of row b\n",
                "    rows = [list(seq[:n]) + [pad_id] * (L - n) for seq, n in zip(sequences, lengths)]\n"
                "    ids = torch.tensor(rows, dtype=torch.long).reshape(len(sequences), L)  # (B, L)\n"
                "    pad_mask = torch.arange(L)[None, :] >= torch.tensor(lengths)[:, None]  # (B, L)\n",
            )
        ],
    ),
    variant(
        "embedding_functional",
        "embedding.py",
        [
            (
                "return self.embedding(ids)  # (B, L, d_model)",
                "return nn.functional.embedding(ids, self.embedding.weight, padding_idx=self.embedding.padding_idx)",
            )
        ],
    ),
    variant(
        "mha_causal_buffer",
        "mha.py",
        [
            (
                "        self.dropout = nn.Dropout(dropout)\n",
                "        self.dropout = nn.Dropout(dropout)\n"
                "        self.register_buffer('future', torch.triu(torch.ones(256, 256, dtype=torch.bool), diagonal=1),\n"
                "                             persistent=False)\n",
            ),
            ("blocked = torch.ones_like(blocked).triu(diagonal=1)  # (Lq, Lk)", "blocked = self.future[:Lq, :Lk]"),
        ],
    ),
    variant(
        "mha_loop_over_heads",
        "mha.py",
        [
            (
                "        weights = torch.softmax(scores, dim=-1)  # (B, H, Lq, Lk)\n"
                "        weights = self.dropout(weights)  # (B, H, Lq, Lk)\n"
                "        out = merge_heads(weights @ v)  # (B, Lq, D)\n",
                "        heads = []\n"
                "        for h in range(self.num_heads):\n"
                "            w = self.dropout(torch.softmax(scores[:, h], dim=-1))  # (B, Lq, Lk)\n"
                "            heads.append(w @ v[:, h])  # (B, Lq, d_k)\n"
                "        out = torch.cat(heads, dim=-1)  # (B, Lq, D)\n",
            )
        ],
    ),
    variant(
        "mha_additive_mask_minus_inf",
        "mha.py",
        [
            (
                "scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)",
                "scores = scores + torch.zeros_like(scores).masked_fill(blocked, float('-inf'))\n"
                "        scores = scores.nan_to_num(neginf=torch.finfo(scores.dtype).min)",
            )
        ],
    ),
]


# ---------------------------------------------------------------------------- the style gallery
# Whole files written in the styles students meet in the course notebooks, tutorials and
# libraries (issue 12). Each replaces one file of the reference and must score full marks.


class Rewrite:
    """A variant that replaces a whole file (or, with `patches`, edits it) of the reference."""

    def __init__(self, id, file, source=None, patches=()):
        self.id, self.file, self.source, self.patches = id, file, source, list(patches)

    def apply(self, source):
        if self.source is not None:
            return self.source
        return Patched(self.id, self.file, self.patches).apply(source)


MHA_HEADER = '''"""A MultiHeadAttention written in another style (tests/variants.py)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .heads import merge_heads, split_heads
'''

# The body every module below shares from the scores on: mask, softmax, dropout, weighted sum.
ATTEND = """
def attend(module, q, k, v, pad_mask, fill):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)
    Lq, Lk = scores.shape[-2:]
    blocked = torch.zeros(Lq, Lk, dtype=torch.bool, device=scores.device)
    if module.causal:
        blocked = torch.ones_like(blocked).triu(diagonal=1)
    if pad_mask is not None:
        blocked = blocked | pad_mask[:, None, None, :]
    weights = module.dropout(torch.softmax(scores.masked_fill(blocked, fill), dim=-1))
    return merge_heads(weights @ v)  # (B, Lq, D)
"""

INIT = """    def __init__(self, d_model, num_heads, dropout=0.0, bias=True, causal=False):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.d_model, self.num_heads, self.causal = d_model, num_heads, causal
        self.dropout = nn.Dropout(dropout)
"""

GALLERY = [
    # Seeds 000/001, nanoGPT: one fused c_attn, split; c_proj for the output.
    Rewrite(
        "mha_fused_c_attn_split",
        "mha.py",
        MHA_HEADER
        + ATTEND
        + """

class MultiHeadAttention(nn.Module):
"""
        + INIT
        + """        self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.c_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key=None, value=None, pad_mask=None):
        D = self.d_model
        if key is None and value is None:
            q, k, v = self.c_attn(query).split(D, dim=-1)
        else:
            key = query if key is None else key
            value = key if value is None else value
            q = self.c_attn(query)[..., :D]
            k = self.c_attn(key)[..., D:2 * D]
            v = self.c_attn(value)[..., 2 * D:]
        q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))
        return self.c_proj(attend(self, q, k, v, pad_mask, torch.finfo(q.dtype).min))
""",
    ),
    # The student's own step classes, composed.
    Rewrite(
        "mha_composed_own_modules",
        "mha.py",
        MHA_HEADER
        + ATTEND
        + """
from .output import OutputProjection
from .projection import QKVProjection


class MultiHeadAttention(nn.Module):
"""
        + INIT
        + """        self.qkv = QKVProjection(d_model, bias=bias)
        self.out = OutputProjection(d_model, bias=bias)

    def forward(self, query, key=None, value=None, pad_mask=None):
        key = query if key is None else key
        value = key if value is None else value
        q = self.qkv(query)[0]
        k = self.qkv(key)[1]
        v = self.qkv(value)[2]
        q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))
        heads = attend(self, q, k, v, pad_mask, -1e9)  # (B, Lq, D)
        B, Lq, _ = heads.shape
        return self.out(heads.view(B, Lq, self.num_heads, -1).transpose(1, 2))  # OutputProjection merges
""",
    ),
    # Seed 004 / Raschka: other names, a causal mask kept as a float buffer, -inf with a guard,
    # the scale inside the softmax, dropout through F.dropout.
    Rewrite(
        "mha_other_names_float_buffer_minus_inf",
        "mha.py",
        MHA_HEADER
        + """

class MultiHeadAttention(nn.Module):
"""
        + INIT
        + """        self.W_query = nn.Linear(d_model, d_model, bias=bias)
        self.W_key = nn.Linear(d_model, d_model, bias=bias)
        self.W_value = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.register_buffer("mask", torch.triu(torch.ones(64, 64), diagonal=1), persistent=False)

    def forward(self, query, key=None, value=None, pad_mask=None):
        key = query if key is None else key
        value = key if value is None else value
        b, lq, _ = query.shape
        lk = key.shape[1]
        queries = self.W_query(query).view(b, lq, self.num_heads, -1).transpose(1, 2)
        keys = self.W_key(key).view(b, lk, self.num_heads, -1).transpose(1, 2)
        values = self.W_value(value).view(b, lk, self.num_heads, -1).transpose(1, 2)
        scores = queries @ keys.transpose(2, 3)
        blocked = torch.zeros(lq, lk, dtype=torch.bool, device=scores.device)
        if self.causal:
            blocked = self.mask.bool()[:lq, :lk]
        if pad_mask is not None:
            blocked = blocked | pad_mask[:, None, None, :]
        scores = scores.masked_fill(blocked, -torch.inf)
        weights = torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1).nan_to_num(0.0)
        weights = F.dropout(weights, self.dropout.p, training=self.training)
        context = (weights @ values).transpose(1, 2).contiguous().view(b, lq, self.d_model)
        return self.out_proj(context)
""",
    ),
    # Sizes left to the first call.
    Rewrite(
        "mha_lazy_linear",
        "mha.py",
        None,
        [
            (
                f"        self.{name} = nn.Linear(d_model, d_model, bias=bias)\n",
                f"        self.{name} = nn.LazyLinear(d_model, bias=bias)\n",
            )
            for name in ("w_q", "w_k", "w_v", "w_o")
        ],
    ),
    # Production libraries: the softmax in float32, cast back.
    Rewrite(
        "mha_float32_softmax",
        "mha.py",
        None,
        [
            (
                "weights = torch.softmax(scores, dim=-1)  # (B, H, Lq, Lk)",
                "weights = torch.softmax(scores.float(), dim=-1).type_as(scores)",
            ),
            # float64's most negative number is -inf in float32: a fill that float32 can hold.
            (
                "scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)",
                "scores = scores.masked_fill(blocked, -1e9)",
            ),
        ],
    ),
    # A popular tutorial: the scale a float32 tensor (moved to the device), q pre-scaled, einsum.
    Rewrite(
        "mha_einsum_prescaled_float32_scale",
        "mha.py",
        None,
        [
            (
                "scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)",
                "scale = torch.sqrt(torch.tensor([q.size(-1)], dtype=torch.float32, device=q.device))\n"
                "        scores = torch.einsum('bhqd,bhkd->bhqk', q / scale, k)",
            ),
            (
                "out = merge_heads(weights @ v)  # (B, Lq, D)",
                "out = merge_heads(torch.einsum('bhqk,bhkd->bhqd', weights, v))",
            ),
        ],
    ),
    # A padding mask rebuilt from lengths (trailing padding, as pad_batch makes it), -1e4 fill.
    Rewrite(
        "mha_lengths_mask_minus_1e4",
        "mha.py",
        None,
        [
            (
                "blocked = blocked | pad_mask[:, None, None, :]  # (B, 1, Lq, Lk)",
                "lengths = (~pad_mask).sum(-1)  # (B,)\n"
                "            beyond = torch.arange(Lk, device=scores.device)[None, :] >= lengths[:, None]  # (B, Lk)\n"
                "            blocked = blocked | beyond[:, None, None, :]",
            ),
            (
                "scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)",
                "scores = scores.masked_fill(blocked, -1e4)",
            ),
        ],
    ),
    # q, k, v and the output in an nn.ModuleDict with other names.
    Rewrite(
        "mha_module_dict",
        "mha.py",
        None,
        [
            (
                "        self.w_q = nn.Linear(d_model, d_model, bias=bias)\n"
                "        self.w_k = nn.Linear(d_model, d_model, bias=bias)\n"
                "        self.w_v = nn.Linear(d_model, d_model, bias=bias)\n"
                "        self.w_o = nn.Linear(d_model, d_model, bias=bias)\n",
                "        self.proj = nn.ModuleDict({name: nn.Linear(d_model, d_model, bias=bias)\n"
                "                                   for name in ('out', 'value', 'key', 'query')})\n",
            ),
            ("q = split_heads(self.w_q(query)", "q = split_heads(self.proj['query'](query)"),
            ("k = split_heads(self.w_k(key)", "k = split_heads(self.proj['key'](key)"),
            ("v = split_heads(self.w_v(value)", "v = split_heads(self.proj['value'](value)"),
            ("return self.w_o(out)", "return self.proj['out'](out)"),
        ],
    ),
    # Cross-attention style: q on its own, k and v from one fused layer.
    Rewrite(
        "mha_fused_kv",
        "mha.py",
        None,
        [
            (
                "        self.w_k = nn.Linear(d_model, d_model, bias=bias)\n"
                "        self.w_v = nn.Linear(d_model, d_model, bias=bias)\n",
                "        self.to_kv = nn.Linear(d_model, 2 * d_model, bias=bias)\n",
            ),
            (
                "k = split_heads(self.w_k(key), self.num_heads)",
                "k = split_heads(self.to_kv(key).chunk(2, dim=-1)[0], self.num_heads)",
            ),
            (
                "v = split_heads(self.w_v(value), self.num_heads)",
                "v = split_heads(self.to_kv(value).chunk(2, dim=-1)[1], self.num_heads)",
            ),
        ],
    ),
    # attention.py in float32 softmax / a float32 scale tensor / float32 intermediates throughout.
    Rewrite(
        "attention_float32_softmax",
        "attention.py",
        None,
        [
            (SOFTMAX, "weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)"),
            (FILL, "scores = scores.masked_fill(mask, -1e9)"),
        ],
    ),
    Rewrite(
        "attention_float32_scale_tensor",
        "attention.py",
        None,
        [
            (
                ATT_SCORES,
                "scores = q @ k.transpose(-2, -1) / torch.sqrt(torch.tensor([d_k], dtype=torch.float32, "
                "device=q.device))",
            )
        ],
    ),
    Rewrite(
        "attention_float32_intermediates",
        "attention.py",
        None,
        [
            (ATT_SCORES, "scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(d_k)"),
            (FILL, "scores = scores.masked_fill(mask, -1e4)"),
            (ATT_OUT, "out = (weights @ v.float()).to(q.dtype)\n    weights = weights.to(q.dtype)"),
        ],
    ),
    Rewrite("attention_fill_minus_1e4", "attention.py", None, [(FILL, "scores = scores.masked_fill(mask, -1e4)")]),
    # A self-test against PyTorch's own attention, run only as a script: not graded code.
    Rewrite(
        "attention_main_self_test_with_sdpa",
        "attention.py",
        None,
        [
            (
                "    return out, weights\n    ### END SOLUTION\n",
                "    return out, weights\n    ### END SOLUTION\n\n\n"
                'if __name__ == "__main__":\n'
                "    import torch.nn.functional as F\n"
                "    q, k, v = torch.randn(3, 2, 4, 5, 8).unbind(0)  # (B, H, L, d_k) each\n"
                "    mine, _ = scaled_dot_product_attention(q, k, v)\n"
                "    print(torch.allclose(mine, F.scaled_dot_product_attention(q, k, v), atol=1e-6))\n",
            )
        ],
    ),
    # OutputProjection with another name and LazyLinear; FusedQKVProjection with LazyLinear.
    Rewrite(
        "output_lazy_other_name",
        "output.py",
        None,
        [
            ("self.w_o = nn.Linear(d_model, d_model, bias=bias)\n", "self.proj = nn.LazyLinear(d_model, bias=bias)\n"),
            ("return self.w_o(merged)", "return self.proj(merged)"),
        ],
    ),
    # The edges of the source allow-list (issue 21): a dataclass, typing, functools.partial,
    # copy.deepcopy, numpy, a nested class, getattr with an f-string, properties, static and
    # class methods, a torch.no_grad() decorator, register_buffer, ModuleDict, sys.stderr, asserts.
    Rewrite(
        "mha_allow_list_edges",
        "mha.py",
        '''"""A MultiHeadAttention written with what the source allow-list accepts (tests/variants.py)."""
from __future__ import annotations

import copy
import functools
import math
import sys
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch import nn

from .heads import merge_heads, split_heads


@dataclass(frozen=True)
class Sizes:
    d_model: int
    num_heads: int

    @property
    def d_k(self) -> int:
        return self.d_model // self.num_heads


class MultiHeadAttention(nn.Module):
    class Projections(nn.Module):
        def __init__(self, layer: nn.Linear) -> None:
            super().__init__()
            self.layers = nn.ModuleDict({name: copy.deepcopy(layer) for name in "qkvo"})
            for name in "qkvo":
                setattr(self, f"w_{name}", self.layers[name])

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True, causal=False):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.sizes = Sizes(d_model, num_heads)
        self.num_heads, self.causal = num_heads, causal
        linear = functools.partial(nn.Linear, bias=bias)
        self.proj = self.Projections(linear(d_model, d_model))
        for name in "qkvo":  # independent initial weights, as four nn.Linear would have
            self.proj.layers[name].reset_parameters()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("scale", torch.tensor(1 / math.sqrt(self.sizes.d_k)), persistent=False)

    @staticmethod
    def fill(dtype: torch.dtype) -> float:
        return float(np.finfo(np.float32).min) if dtype == torch.float32 else torch.finfo(dtype).min

    @classmethod
    def small(cls) -> "MultiHeadAttention":
        return cls(8, 2)

    @torch.no_grad()
    def weights_only(self, x):
        print("weights of", type(self).__name__, file=sys.stderr)
        return self.forward(x)

    def forward(self, query, key=None, value=None, pad_mask: Optional[torch.Tensor] = None):
        key = query if key is None else key
        value = key if value is None else value
        q, k, v = (
            split_heads(getattr(self.proj, f"w_{name}")(x), self.num_heads)
            for name, x in zip("qkv", (query, key, value))
        )
        assert q.shape[-1] == self.sizes.d_k, "heads of the wrong width"
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * self.scale.to(q.dtype)
        Lq, Lk = scores.shape[-2:]
        blocked = torch.zeros(Lq, Lk, dtype=torch.bool, device=scores.device)
        if self.causal:
            blocked = torch.ones_like(blocked).triu(diagonal=1)
        if pad_mask is not None:
            blocked = blocked | pad_mask[:, None, None, :]
        scores = scores.masked_fill(blocked, self.fill(scores.dtype))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        return self.proj.w_o(merge_heads(weights @ v))
''',
    ),
    Rewrite(
        "fused_lazy",
        "projection.py",
        None,
        [
            (
                "self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)\n",
                "self.c_attn = nn.LazyLinear(3 * d_model, bias=bias)\n",
            )
        ],
    ),
]

VARIANTS += GALLERY

# Correct code in the styles of public implementations (tests/styles.py); the styles that lose
# points today are graded in tests/test_styles.py, as expected failures.
from styles import STYLES_PASSING  # noqa: E402 - after VARIANTS, which it extends

VARIANTS += STYLES_PASSING
