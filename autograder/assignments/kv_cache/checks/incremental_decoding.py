"""Checks for step `incremental_decoding`: kv_cache/decode.py, offset_causal_mask and
cached_attention.

Oracle: F.scaled_dot_product_attention(q, k, v, is_causal=True) over the WHOLE sequence at
once. Fed to cached_attention chunk by chunk, the sequence must give the same rows. The
student's function gets a stand-in for a cache (observers.ScriptedCache), so that a mistake in
cache.py costs the step `kv_cache` only.
"""

import torch
import torch.nn.functional as F

from autograder.assignments.kv_cache.observers import incremental_decoding as observers
from autograder.engine.checks.check import Check, Fail, randindex, randn, randsize

from ._shared import mask_by_hand

FILES = ["decode.py"]  # what the step grades (scanned for forbidden calls)


def sequence(rng, B=2, H=3, L=6, d_k=4, d_v=5, dtype=torch.float64):
    """q, k (B, H, L, d_k), v (B, H, L, d_v): one whole sequence."""
    return {
        "q": randn(rng, B, H, L, d_k, dtype=dtype),
        "k": randn(rng, B, H, L, d_k, dtype=dtype),
        "v": randn(rng, B, H, L, d_v, dtype=dtype),
    }


def full_causal(q, k, v, lengths):
    """The rows of full causal attention, cut as the chunks are."""
    return list(F.scaled_dot_product_attention(q, k, v, is_causal=True).split(list(lengths), dim=2))


class Decoding(Check):
    """Helper: a sequence fed to cached_attention in chunks of `lengths`, each chunk's output
    against the same rows of full causal attention."""

    lengths = (6,)
    dtype = torch.float64
    shape = {"B": 2, "H": 3, "L": 6, "d_k": 4, "d_v": 5}
    observer = observers.chunks

    def inputs(self, rng):
        return {**sequence(rng, dtype=self.dtype, **self.shape), "lengths": list(self.lengths)}

    def expected(self, q, k, v, lengths):
        return {"out": full_causal(q, k, v, lengths)}


class MaskValues(Check):
    """offset_causal_mask(q_len, k_len) is bool (q_len, k_len), True where key j > k_len - q_len + i:
    tried for (1, 4), (2, 5), (3, 3), (1, 1) and (4, 6)."""

    id = "mask_values"
    weight = 2
    sizes = ((1, 4), (2, 5), (3, 3), (1, 1), (4, 6))
    observer = observers.masks
    arguments = {"sizes": sizes}

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
    observer = observers.cached_length

    def inputs(self, rng):
        return {**sequence(rng), "lengths": [3, 1, 2]}

    def expected(self, q, k, v, lengths):
        return {"cached": k.shape[2]}


# ### BEGIN HIDDEN CHECKS


class RandomMasks(Check):
    """Random (q_len, k_len) with q_len <= k_len, against the reference."""

    id = "random_masks"
    visibility = "hidden"
    observer = observers.masks

    def inputs(self, rng):
        sizes = []
        for first in (True, False, False):
            q_len = randsize(rng, 2, 6)
            # the first pair has cached positions before its queries: else a mask that ignores
            # the offset would pass on the seeds that draw only squares
            sizes.append((q_len, q_len + randindex(rng, 1 if first else 0, 5)))
        return {"sizes": sizes}


class MaskDevice(Check):
    """offset_causal_mask(q_len, k_len, device=...) makes the mask on that device, bool (q_len,
    k_len) (tried with 'meta'). Hidden, as the masking step's causal_mask_device is: the first
    triu on 'meta' loads PyTorch's decompositions; its expectation is written out."""

    id = "mask_device"
    visibility = "hidden"
    observer = observers.mask_on
    arguments = {"q_len": 2, "k_len": 5, "device": "meta"}

    def expected(self):
        return {"device": "meta", "shape": (2, 5), "dtype": "torch.bool"}


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
    observer = observers.future_change

    def inputs(self, rng):
        return sequence(rng, L=3)

    def judge(self, inputs, got, expected, tol):
        if isinstance(got.get("change"), float) and got["change"] > 1e-6:
            return Fail("decode_sees_future", {"change": got["change"]})
        return None


class LocaliseDecoding(Check):
    """Localisation (engine/mistakes/localise.py): a prompt of 3, a token, a chunk of 2, each
    chunk's stages (scores, blocked keys, weights) against the reference's. B=2, H=3, d_k=4,
    d_v=5."""

    diagnosis = "localised"
    localise = True
    observer = observers.traced

    def inputs(self, rng):
        return {**sequence(rng), "lengths": [3, 1, 2]}


class LocaliseMask(Check):
    """Localisation: offset_causal_mask for a prompt of 3, a token after 3 and 2 after 4."""

    diagnosis = "localised"
    localise = True
    observer = observers.traced_masks
    arguments = {"sizes": ((3, 3), (1, 4), (2, 6))}
