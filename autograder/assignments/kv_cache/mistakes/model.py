"""The kv_cache assignment written once more, with one knob per known way of getting it wrong.

`package(**knobs)` returns an object shaped like a student's `kv_cache` package (`.cache.KVCache`,
`.decode.offset_causal_mask`, `.decode.cached_attention`, `.gqa.repeat_kv`,
`.gqa.grouped_query_attention`, `.decoder.CachedSelfAttention`). With no knobs it is correct (a
test holds it to every check); each knob changes one part of the computation, e.g.
`cache_dim=1` or `repeat="tile"`. A known mistake (mistakes/<step>.py) is a list of knob
settings: it is recognised by what it computes, so every way of writing it that computes the
same thing is recognised too.

Instructor-only, like the rest of mistakes/: it is a second reference.
"""

import math
from types import SimpleNamespace

import torch
import torch.nn as nn

DEFAULTS = {
    # cache
    "cache_dim": 2,  # the axis chunks are concatenated on (1: heads, 3: features)
    "cache_order": "append",  # "prepend": the new chunk before the old ones
    "cache_keep": "all",  # "last": each update replaces the cache with the chunk
    "cache_len": "tokens",  # "updates": counts calls; "heads": size of dim 1
    "cache_reset": "clear",  # "noop": reset() forgets nothing
    "cache_storage": "instance",  # "class": lists in the class body, shared by every cache
    "cache_values": "values",  # "keys": an update to a filled cache stores the keys so far as values
    # incremental decoding
    "offset": "end",  # where a chunk's first query sits: "zero" (restart), "plus_one", "minus_one"
    "decode_keys": "cache",  # "chunk": update, then attend over the chunk only; "no_update": never update
    "decode_mask": "offset",  # "none": no mask; "chunk_len": the mask of a (L_new, L_new) square
    "decode_scale": True,
    "decode_mask_device": True,  # False: offset_causal_mask makes its mask on the default device
    # grouped-query attention
    "repeat": "interleave",  # "tile": x.repeat (head h gets kv head h % H_kv); "seq": along dim 2; "none"
    "gqa_check": "raise",  # "none": no ValueError for H not a multiple of H_kv
    "gqa_scale": True,
    "gqa_mask": "fill",  # "ignored"
    # the module
    "dec_positions": "cache",  # "restart": the top-left causal mask, blind to the cached positions
    "dec_kv_width": "n_kv",  # "d_model": w_k, w_v with d_model outputs
    "dec_merge": "transpose",  # "view": heads merged without the transpose
    "dec_cache": "use",  # "ignore": never appends to the cache; "dropped": appends, then uses the chunk's own
    "dec_check": "raise",  # "none": no ValueError for n_heads not a multiple of n_kv_heads
    "dec_cache_heads": "kv",  # "repeated": the cache gets k, v repeated for the query heads
    "dec_kv_view": "kv",  # "query": k, v viewed with the query's head count (n_heads)
    "dec_mask": "always",  # "without_cache": the causal mask only where no cache is given
}


def package(**knobs):
    """A kv_cache-like package computing everything with `knobs` changed from the defaults."""
    unknown = set(knobs) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown knobs: {sorted(unknown)}")
    K = SimpleNamespace(**{**DEFAULTS, **knobs})
    return SimpleNamespace(
        cache=SimpleNamespace(KVCache=kv_cache(K)),
        decode=SimpleNamespace(
            offset_causal_mask=lambda q_len, k_len, device=None: offset_causal_mask(K, q_len, k_len, device),
            cached_attention=lambda q, k, v, cache: cached_attention(K, q, k, v, cache),
        ),
        gqa=SimpleNamespace(
            repeat_kv=lambda x, n_rep: repeat_kv(K, x, n_rep),
            grouped_query_attention=lambda q, k, v, mask=None: grouped_query_attention(K, q, k, v, mask),
        ),
        decoder=SimpleNamespace(CachedSelfAttention=cached_self_attention(K)),
    )


# ---------------------------------------------------------------------------- cache


def kv_cache(K):
    class KVCache:
        shared = {"k": None, "v": None, "calls": 0}  # used with cache_storage="class" only

        def __init__(self):
            self.state = KVCache.shared if K.cache_storage == "class" else {"k": None, "v": None, "calls": 0}

        def update(self, k, v):
            s = self.state
            s["calls"] += 1
            if s["k"] is None or K.cache_keep == "last":
                s["k"], s["v"] = k, v
            else:
                old, new = ((s["k"], k), (s["v"], v)) if K.cache_order == "append" else ((k, s["k"]), (v, s["v"]))
                if K.cache_values == "keys":  # the values so far replaced by the keys so far
                    new = (s["k"], v) if K.cache_order == "append" else (v, s["k"])
                s["k"], s["v"] = torch.cat(old, dim=K.cache_dim), torch.cat(new, dim=K.cache_dim)
            return s["k"], s["v"]

        def __len__(self):
            s = self.state
            if s["k"] is None:
                return 0
            return {"tokens": s["k"].size(2), "updates": s["calls"], "heads": s["k"].size(1)}[K.cache_len]

        def reset(self):
            if K.cache_reset == "clear":
                self.state.update(k=None, v=None, calls=0)

    return KVCache


