"""A held-out set of student mistakes for the diagnosis: whole files written in the styles students
write (not patches of the reference, not the phrasings of tests/planted.py), each with the step
it must lose in and the diagnoses that name it right. Kept apart from what the diagnosis was
tuned on (tests/planted.py, tests/test_localise.py's generated relations): tests/test_heldout.py
measures it and says the figures (named right, named wrong).

An expected name is a known mistake's id or a finding's (`localised.<stage>[.<relation>]`);
several are listed where more than one says the same thing right.
"""

from dataclasses import dataclass, field


@dataclass
class Case:
    name: str
    assignment: str
    step: str
    files: dict  # file name -> its whole source
    names: tuple  # the diagnosis ids that name it right (the first diagnosis must be one)
    also_loses: tuple = field(default_factory=tuple)  # other steps it genuinely breaks


MHA_HEAD = """import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True, causal=False):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.d_model, self.h, self.d_k, self.causal = d_model, num_heads, d_model // num_heads, causal
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

"""


def mha(forward):
    return MHA_HEAD + forward


FORWARD = """    def forward(self, query, key=None, value=None, pad_mask=None):
        key = query if key is None else key
        value = key if value is None else value
        B, Lq, _ = query.shape
        Lk = key.shape[1]
{body}
"""

SPLIT = """        q = self.w_q(query).view(B, Lq, self.h, self.d_k).transpose(1, 2)
        k = self.w_k(key).view(B, Lk, self.h, self.d_k).transpose(1, 2)
        v = self.w_v(value).view(B, Lk, self.h, self.d_k).transpose(1, 2)
"""
MASK = """        if self.causal:
            future = torch.ones(Lq, Lk, dtype=torch.bool, device=query.device).triu(1)
            att = att.masked_fill(future, float("-inf"))
        if pad_mask is not None:
            att = att.masked_fill(pad_mask[:, None, None, :], float("-inf"))
"""
MERGE = """        y = y.transpose(1, 2).contiguous().view(B, Lq, self.d_model)
        return self.w_o(y)
"""


def body(*parts):
    return mha(FORWARD.format(body="".join(parts).rstrip("\n")))


