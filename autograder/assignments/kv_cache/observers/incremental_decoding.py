"""Observers of step `incremental_decoding`: the student's offset_causal_mask and cached_attention,
fed a stand-in for a cache (ScriptedCache), so that a mistake in cache.py costs the step
`kv_cache` only."""

import torch

from autograder.harness.contract import ContractError, describe
from autograder.harness.kept import kept
from autograder.harness.trace import tracing


class ScriptedCache:
    """Stands in for the student's KVCache in the steps after it, so that a mistake in cache.py
    costs the step `kv_cache` only. It is no cache to copy: it is given the whole sequence's
    keys and values up front, and answers each update(k, v) with their prefix up to the end of
    that chunk, after checking that the chunk is the next one (a ContractError otherwise). Keys
    given with their heads already repeated for grouped-query attention are accepted too, and so
    are keys or values off by the same vector at every position (a key projection without its
    bias, whose attention is the same: issue 32), answered off by that vector too: what the
    student's code then computes with them decides. `heads`: how many heads each chunk came with
    (the contract's cache holds the H_kv heads of the projections, checked on its own)."""

    def __init__(self, keys, values, length=0):
        # (B, H_kv, L, d_k), (B, H_kv, L, d_v), and how many positions count as cached already
        self.keys, self.values, self.length = keys, values, length
        self.offset = {"k": None, "v": None}  # (B, heads, 1, d): how far the student's chunks are off
        self.heads = []  # the heads of each chunk given to update

    def update(self, k, v):
        end = self.length + (k.shape[-2] if isinstance(k, torch.Tensor) and k.dim() == 4 else 0)
        repeat, self.offset["k"] = _next_chunk("k", k, self.keys[:, :, self.length : end], self.offset["k"])
        repeat_v, self.offset["v"] = _next_chunk("v", v, self.values[:, :, self.length : end], self.offset["v"])
        if repeat_v != repeat:
            raise ContractError(
                "wrong_type",
                name="cache.update(k, v)",
                expected="keys and values with the same heads",
                got=f"{describe(k)} and {describe(v)}",
            )
        self.length = end
        self.heads.append(k.shape[1])
        keys, values = self.keys[:, :, :end], self.values[:, :, :end]  # (B, H_kv, end, d)
        if repeat > 1:
            keys, values = keys.repeat_interleave(repeat, dim=1), values.repeat_interleave(repeat, dim=1)
        return keys + self.offset["k"], values + self.offset["v"]

    def __len__(self):
        return self.length


def _next_chunk(name, got, want, offset=None):
    """(how many times the heads of `want` are repeated in `got` (1: as they are), how far `got` is
    off `want` at every position: (B, heads, 1, d), `offset` where an earlier chunk set it), or a
    ContractError when `got` is not the chunk expected next."""
    expected = f"the next chunk of the sequence, shape {tuple(want.shape)} (B, H_kv, L_new, d)"
    if (
        not isinstance(got, torch.Tensor)
        or got.dim() != 4
        or got.shape[2] != want.shape[2]
        or got.shape[1] % want.shape[1] != 0
    ):
        raise ContractError("wrong_type", name=f"{name} given to cache.update", expected=expected, got=describe(got))
    repeat = got.shape[1] // want.shape[1]
    want = want.repeat_interleave(repeat, dim=1) if repeat > 1 else want
    close = 1e-4 if want.dtype == torch.float32 else 1e-6
    got = got.detach().to(want.dtype)
    if got.shape == want.shape and offset is None and want.shape[2]:
        offset = got[:, :, :1] - want[:, :, :1]
    if offset is None or got.shape != want.shape or offset.shape[1] != got.shape[1]:
        offset = torch.zeros(1, dtype=want.dtype)
    if got.shape != want.shape or not torch.allclose(got, want + offset, rtol=close, atol=close):
        raise ContractError(
            "wrong_type", name=f"{name} given to cache.update", expected=expected, got=f"other values ({describe(got)})"
        )
    return repeat, offset


def decode(decoder, q, k, v, lengths, cache=None):
    """The chunks of `lengths` fed one after the other to `decoder(q, k, v, cache)`; returns
    each chunk's output (a copy, as it was returned: harness/kept.py) and the cache."""
    cache = ScriptedCache(k, v) if cache is None else cache
    outputs, start = [], 0
    for n in lengths:
        chunk = slice(start, start + n)
        outputs.append(kept(decoder(q[:, :, chunk], k[:, :, chunk], v[:, :, chunk], cache)))
        start += n
    return outputs, cache


def chunks(kv, q, k, v, lengths):
    """{"out": each chunk's output}: the sequence fed to cached_attention in chunks of `lengths`."""
    outputs, _ = decode(kv.decode.cached_attention, q, k, v, lengths)
    return {"out": outputs}


def masks(kv, sizes):
    """{"mask_<q>_<k>": offset_causal_mask(q, k)} for each (q, k) of `sizes`."""
    return {f"mask_{q}_{k}": kv.decode.offset_causal_mask(q, k) for q, k in sizes}


def cached_length(kv, q, k, v, lengths):
    """{"cached": len(cache)} after the chunks (each was checked as it came: the next one, in order)."""
    _, cache = decode(kv.decode.cached_attention, q, k, v, lengths)
    return {"cached": len(cache)}


def future_change(kv, q, k, v):
    """{"change"}: how much query 0's output moves when only the chunk's later keys and values change."""
    first = kv.decode.cached_attention(q, k, v, ScriptedCache(k, v))[:, :, 0]  # (B, H, d_v)
    k2, v2 = k.clone(), v.clone()
    k2[:, :, 1:], v2[:, :, 1:] = 10 * k[:, :, 1:], -3 * v[:, :, 1:]  # only the future changes
    second = kv.decode.cached_attention(q, k2, v2, ScriptedCache(k2, v2))[:, :, 0]
    return {"change": (first - second).abs().max().item()}


def traced(kv, q, k, v, lengths):
    """{"calls": [per chunk: what the recorder saw], "outputs": [per chunk]}: cached_attention fed
    the chunks of `lengths` one after the other (localisation, engine/mistakes/localise.py)."""
    cache, calls, outputs, start = ScriptedCache(k, v), [], [], 0
    for n in lengths:
        chunk = slice(start, start + n)
        with tracing(kv) as trace:
            out = kv.decode.cached_attention(q[:, :, chunk], k[:, :, chunk], v[:, :, chunk], cache)
        ok = trace.raised is None and isinstance(out, torch.Tensor)
        calls.append(trace.report([out] if ok else ()))
        if not ok:
            break
        outputs.append(kept(out))
        start += n
    return {"calls": calls, "outputs": outputs}


def traced_masks(kv, sizes):
    """{"calls": [per size: what the recorder saw, ending with the mask]}: offset_causal_mask."""
    calls = []
    for q_len, k_len in sizes:
        with tracing(kv) as trace:
            mask = kv.decode.offset_causal_mask(q_len, k_len)
        calls.append(trace.report([mask] if trace.raised is None else ()))
    return {"calls": calls}


# ### BEGIN HIDDEN CHECKS (observers only hidden checks use: left out of a student release)


def mask_on(kv, q_len, k_len, device):
    """The device, shape and dtype of offset_causal_mask(q_len, k_len, device=torch.device(device))."""
    mask = kv.decode.offset_causal_mask(q_len, k_len, device=torch.device(device))
    return {
        "device": str(getattr(mask, "device", None)),
        "shape": tuple(getattr(mask, "shape", ())),
        "dtype": str(getattr(mask, "dtype", None)),
    }
