"""The masking step's judging library: whether a mask acts right, read on what enters the softmax
and on the weights, whatever the unmasked attention computes (checks/masking.py states each check
with it). `judge_masked` is the entry; the functions after it are its parts, in the order it
tries them: the mask's effect on the scores, else on the weights, else the run alone.
"""

import torch

from autograder.assignments.mha.observers import masking as observers
from autograder.engine.checks.check import Fail, allowed_error, check_form, compare_tensor, first_index

# How far below the largest score of its row a blocked score must enter the softmax: its weight
# is then exactly 0 in float64 (exp(-745.2) underflows), with a margin. Every usual fill passes:
# -1e4 added (BERT), -1e9, finfo.min, -inf.
BLOCKED_AT_MOST = -800.0
NORMALISED = 1e-4  # |row sum - 1| of weights that a softmax over the keys gave, in float32 too


def judge_masked(got, q, k, v, mask, tol, what):
    """None if the mask path is right, whatever the unmasked path computes; else a Fail."""
    if got.get("square") is True:
        q, k, v, mask = observers.square(q, k, v, mask)
    B, H, Lq, Lk, d_v = q.shape[0], q.shape[1], q.shape[2], k.shape[2], v.shape[-1]
    contract = {"weights": (B, H, Lq, Lk), "out": (B, H, Lq, d_v)}
    masked = in_order(got, contract)
    free = in_order(got.get("free"), contract) if isinstance(got.get("free"), dict) else None
    for name in ("weights", "out"):  # the form is the unmasked path's business: the same with a mask
        like = free[name] if free is not None and isinstance(free[name], torch.Tensor) else None
        value = masked[name]
        fail = check_form(
            value,
            like.shape if like is not None else contract[name],
            like.dtype if like is not None else getattr(value, "dtype", None),
            like.device if like is not None else q.device,
            f"{name} ({what})",
        )
        if fail:
            return fail
    blocked = mask.expand(B, 1, Lq, Lk)[:, 0]  # (B, Lq, Lk)
    fully = blocked.all(-1)  # (B, Lq): every key blocked
    scores = scores_of(got, free, masked, contract["weights"])  # (with the mask, without) or None
    if free is None:
        return judge_alone(masked, scores, blocked, fully, tol, what)
    if no_effect(masked, free, scores, blocked, fully, tol):
        return Fail("mask_no_effect", {"what": what})
    if normalised(free["weights"], contract["weights"]):  # a softmax over the keys: the weights tell all
        return judge_weights(masked, free, v, blocked, fully, tol, what)
    if scores is None:
        return waiting(free, what)
    fail = judge_scores(*scores, blocked, fully, tol, what)
    if fail is None:
        return all_inf_row(scores[0], fully, what)
    if unchanged(*scores, tol):  # not masked before the softmax: the mask acts after it, judged by weights
        return waiting(free, what)
    return fail


def in_order(got, contract):
    """{"out", "weights"} of a run, put back in order when they come back swapped (an attention
    mistake, judged there)."""
    out, weights = got.get("out"), got.get("weights")
    if (
        isinstance(out, torch.Tensor)
        and isinstance(weights, torch.Tensor)
        and contract["weights"] != contract["out"]
        and tuple(out.shape) == contract["weights"]
        and tuple(weights.shape) == contract["out"]
    ):
        out, weights = weights, out
    return {"out": out, "weights": weights, "softmax_in": got.get("softmax_in")}


def normalised(weights, shape):
    """Whether `weights` of the (B, H, Lq, Lk) `shape` are a softmax over the keys: finite, not
    negative, every row summing to 1."""
    if not isinstance(weights, torch.Tensor) or tuple(weights.shape) != shape or not weights.is_floating_point():
        return False
    w = weights.detach().to(torch.float64)
    return bool(torch.isfinite(w).all() and (w >= -NORMALISED).all() and ((w.sum(-1) - 1).abs() <= NORMALISED).all())


