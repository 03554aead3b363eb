"""Observers of step `decoder`: the student's whole CachedSelfAttention module, with the earlier
steps' functions it calls written out where they are wrong (harness/earlier.py)."""

import torch
import torch.nn.functional as F

from autograder.assignments.kv_cache.observers.incremental_decoding import ScriptedCache
from autograder.harness import earlier
from autograder.harness.earlier import Earlier
from autograder.harness.kept import kept
from autograder.harness.layers import load_linear
from autograder.harness.trace import tracing

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
    with a ScriptedCache, or the student's own KVCache when `own_cache`; with the earlier steps'
    functions written out too where they are wrong (EARLIER)."""

    def run():
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
                outputs.append(kept(module(x[:, start : start + n], cache)))
                start += n
            return {"out": outputs}

    return earlier.with_earlier_steps(kv, EARLIER, run)


def cache_heads(kv, states, x, n_heads, n_kv_heads, bias, lengths):
    """{"heads": how many heads the keys handed to the cache had, chunk by chunk}: the text fed in
    chunks of `lengths` with a ScriptedCache."""
    module = build(kv, states, n_heads, n_kv_heads, bias)
    d_k = x.shape[-1] // n_heads
    cache = ScriptedCache(heads_of(states, "w_k", x, n_kv_heads, d_k), heads_of(states, "w_v", x, n_kv_heads, d_k))
    start = 0
    with torch.no_grad():
        for n in lengths:
            module(x[:, start : start + n], cache)
            start += n
    return {"heads": list(cache.heads)}


# ---------------------------------------------------------------------------- earlier steps' functions
#
# Each is tried on a probe below; where it is wrong, the instructor's kit runs the module once
# more with it written out (autograder/assignments/kv_cache/written_out.py, never in a student
# release; harness/earlier.py), and the judge decides what the two runs mean.


def _probe(*shapes, seed=2026):
    rng = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=rng, dtype=torch.float64) for shape in shapes]


# Query i of 3 may see keys 0 .. i + 2 of 5 (True = blocked).
_OFFSET_3_5 = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]], dtype=torch.bool)


def _gqa_calls():
    q, k, v = _probe((2, 4, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6))  # H=4, H_kv=2, Lq=3, Lk=5, d_k=4, d_v=6
    return [((q, k, v), {}), ((q, k, v), {"mask": _OFFSET_3_5.clone()})]


def _cached_attention_calls():
    """A chunk of 2 after 3 positions already cached (a fresh stand-in cache each time)."""
    past_k, past_v, q, k, v = _probe((2, 2, 3, 4), (2, 2, 3, 6), (2, 2, 2, 4), (2, 2, 2, 4), (2, 2, 2, 6))
    cache = ScriptedCache(torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2), length=3)
    return [((q, k, v, cache), {})]


def _use_cache(cache_class):
    """What a cache does over a sequence: two updates, its length, a reset, a second instance."""
    k1, v1, k2, v2 = _probe((2, 2, 3, 4), (2, 2, 3, 6), (2, 2, 1, 4), (2, 2, 1, 6), seed=7)
    cache = cache_class()
    first, second = kept(list(cache.update(k1, v1))), kept(list(cache.update(k2, v2)))
    length = torch.tensor(len(cache))
    other = cache_class()
    alone = kept(list(other.update(k2, v2)))
    cache.reset()
    again = kept(list(cache.update(k2, v2)))
    return [first, second, length, alone, again]


EARLIER = earlier.Table(
    "kv_cache",
    ("decoder.py",),
    [
        Earlier("grouped_query_attention", "gqa", "repeat_kv", lambda: [((_probe((2, 2, 3, 4))[0], 2), {})]),
        Earlier("grouped_query_attention", "gqa", "grouped_query_attention", _gqa_calls),
        Earlier(
            "incremental_decoding", "decode", "offset_causal_mask", lambda: [((3, 5), {}), ((4, 4), {}), ((1, 6), {})]
        ),
        Earlier("incremental_decoding", "decode", "cached_attention", _cached_attention_calls),
        Earlier("kv_cache", "cache", "KVCache", exercise=_use_cache),
    ],
)


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


def traced(kv, states, x, n_heads, n_kv_heads, bias, lengths):
    """{"calls": [per chunk: what the recorder saw], "outputs": [per chunk]}: the module fed x in
    chunks of `lengths` with a ScriptedCache, with earlier steps written out too (localisation,
    engine/mistakes/localise.py)."""

    def run():
        module = build(kv, states, n_heads, n_kv_heads, bias)
        d_k, kv_heads = x.shape[-1] // n_heads, n_heads if n_kv_heads is None else n_kv_heads
        cache = ScriptedCache(heads_of(states, "w_k", x, kv_heads, d_k), heads_of(states, "w_v", x, kv_heads, d_k))
        calls, outputs, start = [], [], 0
        with torch.no_grad():
            for n in lengths:
                with tracing(kv) as trace:
                    out = module(x[:, start : start + n], cache)
                ok = trace.raised is None and isinstance(out, torch.Tensor)
                calls.append(trace.report([out] if ok else ()))
                if not ok:
                    break
                outputs.append(out.detach())
                start += n
        return {"calls": calls, "outputs": outputs}

    return earlier.with_earlier_steps(kv, EARLIER, run)
