"""Observers of step `kv_cache`: the student's KVCache."""

import torch

from autograder.harness.contract import ContractError, describe
from autograder.harness.kept import kept
from autograder.harness.trace import Known, tracing


def update(cache, k, v):
    """cache.update(k, v), which must give a pair (K, V): copies of them as they were returned (a
    cache may hand out views of a buffer it writes again later, harness/kept.py)."""
    result = cache.update(k, v)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise ContractError("wrong_type", name="KVCache.update(k, v)", expected="a pair (K, V)", got=describe(result))
    return kept(tuple(result))


def _fill(kv, pieces):
    """A fresh KVCache fed `pieces` one by one: what it returns and its length after each."""
    cache = kv.cache.KVCache()
    seen = {"len_empty": len(cache), "K": [], "V": [], "len": []}
    for k, v in pieces:
        K, V = update(cache, k, v)
        seen["K"].append(K)
        seen["V"].append(V)
        seen["len"].append(len(cache))
    return cache, seen


def fill(kv, pieces, names=("K", "V")):
    """The observations `names` of a fresh cache fed `pieces`: "K", "V" and "len" after each
    piece, "len_empty" before any."""
    _, seen = _fill(kv, pieces)
    return {name: seen[name] for name in names}


def reset(kv, pieces, after):
    """A cache fed `pieces`, reset, then fed after[0]: {"len_after_reset", "K", "V", "len"}."""
    cache, _ = _fill(kv, pieces)
    cache.reset()
    empty = len(cache)
    K, V = update(cache, *after[0])
    return {"len_after_reset": empty, "K": K, "V": V, "len": len(cache)}


def two_caches(kv, first, second):
    """Two caches fed one after the other: the first's last K, the second's last K and length."""
    _, a = _fill(kv, first)
    _, b = _fill(kv, second)
    return {"first_K": a["K"][-1], "second_K": b["K"][-1], "second_len": b["len"][-1]}


def traced(kv, pieces, after):
    """{"calls": [per call: what the recorder saw, then what it returned]}: a fresh cache fed
    `pieces`, reset, then fed after[0], then a second cache fed pieces[0]; an update's call ends
    with its K, V and len(cache), the reset's with len(cache) (localisation,
    engine/mistakes/localise.py)."""
    cache, calls, known = kv.cache.KVCache(), [], Known()
    for piece in [*pieces, None, after[0]]:
        known.add(*(piece or ()))
        with tracing(kv, known=known) as trace:
            if piece is None:  # the reset
                cache.reset()
                returned = [torch.tensor(len(cache))]
            else:
                K, V = update(cache, *piece)
                returned = [K, V, torch.tensor(len(cache))]
        calls.append(trace.report(returned if trace.raised is None else ()))
        if trace.raised is not None:
            return {"calls": calls}
    with tracing(kv, known=known) as trace:  # a second cache: it must not share the first one's storage
        other = kv.cache.KVCache()
        K, _ = update(other, *pieces[0])
        returned = [K, torch.tensor(len(other))]
    calls.append(trace.report(returned if trace.raised is None else ()))
    return {"calls": calls}


# ### BEGIN HIDDEN CHECKS (observers only hidden checks use: left out of a student release)


def fill_then_reset(kv, pieces, after):
    """Everything a cache fed `pieces` returns, then, after a reset, what it returns for after[0]."""
    cache, seen = _fill(kv, pieces)
    cache.reset()
    K, V = update(cache, *after[0])
    return {**seen, "K_after_reset": K, "V_after_reset": V, "len_after_reset": len(cache)}
