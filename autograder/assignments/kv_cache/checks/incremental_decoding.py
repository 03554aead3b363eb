"""Checks for step `incremental_decoding`: kv_cache/decode.py, offset_causal_mask and
cached_attention.

Oracle: F.scaled_dot_product_attention(q, k, v, is_causal=True) over the WHOLE sequence at
once. Fed to cached_attention chunk by chunk, the sequence must give the same rows. The
student's function gets a stand-in for a cache (ScriptedCache), so that a mistake in cache.py
costs the step `kv_cache` only.
"""

import torch
import torch.nn.functional as F

from autograder.engine.check import Check, ContractError, Fail, describe, randindex, randn, randsize

FILES = ["decode.py"]  # what the step grades (scanned for forbidden calls)


class ScriptedCache:
    """Stands in for the student's KVCache in the steps after it, so that a mistake in cache.py
    costs the step `kv_cache` only. It is no cache to copy: it is given the whole sequence's
    keys and values up front, and answers each update(k, v) with their prefix up to the end of
    that chunk, after checking that the chunk is the next one (a ContractError otherwise). Keys
    given with their heads already repeated for grouped-query attention are accepted too."""

    def __init__(self, keys, values):
        self.keys, self.values, self.length = keys, values, 0  # (B, H_kv, L, d_k), (B, H_kv, L, d_v)

    def update(self, k, v):
        end = self.length + (k.shape[-2] if isinstance(k, torch.Tensor) and k.dim() == 4 else 0)
        repeat = _next_chunk("k", k, self.keys[:, :, self.length : end])
        if _next_chunk("v", v, self.values[:, :, self.length : end]) != repeat:
            raise ContractError(
                "wrong_type",
                name="cache.update(k, v)",
                expected="keys and values with the same heads",
                got=f"{describe(k)} and {describe(v)}",
            )
        self.length = end
        keys, values = self.keys[:, :, :end], self.values[:, :, :end]  # (B, H_kv, end, d)
        if repeat > 1:
            keys, values = keys.repeat_interleave(repeat, dim=1), values.repeat_interleave(repeat, dim=1)
        return keys, values

    def __len__(self):
        return self.length


def _next_chunk(name, got, want):
    """How many times the heads of `want` are repeated in `got` (1: as they are), or a
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
    if got.shape != want.shape or not torch.allclose(got.detach().to(want.dtype), want, rtol=close, atol=close):
        raise ContractError(
            "wrong_type", name=f"{name} given to cache.update", expected=expected, got=f"other values ({describe(got)})"
        )
    return repeat


def mask_by_hand(q_len, k_len):
    """Query i sits at position k_len - q_len + i and may see keys 0..that: True = blocked."""
    return torch.tensor([[j > k_len - q_len + i for j in range(k_len)] for i in range(q_len)])


def sequence(rng, B=2, H=3, L=6, d_k=4, d_v=5, dtype=torch.float64):
    """q, k (B, H, L, d_k), v (B, H, L, d_v): one whole sequence."""
    return {
        "q": randn(rng, B, H, L, d_k, dtype=dtype),
        "k": randn(rng, B, H, L, d_k, dtype=dtype),
        "v": randn(rng, B, H, L, d_v, dtype=dtype),
    }


def decode(decoder, q, k, v, lengths, cache=None):
    """The chunks of `lengths` fed one after the other to `decoder(q, k, v, cache)`; returns
    each chunk's output and the cache."""
    cache = ScriptedCache(k, v) if cache is None else cache
    outputs, start = [], 0
    for n in lengths:
        chunk = slice(start, start + n)
        outputs.append(decoder(q[:, :, chunk], k[:, :, chunk], v[:, :, chunk], cache))
        start += n
    return outputs, cache


def full_causal(q, k, v, lengths):
    """The rows of full causal attention, cut as the chunks are."""
    return list(F.scaled_dot_product_attention(q, k, v, is_causal=True).split(list(lengths), dim=2))


class Decoding(Check):
    """Helper: a sequence fed to cached_attention in chunks of `lengths`, each chunk's output
    against the same rows of full causal attention."""

    lengths = (6,)
    dtype = torch.float64
    shape = {"B": 2, "H": 3, "L": 6, "d_k": 4, "d_v": 5}

    def inputs(self, rng):
        return {**sequence(rng, dtype=self.dtype, **self.shape), "lengths": list(self.lengths)}

    def observe(self, kv, q, k, v, lengths):
        outputs, _ = decode(kv.decode.cached_attention, q, k, v, lengths)
        return {"out": outputs}

    def expected(self, q, k, v, lengths):
        return {"out": full_causal(q, k, v, lengths)}