# ---------------------------------------------------------------------------- decoding


def offset_causal_mask(K, q_len, k_len, device=None):
    offset = {"end": k_len - q_len, "zero": 0, "plus_one": k_len - q_len + 1, "minus_one": k_len - q_len - 1}[K.offset]
    device = device if K.decode_mask_device else None
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).triu(diagonal=offset + 1)


def attend(q, k, v, blocked, scale):
    scores = q @ k.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(q.size(-1))
    if blocked is not None:
        scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) @ v


def cached_attention(K, q, k, v, cache):
    if K.decode_keys != "no_update":
        keys, values = cache.update(k, v)
    if K.decode_keys != "cache":
        keys, values = k, v
    L_new, L = q.size(-2), keys.size(-2)
    blocked = {
        "offset": lambda: offset_causal_mask(K, L_new, L, q.device),
        "none": lambda: None,
        "chunk_len": lambda: offset_causal_mask(K, L_new, L_new, q.device),
    }[K.decode_mask]()
    return attend(q, keys, values, blocked, K.decode_scale)


# ---------------------------------------------------------------------------- grouped-query attention


def repeat_kv(K, x, n_rep):
    if K.repeat == "interleave":
        return x.repeat_interleave(n_rep, dim=1)
    if K.repeat == "tile":
        return x.repeat(1, n_rep, 1, 1)
    if K.repeat == "seq":
        return x.repeat_interleave(n_rep, dim=2)
    if K.repeat == "none":
        return x
    raise ValueError(K.repeat)


def grouped_query_attention(K, q, k, v, mask=None):
    H, H_kv = q.size(1), k.size(1)
    if H % H_kv != 0 and K.gqa_check == "raise":
        raise ValueError("not a multiple")
    k, v = repeat_kv(K, k, H // H_kv), repeat_kv(K, v, H // H_kv)
    return attend(q, k, v, mask if K.gqa_mask == "fill" else None, K.gqa_scale)


# ---------------------------------------------------------------------------- the module


def cached_self_attention(K):
    class CachedSelfAttention(nn.Module):
        def __init__(self, d_model, n_heads, n_kv_heads=None, bias=False):
            super().__init__()
            n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
            if d_model % n_heads != 0:
                raise ValueError("not divisible")
            if n_heads % n_kv_heads != 0 and K.dec_check == "raise":
                raise ValueError("not a multiple")
            self.n_heads, self.n_kv_heads, self.d_k = n_heads, n_kv_heads, d_model // n_heads
            kv_width = n_kv_heads * self.d_k if K.dec_kv_width == "n_kv" else d_model
            self.w_q = nn.Linear(d_model, d_model, bias=bias)
            self.w_k = nn.Linear(d_model, kv_width, bias=bias)
            self.w_v = nn.Linear(d_model, kv_width, bias=bias)
            self.w_o = nn.Linear(d_model, d_model, bias=bias)

        def forward(self, x, cache=None):
            B, L, D = x.shape
            q = self.w_q(x).view(B, L, self.n_heads, self.d_k).transpose(1, 2)
            kv_heads = -1 if K.dec_kv_view == "kv" else self.n_heads
            k = self.w_k(x).view(B, L, kv_heads, self.d_k).transpose(1, 2)
            v = self.w_v(x).view(B, L, kv_heads, self.d_k).transpose(1, 2)
            if K.dec_cache_heads == "repeated":
                k, v = repeat_kv(K, k, self.n_heads // k.size(1)), repeat_kv(K, v, self.n_heads // v.size(1))
            if cache is not None and K.dec_cache != "ignore":
                cached = cache.update(k, v)
                k, v = cached if K.dec_cache == "use" else (k, v)
            if K.dec_positions == "cache":
                blocked = offset_causal_mask(K, L, k.size(2), x.device)
            else:
                blocked = torch.ones(L, k.size(2), dtype=torch.bool, device=x.device).triu(diagonal=1)
            if K.dec_mask == "without_cache" and cache is not None:
                blocked = None
            out = grouped_query_attention(K, q, k, v, blocked)
            if K.dec_merge == "transpose":
                out = out.transpose(1, 2)
            return self.w_o(out.contiguous().view(B, L, D))

    return CachedSelfAttention
