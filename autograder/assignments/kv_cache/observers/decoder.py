"""Observers of step `decoder`: the student's whole CachedSelfAttention module."""

import torch
import torch.nn.functional as F

from autograder.assignments.kv_cache.observers.incremental_decoding import ScriptedCache
from autograder.harness.layers import load_linear

LAYERS = ("w_q", "w_k", "w_v", "w_o")


def build(kv, states, n_heads, n_kv_heads, bias):
    """The student's module in float64 and eval(), with the grader's weights loaded by name."""
    d_model = states["w_q"]["weight"].shape[1]
    module = kv.decoder.CachedSelfAttention(d_model, n_heads, n_kv_heads, bias=bias).double().eval()
    for name in LAYERS:
        load_linear(module, name, states[name])
    return module


def heads_of(states, name, x, heads, d_k):
    """x through the layer `name` of `states`, split into heads: (B, heads, L, d_k): what a
    ScriptedCache hands back (the keys and values of the whole text, given up front)."""
    batch, length, _ = x.shape  # (B, L, D)
    out = F.linear(x, states[name]["weight"], states[name].get("bias"))  # (B, L, heads * d_k)
    return out.view(batch, length, heads, d_k).transpose(1, 2)  # (B, heads, L, d_k)


def chunks(kv, states, x, n_heads, n_kv_heads, bias, lengths, own_cache=False):
    """{"out": the output of each chunk of `lengths`} (None: the whole text in one call, no cache),
    with a ScriptedCache, or the student's own KVCache when `own_cache`."""
    module = build(kv, states, n_heads, n_kv_heads, bias)
    with torch.no_grad():
        if lengths is None:
            return {"out": [module(x)]}
        d_k, kv_heads = x.shape[-1] // n_heads, n_heads if n_kv_heads is None else n_kv_heads
        cache = (
            kv.cache.KVCache()
            if own_cache
            else ScriptedCache(heads_of(states, "w_k", x, kv_heads, d_k), heads_of(states, "w_v", x, kv_heads, d_k))
        )
        outputs, start = [], 0
        for n in lengths:
            outputs.append(module(x[:, start : start + n], cache))
            start += n
        return {"out": outputs}


def not_divisible(kv, d_model, n_heads, n_kv_heads):
    """{"raised": the exception's type name or None, "message"}: CachedSelfAttention that cannot group."""
    try:
        kv.decoder.CachedSelfAttention(d_model, n_heads, n_kv_heads)
    except NotImplementedError:
        raise
    except ValueError:
        return {"raised": "ValueError"}
    except Exception as error:  # noqa: BLE001 - whatever the student's code raised instead
        return {"raised": type(error).__name__, "message": str(error)[:200]}
    return {"raised": None}