MHA_CASES = [
    Case(
        "softmax_over_heads",
        "mha",
        "multi_head_attention",
        {
            "mha.py": body(
                SPLIT,
                "        att = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)\n",
                MASK,
                "        att = F.softmax(att, dim=1)\n        y = self.drop(att) @ v\n",
                MERGE,
            )
        },
        ("localised.weights.softmax_axis", "mha_softmax_wrong_dim"),
    ),
    Case(
        "scores_divided_by_model_width",
        "mha",
        "multi_head_attention",
        {
            "mha.py": body(
                SPLIT,
                "        att = torch.einsum('bhqd,bhkd->bhqk', q, k) / math.sqrt(self.d_model)\n",
                MASK,
                "        y = self.drop(att.softmax(-1)) @ v\n",
                MERGE,
            )
        },
        ("mha_scale_by_d_model", "localised.scores.factor"),
    ),
    Case(
        "scale_after_softmax",
        "mha",
        "multi_head_attention",
        {
            "mha.py": body(
                SPLIT,
                "        att = q @ k.transpose(-2, -1)\n",
                MASK,
                "        att = att.softmax(-1) / math.sqrt(self.d_k)\n        y = self.drop(att) @ v\n",
                MERGE,
            )
        },
        ("localised.scores.skip.scale@weights",),
    ),
    Case(
        "mask_applied_after_softmax",
        "mha",
        "multi_head_attention",
        {
            "mha.py": body(
                SPLIT,
                "        att = (q @ k.transpose(-2, -1) / math.sqrt(self.d_k)).softmax(dim=-1)\n",
                "        if self.causal:\n"
                "            att = att.masked_fill(torch.ones(Lq, Lk, dtype=torch.bool).triu(1), 0.0)\n"
                "        if pad_mask is not None:\n"
                "            att = att.masked_fill(pad_mask[:, None, None, :], 0.0)\n",
                "        y = self.drop(att) @ v\n",
                MERGE,
            )
        },
        ("localised.masked_scores.skip.mask@weights", "localised.weights.unmasked_only"),
    ),
    Case(
        "padding_mask_kept_tokens",
        "mha",
        "multi_head_attention",
        {
            "mha.py": body(
                SPLIT,
                "        att = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)\n",
                "        if self.causal:\n"
                "            att = att.masked_fill(torch.ones(Lq, Lk, dtype=torch.bool).triu(1), -1e9)\n"
                "        if pad_mask is not None:\n"
                "            keep = pad_mask == 0\n"
                "            att = att.masked_fill(keep.unsqueeze(1).unsqueeze(2), -1e9)\n",
                "        y = self.drop(att.softmax(-1)) @ v\n",
                MERGE,
            )
        },
        ("mha_pad_mask_inverted", "localised.masked_scores.blocked"),
    ),
    Case(
        "causal_keeps_future_blocks_past",
        "mha",
        "multi_head_attention",
        {
            "mha.py": body(
                SPLIT,
                "        att = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)\n",
                "        if self.causal:\n"
                "            lower = torch.tril(torch.ones(Lq, Lk, device=att.device)).bool()\n"
                "            att = att.masked_fill(lower, float('-inf'))\n"
                "        if pad_mask is not None:\n"
                "            att = att.masked_fill(pad_mask[:, None, None, :], float('-inf'))\n",
                "        y = self.drop(torch.nan_to_num(att.softmax(-1))) @ v\n",
                MERGE,
            )
        },
        ("mha_causal_inverted", "localised.masked_scores.blocked"),
    ),
    Case(
        "values_through_the_key_layer",
        "mha",
        "multi_head_attention",
        {
            "mha.py": body(
                "        q = self.w_q(query).view(B, Lq, self.h, self.d_k).transpose(1, 2)\n"
                "        k = self.w_k(key).view(B, Lk, self.h, self.d_k).transpose(1, 2)\n"
                "        v = self.w_k(value).view(B, Lk, self.h, self.d_k).transpose(1, 2)\n",
                "        att = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)\n",
                MASK,
                "        y = self.drop(att.softmax(-1)) @ v\n",
                MERGE,
            )
        },
        ("mha_shared_projection", "localised.v.other_input"),
    ),
    Case(
        "no_output_projection",
        "mha",
        "multi_head_attention",
        {
            "mha.py": body(
                SPLIT,
                "        att = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)\n",
                MASK,
                "        y = self.drop(att.softmax(-1)) @ v\n",
                "        return y.transpose(1, 2).reshape(B, Lq, self.d_model)\n",
            )
        },
        ("localised.out.skip.output_projection",),
    ),
    Case(
        "heads_reversed_on_merge",
        "mha",
        "multi_head_attention",
        {
            "mha.py": body(
                SPLIT,
                "        att = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)\n",
                MASK,
                "        y = self.drop(att.softmax(-1)) @ v\n",
                "        y = y.flip(1)  # (heads in the order the paper draws them)\n",
                MERGE,
            )
        },
        # (the heads flipped between attention and the merge: "the merged heads, reversed along H"
        # names it as well as "the heads' outputs, reversed"; the first was not foreseen here)
        ("localised.heads_out.slice_map", "localised.merged.slice_map"),
    ),
    Case(
        "masked_with_zero",
        "mha",
        "multi_head_attention",
        {
            "mha.py": body(
                SPLIT,
                "        att = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)\n",
                "        blocked = torch.zeros(Lq, Lk, dtype=torch.bool, device=att.device)\n"
                "        if self.causal:\n"
                "            blocked = torch.ones_like(blocked).triu(1)\n"
                "        if pad_mask is not None:\n"
                "            blocked = blocked | pad_mask[:, None, None, :]\n"
                "        att = att * (~blocked)\n",
                "        y = self.drop(att.softmax(-1)) @ v\n",
                MERGE,
            )
        },
        ("mha_mask_fill_zero", "localised.masked_scores.masked_only"),
    ),
    Case(
        "key_from_the_query",
        "mha",
        "multi_head_attention",
        {
            "mha.py": body(
                "        q = self.w_q(query).view(B, Lq, self.h, self.d_k).transpose(1, 2)\n"
                "        k = self.w_k(query).view(B, Lq, self.h, self.d_k).transpose(1, 2)\n"
                "        v = self.w_v(value).view(B, Lk, self.h, self.d_k).transpose(1, 2)\n",
                "        att = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)\n",
                MASK,
                "        y = self.drop(att.softmax(-1)) @ v\n",
                MERGE,
            )
        },
        ("mha_ignores_key", "localised.k.other_input"),
    ),
    Case(
        "split_view_only_merge_view_only",
        "mha",
        "multi_head_attention",
        {
            "mha.py": body(
                "        q = self.w_q(query).reshape(B, self.h, Lq, self.d_k)\n"
                "        k = self.w_k(key).reshape(B, self.h, Lk, self.d_k)\n"
                "        v = self.w_v(value).reshape(B, self.h, Lk, self.d_k)\n",
                "        att = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)\n",
                MASK,
                "        y = self.drop(att.softmax(-1)) @ v\n",
                "        return self.w_o(y.reshape(B, Lq, self.d_model))\n",
            )
        },
        # the known mistake since it was added from the corpus (a held-out case of its own before)
        ("mha_split_and_merge_without_transpose", "localised.q_heads.skip.split_transpose+merge_transpose"),
    ),
    Case(
        "dropout_never_called",
        "mha",
        "multi_head_attention",
        {
            "mha.py": body(
                SPLIT,
                "        att = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)\n",
                MASK,
                "        y = att.softmax(-1) @ v\n",
                MERGE,
            )
        },
        # the known mistake (p never reaches a dropout) is the same observation, and true of this code
        ("localised.dropped.skip.dropout", "dropout_p_ignored"),
    ),
    Case(
        "sequence_first",
        "mha",
        "multi_head_attention",
        {
            "mha.py": mha(
                """    def forward(self, query, key=None, value=None, pad_mask=None):
        key = query if key is None else key
        value = key if value is None else value
        L, N, E = query.shape  # (L, N, E), as nn.MultiheadAttention
        S = key.shape[0]
        q = self.w_q(query).reshape(L, N * self.h, self.d_k).transpose(0, 1)
        k = self.w_k(key).reshape(S, N * self.h, self.d_k).transpose(0, 1)
        v = self.w_v(value).reshape(S, N * self.h, self.d_k).transpose(0, 1)
        att = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(self.d_k)
        if self.causal:
            att = att.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
        att = self.drop(att.softmax(-1))
        y = torch.bmm(att, v).transpose(0, 1).reshape(L, N, E)
        return self.w_o(y)
"""
            )
        },
        ("localised.q_heads.layout",),
    ),
]