def scores_of(got, free, masked, shape):
    """(with the mask, without), what entered the softmax relative to its row (observers.
    relative_to_row), both (B, H, Lq, Lk) float64; where no softmax was seen in either run and
    the weights are no softmax's, the weights themselves (the scores, returned as they are);
    None where there is nothing to compare."""
    if free is None:
        seen = masked["softmax_in"]
        return (seen, None) if is_scores(seen, shape) else None
    pair = (masked["softmax_in"], free["softmax_in"])
    if all(is_scores(z, shape) for z in pair):
        return pair
    if pair == (None, None) and not normalised(free["weights"], shape):
        weights = (masked["weights"], free["weights"])
        if all(isinstance(w, torch.Tensor) and tuple(w.shape) == shape and w.is_floating_point() for w in weights):
            return tuple(observers.relative_to_row(w, shape) for w in weights)
    return None


def is_scores(z, shape):
    return isinstance(z, torch.Tensor) and z.dtype == torch.float64 and tuple(z.shape) == shape


def no_effect(masked, free, scores, blocked, fully, tol):
    """True when the mask changed nothing where it must change something, in the rows with a
    blocked key and a key left: the same weights, output and softmax input as without it. (A row
    with every key blocked may come out as it would without the mask.)"""
    rows = (blocked.any(-1) & ~fully)[:, None, :]  # (B, 1, Lq)
    if not rows.any():
        return False
    for name in ("weights", "out"):
        a, b = masked[name], free[name]
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.dim() == 4):
            return False
        if a.dtype != b.dtype or compare_tensor(a, b, tol, where=rows[..., None]) is not None:
            return False
    if scores is None or scores[1] is None:
        return True
    return unchanged(*(torch.where(rows[..., None], z, torch.zeros_like(z)) for z in scores), tol)


def unchanged(with_mask, without, tol):
    """True if the softmax input is the same with the mask as without (up to a shift of a row)."""
    if without is None:
        return False
    shift = (with_mask - without).nan_to_num(0.0)
    spread = shift.amax(-1) - shift.amin(-1)
    return bool((spread <= 2 * allowed_error(without, tol).amax(-1)).all())


def judge_scores(with_mask, without, blocked, fully, tol, what):
    """What entered the softmax: blocked scores very negative relative to their row (rows with a
    key left), the others what they are without the mask, up to a shift of the whole row."""
    some_kept = (blocked & ~fully[..., None])[:, None]  # (B, 1, Lq, Lk): blocked, in a row with a key left
    too_high = ~(with_mask <= BLOCKED_AT_MOST) & some_kept  # NaN counts as too high
    if too_high.any():
        index = first_index(too_high)
        return Fail(
            "mask_score_not_blocked",
            {"what": what, "index": index, "got": with_mask[index].item(), "limit": BLOCKED_AT_MOST},
        )
    if without is None:
        return None
    kept = ~blocked[:, None] & ~fully[:, None, :, None]  # (B, 1, Lq, Lk)
    shift = torch.where(kept, with_mask - without, torch.zeros_like(with_mask))
    low = torch.where(kept, shift, torch.full_like(shift, float("inf"))).amin(-1, keepdim=True)
    high = torch.where(kept, shift, torch.full_like(shift, -float("inf"))).amax(-1, keepdim=True)
    middle = torch.where(torch.isfinite(low) & torch.isfinite(high), (low + high) / 2, torch.zeros_like(low))
    off = torch.where(kept, (shift - middle).abs().nan_to_num(float("inf")), torch.zeros_like(shift))
    allowed = allowed_error(without, tol)
    if (off > allowed).any():
        index = first_index(off > allowed)
        return Fail(
            "mask_changes_kept_scores",
            {"what": what, "index": index, "diff": off[index].item(), "tolerance": allowed[index].item()},
        )
    return None


def all_inf_row(with_mask, fully, what):
    """A Fail where every score of a fully blocked row entered the softmax as -inf (a softmax of
    it is NaN); None otherwise. (Where the weights can be judged, they say this themselves.)"""
    nan_rows = torch.isnan(with_mask).all(-1) & fully[:, None]  # (B, H, Lq)
    if nan_rows.any():
        b, _, i = first_index(nan_rows)
        return Fail("mask_row_all_inf", {"what": what, "batch": b, "query": i})
    return None