class MaskValues(Check):
    """offset_causal_mask(q_len, k_len) is bool (q_len, k_len), True where key j > k_len - q_len + i:
    tried for (1, 4), (2, 5), (3, 3), (1, 1) and (4, 6)."""

    id = "mask_values"
    weight = 2
    sizes = ((1, 4), (2, 5), (3, 3), (1, 1), (4, 6))

    def observe(self, kv):
        return {f"mask_{q}_{k}": kv.decode.offset_causal_mask(q, k) for q, k in self.sizes}

    def expected(self):
        return {f"mask_{q}_{k}": mask_by_hand(q, k) for q, k in self.sizes}


class WholePrompt(Decoding):
    """One chunk, the whole sequence (an empty cache, the prompt): ordinary causal attention.
    B=2, H=3, L=6, d_k=4, d_v=5."""

    id = "whole_prompt"
    weight = 2


class TokenByToken(Decoding):
    """One token at a time, six times: token p attends to keys 0..p."""

    id = "token_by_token"
    lengths = (1, 1, 1, 1, 1, 1)
    weight = 3


class PromptThenTokens(Decoding):
    """A prompt of 3 tokens, then 1, then a chunk of 2: query i of a chunk sits at position
    len(cache before) + i."""

    id = "prompt_then_tokens"
    lengths = (3, 1, 2)
    weight = 3


class Float32(Decoding):
    """float32 inputs give float32 outputs of the same values."""

    id = "float32"
    lengths = (2, 1, 3)
    dtype = torch.float32
    shape = {"B": 2, "H": 3, "L": 6, "d_k": 8, "d_v": 5}


class AppendsToCache(Check):
    """cached_attention appends each chunk to the cache it is given: after three chunks the
    cache holds all keys and values of the sequence, in order."""

    id = "appends_to_cache"

    def inputs(self, rng):
        return {**sequence(rng), "lengths": [3, 1, 2]}

    def observe(self, kv, q, k, v, lengths):
        _, cache = decode(kv.decode.cached_attention, q, k, v, lengths)
        return {"cached": len(cache)}  # each chunk was checked as it came: the next one, in order

    def expected(self, q, k, v, lengths):
        return {"cached": k.shape[2]}


# ### BEGIN HIDDEN CHECKS


class RandomMasks(Check):
    """Random (q_len, k_len) with q_len <= k_len, against the reference."""

    id = "random_masks"
    visibility = "hidden"

    def inputs(self, rng):
        sizes = []
        for first in (True, False, False):
            q_len = randsize(rng, 2, 6)
            # the first pair has cached positions before its queries: else a mask that ignores
            # the offset would pass on the seeds that draw only squares
            sizes.append((q_len, q_len + randindex(rng, 1 if first else 0, 5)))
        return {"sizes": sizes}

    def observe(self, kv, sizes):
        return {f"mask_{q}_{k}": kv.decode.offset_causal_mask(q, k) for q, k in sizes}


class RandomChunks(Decoding):
    """Random sizes and a random cut into chunks (single tokens among them), against the reference."""

    id = "random_chunks"
    visibility = "hidden"
    weight = 3

    def inputs(self, rng):
        lengths = [randsize(rng, 2, 4)] + [1] * randsize(rng, 2, 4) + [randsize(rng, 2, 4), 1]
        shape = {
            "B": randsize(rng, 2, 4),
            "H": randsize(rng, 2, 5),
            "L": sum(lengths),
            "d_k": randsize(rng, 2, 9),
            "d_v": randsize(rng, 2, 9),
        }
        return {**sequence(rng, **shape), "lengths": lengths}

    def expected(self, q, k, v, lengths):  # the built-in oracle, not only the reference
        return {"out": full_causal(q, k, v, lengths)}


# ### PROBES (unscored: run when the step fails, to explain why)


class SeesTheFuture(Check):
    """Within one chunk, query 0 must not depend on the chunk's later keys and values."""

    diagnosis = "decode_sees_future"

    def inputs(self, rng):
        return sequence(rng, L=3)

    def observe(self, kv, q, k, v):
        first = kv.decode.cached_attention(q, k, v, ScriptedCache(k, v))[:, :, 0]  # (B, H, d_v)
        k2, v2 = k.clone(), v.clone()
        k2[:, :, 1:], v2[:, :, 1:] = 10 * k[:, :, 1:], -3 * v[:, :, 1:]  # only the future changes
        second = kv.decode.cached_attention(q, k2, v2, ScriptedCache(k2, v2))[:, :, 0]
        return {"change": (first - second).abs().max().item()}

    def judge(self, inputs, got, expected, tol):
        if isinstance(got.get("change"), float) and got["change"] > 1e-6:
            return Fail("decode_sees_future", {"change": got["change"]})
        return None