CACHE = """import torch


class KVCache:
{body}
"""
DECODE_HEAD = """import math

import torch


def offset_causal_mask(q_len, k_len, device=None):
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).triu(k_len - q_len + 1)


"""

KV_CASES = [
    Case(
        "reset_keeps_its_counter",
        "kv_cache",
        "kv_cache",
        {
            "cache.py": CACHE.format(
                body="""    def __init__(self):
        self.keys, self.values, self.seen = [], [], 0

    def update(self, k, v):
        self.keys.append(k)
        self.values.append(v)
        self.seen += k.shape[-2]
        return torch.cat(self.keys, dim=-2), torch.cat(self.values, dim=-2)

    def __len__(self):
        return self.seen

    def reset(self):
        self.keys, self.values = [], []"""
            )
        },
        ("localised.cache_len.skip.reset", "cache_reset_keeps"),
    ),
    Case(
        "cache_along_heads",
        "kv_cache",
        "kv_cache",
        {
            "cache.py": CACHE.format(
                body="""    def __init__(self):
        self.k = self.v = None

    def update(self, k, v):
        self.k = k if self.k is None else torch.cat((self.k, k), 1)
        self.v = v if self.v is None else torch.cat((self.v, v), 1)
        return self.k, self.v

    def __len__(self):
        return 0 if self.k is None else self.k.shape[2]

    def reset(self):
        self.k = self.v = None"""
            )
        },
        ("cache_wrong_dim", "localised.cache_K.raised"),
    ),
    Case(
        "length_counts_calls",
        "kv_cache",
        "kv_cache",
        {
            "cache.py": CACHE.format(
                body="""    def __init__(self):
        self.k, self.v, self.calls = None, None, 0

    def update(self, k, v):
        self.calls += 1
        if self.k is None:
            self.k, self.v = k, v
        else:
            self.k, self.v = torch.cat([self.k, k], 2), torch.cat([self.v, v], 2)
        return self.k, self.v

    def __len__(self):
        return self.calls

    def reset(self):
        self.k, self.v, self.calls = None, None, 0"""
            )
        },
        ("cache_len_counts_updates", "localised.cache_len.other_input"),
    ),
    Case(
        "storage_in_the_class",
        "kv_cache",
        "kv_cache",
        {
            "cache.py": CACHE.format(
                body="""    ks = []
    vs = []

    def update(self, k, v):
        self.ks.append(k)
        self.vs.append(v)
        return torch.cat(self.ks, 2), torch.cat(self.vs, 2)

    def __len__(self):
        return sum(k.shape[2] for k in self.ks)

    def reset(self):
        self.ks.clear()
        self.vs.clear()"""
            )
        },
        # (the lists outlive every cache: the first update of the probe's new cache already raises
        # on leftovers of earlier ones; "kept from before, a class attribute" names it)
        ("cache_shared_between_instances", "localised.cache_K.other_input", "localised.cache_K.kept_from_before"),
    ),
    Case(
        "offset_from_length_minus_one",
        "kv_cache",
        "incremental_decoding",
        {
            "decode.py": DECODE_HEAD
            + """def cached_attention(q, k, v, cache):
    first = max(len(cache) - 1, 0)  # index of the first new query
    K, V = cache.update(k, v)
    n, total = q.shape[-2], K.shape[-2]
    att = q @ K.transpose(-2, -1) / math.sqrt(q.shape[-1])
    rows = torch.arange(first, first + n, device=q.device)[:, None]
    cols = torch.arange(total, device=q.device)[None, :]
    att = att.masked_fill(cols > rows, -1e9)
    return att.softmax(-1) @ V
"""
        },
        ("localised.masked_scores.blocked",),
    ),
    Case(
        "mask_of_the_chunk",
        "kv_cache",
        "incremental_decoding",
        {
            "decode.py": DECODE_HEAD
            + """def cached_attention(q, k, v, cache):
    K, V = cache.update(k, v)
    n = q.shape[-2]
    att = q @ K.transpose(-2, -1) / math.sqrt(q.shape[-1])
    att = att.masked_fill(offset_causal_mask(n, n, q.device), float("-inf"))
    return torch.softmax(att, dim=-1) @ V
"""
        },
        ("decode_mask_for_chunk_only", "localised.masked_scores.raised"),
    ),
    Case(
        "attends_to_the_chunk_only",
        "kv_cache",
        "incremental_decoding",
        {
            "decode.py": DECODE_HEAD
            + """def cached_attention(q, k, v, cache):
    cache.update(k, v)
    n = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    att = att.masked_fill(offset_causal_mask(n, n, q.device), -1e9)
    return att.softmax(-1) @ v
"""
        },
        ("decode_ignores_cache", "localised.raw_scores.skip.cache"),
    ),
    Case(
        "kv_heads_tiled",
        "kv_cache",
        "grouped_query_attention",
        {
            "gqa.py": """import math

import torch


def repeat_kv(x, n_rep):
    return torch.cat([x] * n_rep, dim=1)


def grouped_query_attention(q, k, v, mask=None):
    H, H_kv = q.shape[1], k.shape[1]
    if H % H_kv:
        raise ValueError("heads")
    k, v = repeat_kv(k, H // H_kv), repeat_kv(v, H // H_kv)
    att = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        att = att.masked_fill(mask, -1e9)
    return att.softmax(-1) @ v
"""
        },
        ("kv_heads_tiled", "localised.k_rep.slice_map"),
    ),
    Case(
        "square_mask_with_a_cache",
        "kv_cache",
        "decoder",
        {
            "decoder.py": """import torch
import torch.nn as nn

from .gqa import grouped_query_attention


class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, bias=False):
        super().__init__()
        n_kv_heads = n_kv_heads or n_heads
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("bad head counts")
        self.h, self.h_kv, self.hd = n_heads, n_kv_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.hd, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.hd, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        q = self.w_q(x).view(B, T, self.h, self.hd).transpose(1, 2)
        k = self.w_k(x).view(B, T, self.h_kv, self.hd).transpose(1, 2)
        v = self.w_v(x).view(B, T, self.h_kv, self.hd).transpose(1, 2)
        if cache is not None:
            k, v = cache.update(k, v)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        y = grouped_query_attention(q, k, v, mask)
        return self.w_o(y.transpose(1, 2).reshape(B, T, C))
"""
        },
        ("localised.masked_scores.raised",),
    ),
    Case(
        "decoder_restarts_positions",
        "kv_cache",
        "decoder",
        {
            "decoder.py": """import torch
import torch.nn as nn

from .gqa import grouped_query_attention


class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, bias=False):
        super().__init__()
        n_kv_heads = n_kv_heads or n_heads
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("bad head counts")
        self.h, self.h_kv, self.hd = n_heads, n_kv_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.hd, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.hd, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        q = self.w_q(x).view(B, T, self.h, self.hd).transpose(1, 2)
        k = self.w_k(x).view(B, T, self.h_kv, self.hd).transpose(1, 2)
        v = self.w_v(x).view(B, T, self.h_kv, self.hd).transpose(1, 2)
        if cache is not None:
            k, v = cache.update(k, v)
        S = k.shape[2]
        mask = torch.triu(torch.ones(T, S, dtype=torch.bool, device=x.device), diagonal=1)
        y = grouped_query_attention(q, k, v, mask)
        return self.w_o(y.transpose(1, 2).reshape(B, T, C))
"""
        },
        ("decoder_positions_restart", "localised.masked_scores.blocked"),
    ),
]

CASES = MHA_CASES + KV_CASES