def judge_weights(masked, free, v, blocked, fully, tol, what):
    """Where the unmasked attention is a softmax over the keys: the masked weights are the unmasked
    ones renormalised over the keys left (blocked keys exactly 0), the output follows the weights
    as it does without the mask, and everything stays finite (rows with every key blocked too)."""
    weights, out = masked["weights"].detach(), masked["out"].detach()
    fail = finite(weights, out, fully, what) or leaked(weights, blocked, fully, what)
    if fail:
        return fail
    kept = ~blocked[:, None]  # (B, 1, Lq, Lk)
    rows = ~fully[:, None, :, None]  # (B, 1, Lq, 1): rows with a key left
    alone = free["weights"].detach() * kept
    alone = alone / alone.sum(-1, keepdim=True).where(rows, torch.ones(()))  # attention over the kept keys alone
    fail = compare_tensor(weights, alone.to(weights.dtype), tol, name=f"weights ({what})", where=rows)
    if fail is None:
        fail = follows_weights(out, weights, free, v, rows, tol, what)
    if fail is not None and fail.message_id == "values":
        b, _, i, *_ = fail.params["index"]
        return Fail(
            "mask_changes_kept_keys",
            {
                "name": fail.params["name"],
                "batch": b,
                "query": i,
                "diff": fail.params["max_abs"],
                "tolerance": fail.params["tolerance"],
            },
        )
    return fail


def follows_weights(out, weights, free, v, rows, tol, what):
    """Where the unmasked output is its weights @ v, the masked output is its weights @ v too."""
    free_out, free_weights = free["out"].detach(), free["weights"].detach()
    if free_out.dtype != out.dtype or compare_tensor(free_out, by_weights(free_weights, v, free_out), tol):
        return None  # the output is computed another way: step attention judges how
    return compare_tensor(out, by_weights(weights, v, out), tol, name=f"out ({what})", where=rows)


def by_weights(weights, v, like):
    return (weights.to(torch.float64) @ v.to(torch.float64)).to(like.dtype)


def finite(weights, out, fully, what):
    for name, value in (("weights", weights), ("out", out)):
        if not torch.isfinite(value).all():
            index = first_index(~torch.isfinite(value))
            message = "row_not_finite" if fully[index[0], index[2]] else "not_finite"
            return Fail(
                message, {"name": f"{name} ({what})", "index": index, "got": value[index].item(), "expected": 0.0}
            )
    return None


def judge_alone(masked, scores, blocked, fully, tol, what):
    """The unmasked attention raised: the masked run alone. Its softmax input (blocked scores very
    negative); and where its weights sum to 1 over the keys left, blocked keys weigh 0 and
    everything is finite."""
    if scores is not None:
        fail = judge_scores(scores[0], None, blocked, fully, tol, what) or all_inf_row(scores[0], fully, what)
        if fail:
            return fail
    weights, out = masked["weights"].detach(), masked["out"].detach()  # of the contract's form (judge_masked)
    sums = weights.to(torch.float64).sum(-1)  # (B, H, Lq)
    if bool((((sums - 1).abs() <= NORMALISED) | fully[:, None]).all()):
        return finite(weights, out, fully, what) or leaked(weights, blocked, fully, what)
    if scores is not None:
        return None
    return Fail("mask_needs_attention_raised", {"what": what, "blocked_by": "attention"})


def leaked(weights, blocked, fully, what):
    """blocked_weight where a blocked key of a row with a key left weighs anything but 0."""
    leak = weights.abs() * (blocked & ~fully[..., None])[:, None]  # (B, H, Lq, Lk)
    if (leak > 0).any():
        index = first_index(leak > 0)
        return Fail("blocked_weight", {"name": f"weights ({what})", "value": leak[index].item(), "index": index})
    return None


def waiting(free, what):
    """Not judged while the unmasked attention is wrong: the mask acts after its softmax, where
    only weights that are a softmax over the keys can tell whether it acts right. Scores
    nothing, in the step's maximum (judge/verdict.py, blocked)."""
    sums = free["weights"].detach().to(torch.float64).sum(-1) if isinstance(free["weights"], torch.Tensor) else None
    low, high = (sums.min().item(), sums.max().item()) if sums is not None and sums.numel() else (0.0, 0.0)
    return Fail(
        "mask_needs_attention", {"name": f"weights ({what})", "low": low, "high": high, "blocked_by": "attention"}
    )
