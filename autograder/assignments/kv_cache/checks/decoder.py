"""Checks for step `decoder`: kv_cache/decoder.py, CachedSelfAttention.

Oracle: the same weights run through F.linear and F.scaled_dot_product_attention(is_causal=True,
enable_gqa=True) over the whole text at once. This is the integration step: it runs the
student's whole module (which uses decode.py and gqa.py), and once the student's own KVCache.
Where one of those earlier steps' functions is wrong, the module is also run with it written out,
and is right when that run is (engine/checks/earlier.py): the mistake is charged in its own step alone.
"""

import torch.nn.functional as F

from autograder.assignments.kv_cache.observers import decoder as observers
from autograder.engine.checks.check import Check, compare, linear_state, raised_verdict, randn, randsize
from autograder.engine.checks.earlier import judge_with_earlier_steps

FILES = ["decoder.py"]  # what the step grades (scanned for forbidden calls)
INTEGRATES = True  # runs the whole module: a mistake of an earlier step may cost points here too

LAYERS = ("w_q", "w_k", "w_v", "w_o")


def weights(rng, d_model, n_heads, n_kv_heads, bias):
    """Random weights of the four projections; w_k and w_v have n_kv_heads * d_k outputs."""
    kv_width = n_kv_heads * (d_model // n_heads)
    return {
        "w_q": linear_state(rng, d_model, d_model, bias),
        "w_k": linear_state(rng, d_model, kv_width, bias),
        "w_v": linear_state(rng, d_model, kv_width, bias),
        "w_o": linear_state(rng, d_model, d_model, bias),
    }


def project(states, name, x, heads, d_k):
    """x through the layer `name` of `states`, split into heads: (B, heads, L, d_k)."""
    batch, length, _ = x.shape  # (B, L, D)
    out = F.linear(x, states[name]["weight"], states[name].get("bias"))  # (B, L, heads * d_k)
    return out.view(batch, length, heads, d_k).transpose(1, 2)  # (B, heads, L, d_k)


def oracle(states, x, n_heads, n_kv_heads):
    """Causal GQA self-attention over the whole text, from PyTorch's functions."""
    batch, length, width = x.shape  # (B, L, D)
    d_k = width // n_heads
    kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    q = project(states, "w_q", x, n_heads, d_k)  # (B, H, L, d_k)
    k, v = project(states, "w_k", x, kv_heads, d_k), project(states, "w_v", x, kv_heads, d_k)  # (B, H_kv, L, d_k)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # (B, H, L, d_k)
    out = out.transpose(1, 2).reshape(batch, length, width)  # (B, L, D)
    return F.linear(out, states["w_o"]["weight"], states["w_o"].get("bias"))


class AgainstTorch(Check):
    """Helper: the text fed to the student's module in chunks of `lengths` (None: in one call,
    without a cache), the outputs against the oracle's rows."""

    d_model, n_heads, n_kv_heads, bias = 16, 4, 2, False
    lengths = None
    own_cache = False
    weight = 2
    observer = observers.chunks

    @property
    def arguments(self):
        return {"own_cache": self.own_cache}

    def inputs(self, rng):
        L = sum(self.lengths) if self.lengths else 5
        kv_heads = self.n_heads if self.n_kv_heads is None else self.n_kv_heads
        return {
            "states": weights(rng, self.d_model, self.n_heads, kv_heads, self.bias),
            "x": randn(rng, 2, L, self.d_model),
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
            "bias": self.bias,
            "lengths": self.lengths,
        }

    def judge(self, inputs, got, expected, tol):
        return judge_with_earlier_steps(got, lambda own: compare(own, expected, tol), observers.EARLIER, tol)

    def expected(self, states, x, n_heads, n_kv_heads, bias, lengths):
        out = oracle(states, x, n_heads, n_kv_heads)
        return {"out": [out] if lengths is None else list(out.split(list(lengths), dim=1))}


class WholeText(AgainstTorch):
    """No cache: causal self-attention over the whole text. D=16, H=4, H_kv=2, B=2, L=5."""

    id = "whole_text"
    weight = 3


class TokenByToken(AgainstTorch):
    """With a cache, one token at a time: the same rows as the whole text."""

    id = "token_by_token"
    lengths = (1, 1, 1, 1, 1)
    weight = 3


class PromptThenTokens(AgainstTorch):
    """With a cache, a prompt of 3 tokens, then single tokens, then a chunk of 2."""

    id = "prompt_then_tokens"
    lengths = (3, 1, 1, 2)


class YourKVCache(AgainstTorch):
    """Token by token with your own KVCache from cache.py."""

    id = "your_kv_cache"
    lengths = (2, 1, 1)
    own_cache = True


class MultiHead(AgainstTorch):
    """n_kv_heads left out (None): as many K/V heads as query heads, with biases."""

    id = "multi_head_with_bias"
    d_model, n_heads, n_kv_heads, bias = 12, 3, None, True
    lengths = (2, 1, 1)
    weight = 1


class CacheHoldsKVHeads(Check):
    """With a cache, the keys and values handed to cache.update have the H_kv heads of the key and
    value projections (the cache holds what grouped-query attention saves memory on), not a copy
    for every query head. H=4, H_kv=2, chunks of 2, 1 and 1 tokens."""

    id = "cache_holds_kv_heads"
    weight = 1
    observer = observers.cache_heads

    def inputs(self, rng):
        return {
            "states": weights(rng, 16, 4, 2, False),
            "x": randn(rng, 2, 4, 16),
            "n_heads": 4,
            "n_kv_heads": 2,
            "bias": False,
            "lengths": (2, 1, 1),
        }

    def expected(self, states, x, n_heads, n_kv_heads, bias, lengths):
        return {"heads": [n_kv_heads] * len(lengths)}


class NotDivisible(Check):
    """n_heads=4 with n_kv_heads=3 raises ValueError when the module is made."""

    id = "not_divisible"
    weight = 1
    observer = observers.not_divisible
    arguments = {"d_model": 16, "n_heads": 4, "n_kv_heads": 3}

    def judge(self, inputs, got, expected, tol):
        case = "CachedSelfAttention(16, n_heads=4, n_kv_heads=3)"
        return raised_verdict(got, "ValueError", case)


# ### BEGIN HIDDEN CHECKS


class RandomSizes(AgainstTorch):
    """Random sizes and chunks, groups of 2 or more, against the oracle."""

    id = "random_sizes"
    visibility = "hidden"
    weight = 3

    def inputs(self, rng):
        n_kv_heads, n_rep, d_k = randsize(rng, 2, 4), randsize(rng, 2, 4), randsize(rng, 2, 6)
        n_heads = n_kv_heads * n_rep
        d_model = n_heads * d_k
        lengths = (randsize(rng, 2, 5), 1, randsize(rng, 2, 4), 1)
        return {
            "states": weights(rng, d_model, n_heads, n_kv_heads, bias=True),
            "x": randn(rng, randsize(rng, 2, 4), sum(lengths), d_model),
            "n_heads": n_heads,
            "n_kv_heads": n_kv_heads,
            "bias": True,
            "lengths": lengths,
        }


# ### PROBES (unscored: run when the step fails, to explain why)


class LocaliseDecoder(Check):
    """Localisation (engine/mistakes/localise.py): the module fed a prompt of 4, a token and a
    chunk of 2 with a cache, each chunk's stages against the reference's. B=2, d_model=30, H=6,
    H_kv=2 (d_k=5)."""

    diagnosis = "localised"
    localise = True
    observer = observers.traced

    def inputs(self, rng):
        return {
            "states": weights(rng, 30, 6, 2, False),
            "x": randn(rng, 2, 7, 30),
            "n_heads": 6,
            "n_kv_heads": 2,
            "bias": False,
            "lengths": [4, 1, 2],
        }
