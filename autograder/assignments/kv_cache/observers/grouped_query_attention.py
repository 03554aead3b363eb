"""Observers of step `grouped_query_attention`: the student's repeat_kv and grouped_query_attention."""

import torch

from autograder.harness.trace import tracing


def attend(kv, q, k, v, mask):
    """{"out"}: grouped_query_attention(q, k, v, mask=mask)."""
    return {"out": kv.gqa.grouped_query_attention(q, k, v, mask=mask)}


def repeated(kv, x, times):
    """{"repeated": repeat_kv(x, times[0]), "once": repeat_kv(x, times[1])}."""
    return {"repeated": kv.gqa.repeat_kv(x, times[0]), "once": kv.gqa.repeat_kv(x, times[1])}


def not_divisible(kv, q, k, v):
    """{"raised": the exception's type name or None, "message"}: q's heads not a multiple of k's."""
    try:
        kv.gqa.grouped_query_attention(q, k, v)
    except NotImplementedError:
        raise  # the TODO is still there: reported as not implemented
    except ValueError:
        return {"raised": "ValueError"}
    except Exception as error:  # noqa: BLE001 - e.g. the RuntimeError of a failed matmul
        return {"raised": type(error).__name__, "message": str(error)[:200]}
    return {"raised": None}


def traced(kv, q, k, v, mask):
    """{"calls": [what the recorder saw], "outputs": [out]}: grouped_query_attention(q, k, v, mask)
    (localisation, engine/mistakes/localise.py)."""
    with tracing(kv) as trace:
        out = kv.gqa.grouped_query_attention(q, k, v, mask=mask)
    ok = trace.raised is None and isinstance(out, torch.Tensor)
    return {"calls": [trace.report([out] if ok else ())], "outputs": [out.detach()] if ok else []}


# ### BEGIN HIDDEN CHECKS (observers only hidden checks use: left out of a student release)


def attend_and_repeat(kv, q, k, v, mask):
    """{"out", "repeated"}: the attention, and repeat_kv(k, H // H_kv)."""
    return {
        "out": kv.gqa.grouped_query_attention(q, k, v, mask=mask),
        "repeated": kv.gqa.repeat_kv(k, q.shape[1] // k.shape[1]),
    }
