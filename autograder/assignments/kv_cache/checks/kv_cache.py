"""Checks for step `kv_cache`: kv_cache/cache.py, the KVCache class.

Oracle: torch.cat of every chunk given so far along the sequence axis (dim 2), written out.
"""

import torch

from autograder.assignments.kv_cache.observers import kv_cache as observers
from autograder.engine.checks.check import Check, randn, randsize

FILES = ["cache.py"]  # what the step grades (scanned for forbidden calls)


def chunks(rng, lengths, B=2, H_kv=3, d_k=4, d_v=5, dtype=torch.float64):
    """[(k, v)] of the given lengths: k (B, H_kv, L_i, d_k), v (B, H_kv, L_i, d_v)."""
    return [(randn(rng, B, H_kv, n, d_k, dtype=dtype), randn(rng, B, H_kv, n, d_v, dtype=dtype)) for n in lengths]


def by_hand(pieces):
    """What a correct cache returns after each piece: everything so far, along dim 2."""
    seen = {"len_empty": 0, "K": [], "V": [], "len": []}
    for i in range(len(pieces)):
        seen["K"].append(torch.cat([k for k, _ in pieces[: i + 1]], dim=2))  # (B, H_kv, L, d_k)
        seen["V"].append(torch.cat([v for _, v in pieces[: i + 1]], dim=2))  # (B, H_kv, L, d_v)
        seen["len"].append(seen["K"][-1].shape[2])
    return seen


class Fill(Check):
    """Helper: a fresh cache fed chunks of `lengths`; `outputs` names the observations judged."""

    lengths = (2, 1, 3)
    dtype = torch.float64
    outputs = ("K", "V")
    observer = observers.fill

    @property
    def arguments(self):
        return {"names": self.outputs}

    def inputs(self, rng):
        return {"pieces": chunks(rng, self.lengths, dtype=self.dtype)}

    def expected(self, pieces):
        seen = by_hand(pieces)
        return {name: seen[name] for name in self.outputs}


class UpdateAppends(Fill):
    """update(k, v) returns the whole cache: every chunk so far, in order, along the sequence
    axis. Chunks of 2, 1 and 3 tokens; B=2, H_kv=3, d_k=4, d_v=5 (all different)."""

    id = "update_appends"
    weight = 3


class Length(Fill):
    """len(cache) is 0 when empty, then the number of cached positions (2, 3, 6), not of calls."""

    id = "length"
    weight = 2
    outputs = ("len_empty", "len")


class TokenByToken(Fill):
    """A prompt of 3 tokens, then 3 single tokens, as in generation."""

    id = "token_by_token"
    lengths = (3, 1, 1, 1)


class Float32(Fill):
    """float32 chunks give a float32 cache of the same values."""

    id = "float32"
    dtype = torch.float32


class Reset(Check):
    """After reset() the cache is empty, and the next update starts a new sequence."""

    id = "reset"
    weight = 2
    observer = observers.reset

    def inputs(self, rng):
        return {"pieces": chunks(rng, (2, 3)), "after": chunks(rng, (4,))}

    def expected(self, pieces, after):
        k, v = after[0]
        return {"len_after_reset": 0, "K": k, "V": v, "len": k.shape[2]}


class Independent(Check):
    """Two caches do not share their contents (no storage on the class, such as a list
    attribute written in the class body)."""

    id = "independent_caches"
    observer = observers.two_caches

    def inputs(self, rng):
        return {"first": chunks(rng, (2, 1)), "second": chunks(rng, (3,))}

    def expected(self, first, second):
        return {"first_K": torch.cat([k for k, _ in first], dim=2), "second_K": second[0][0], "second_len": 3}


# ### BEGIN HIDDEN CHECKS


class RandomChunks(Check):
    """Random sizes and chunk lengths, then a reset and one more chunk, against the reference."""

    id = "random_chunks"
    visibility = "hidden"
    weight = 3
    observer = observers.fill_then_reset

    def inputs(self, rng):
        sizes = {"B": randsize(rng, 2, 4), "H_kv": randsize(rng, 2, 5), "d_k": randsize(rng, 2, 9)}
        sizes["d_v"] = randsize(rng, 2, 9)
        lengths = [randsize(rng, 2, 5) for _ in range(randsize(rng, 2, 5))]
        lengths.insert(randsize(rng, 2, 4) - 1, 1)  # one single token among them, not first
        return {"pieces": chunks(rng, lengths, **sizes), "after": chunks(rng, (randsize(rng, 2, 4),), **sizes)}


# ### PROBES (unscored: run when the step fails, to explain why)


class LocaliseCache(Check):
    """Localisation (engine/mistakes/localise.py): a cache fed chunks of 2, 1 and 3, reset, then
    fed a chunk of 4; what it returns and its length after each call, against the reference's.
    B=2, H_kv=3, d_k=4, d_v=5."""

    diagnosis = "localised"
    localise = True
    observer = observers.traced

    def inputs(self, rng):
        return {"pieces": chunks(rng, (2, 1, 3)), "after": chunks(rng, (4,))}
