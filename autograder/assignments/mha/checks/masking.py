"""Checks for step `masking`: mha/masking.py and the `mask` path of scaled_dot_product_attention.

The mask path is judged where the mask acts: on what enters the softmax. The student's attention
runs with and without the mask on the same q, k, v (observers.masked_and_unmasked), and the input
of its softmax is recorded in both runs. A mask is right when the blocked scores are -inf or
very negative relative to their row and the other scores are what they are without the mask.
A mistake of the unmasked path (a wrong scale, a softmax over the wrong dim, a missing
transpose, swapped results) changes both runs alike, so it costs nothing here: it is graded in
step `attention`. Where the student's attention normalises over the keys, the weights must also
agree with that (blocked keys weigh 0, the others renormalise, every row stays finite); that
relation alone decides where no softmax input was seen or the mask acts after the softmax.

Over 400 lines: the masking step has the most ways to be right (any fill, -inf or finite,
before or after the softmax), and each check states its own.
"""

import torch

from autograder.engine.checks import messages
from autograder.engine.checks.check import (
    Check,
    Fail,
    allowed_error,
    check_form,
    compare_tensor,
    first_index,
    randindex,
    randsize,
)
from autograder.assignments.mha.observers import attention as attention_observers
from autograder.assignments.mha.observers import masking as observers
from ._shared import causal_by_hand, qkv, weights_picture

FILES = ["masking.py", "attention.py"]  # what the step grades (scanned for forbidden calls)
# How far below the largest score of its row a blocked score must enter the softmax: its weight
# is then exactly 0 in float64 (exp(-745.2) underflows), with a margin. Every usual fill passes:
# -1e4 added (BERT), -1e9, finfo.min, -inf.
BLOCKED_AT_MOST = -800.0
NORMALISED = 1e-4  # |row sum - 1| of weights that a softmax over the keys gave, in float32 too


def padding_mask_by_hand(ids, pad_id):
    return torch.tensor([[[[token == pad_id for token in row]]] for row in ids.tolist()])


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


class MaskedAttention(Check):
    """Helper: attention with a mask, judged against the student's own attention without it."""

    what = "mask_label.mask"  # message ids: the masks named in the messages and pictures
    observer = observers.masked_and_unmasked

    def judge(self, inputs, got, expected, tol):
        return judge_masked(got, inputs["q"], inputs["k"], inputs["v"], inputs["mask"], tol, messages.render(self.what))

    def picture(self, inputs, got, expected):
        """The first head's masked weights: the student's, next to the student's own weights
        without the mask, renormalised over the keys the mask leaves (what a right mask makes of
        the same attention; no picture where those are no softmax over the keys)."""
        free = got.get("free") if isinstance(got, dict) else None
        weights = free.get("weights") if isinstance(free, dict) else None
        if not isinstance(weights, torch.Tensor) or weights.dim() != 4 or not normalised(weights, tuple(weights.shape)):
            return None
        mask = inputs["mask"]
        if got.get("square") is True:
            mask = observers.square(inputs["q"], inputs["k"], inputs["v"], mask)[3]
        kept = weights.detach().to(torch.float64) * ~mask.expand(weights.shape)  # (B, H, Lq, Lk)
        want = kept / kept.sum(-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)  # a row all blocked: 0
        picture = weights_picture(got, want, messages.render("picture.masked_weights", what=messages.render(self.what)))
        if picture is not None:
            picture["expected_title"] = messages.render("picture.kept_keys")
        return picture


class PaddingMaskValues(Check):
    """padding_mask(ids) is bool (B, 1, 1, L), True where ids == pad_id (on the key axis)."""

    id = "padding_mask_values"
    weight = 2
    observer = observers.padding_mask

    def inputs(self, rng):
        return {"ids": torch.tensor([[5, 7, 9, 3, 0, 0], [4, 2, 0, 0, 0, 0], [8, 1, 6, 2, 4, 3]])}

    def expected(self, ids):
        return {"mask": padding_mask_by_hand(ids, 0)}


class PaddingMaskPadId(Check):
    """padding_mask(ids, pad_id) uses pad_id, not 0."""

    id = "padding_mask_pad_id"
    observer = observers.padding_mask
    arguments = {"pad_id": 1}

    def inputs(self, rng):
        return {"ids": torch.tensor([[5, 7, 1, 1], [0, 1, 1, 1]])}

    def expected(self, ids):
        return {"mask": padding_mask_by_hand(ids, 1)}


class CausalMaskValues(Check):
    """causal_mask(L) is bool (L, L), True strictly above the diagonal (the future)."""

    id = "causal_mask_values"
    weight = 2
    observer = observers.causal_masks
    arguments = {"lengths": (5, 1)}

    def expected(self):
        return {"mask_5": causal_by_hand(5, 5), "mask_1": causal_by_hand(1, 1)}


class BlocksPadding(MaskedAttention):
    """With a padding mask (B, 1, 1, Lk): padding keys get weight 0, the rest renormalise."""

    id = "attention_padding"
    what = "mask_label.padding"
    weight = 3

    def inputs(self, rng):
        ids = torch.tensor([[3, 1, 4, 1, 5, 9, 2], [6, 5, 3, 5, 0, 0, 0]])
        return {**qkv(rng, (2, 3), lq=5, lk=7, d_k=4, d_v=6), "mask": padding_mask_by_hand(ids, 0)}


class BlocksFuture(MaskedAttention):
    """With a causal mask (Lq, Lk): query i sees keys 0..i only."""

    id = "attention_causal"
    what = "mask_label.causal"
    weight = 3

    def inputs(self, rng):
        return {**qkv(rng, (2, 3), lq=6, lk=6, d_k=4, d_v=5), "mask": causal_by_hand(6, 6)}


class AllBlockedRowFinite(MaskedAttention):
    """A row whose keys are all blocked (an empty sequence) comes out finite, not NaN."""

    id = "all_blocked_row_finite"
    what = "mask_label.all_padding"
    weight = 2

    def inputs(self, rng):
        ids = torch.tensor([[3, 1, 4, 1, 5], [0, 0, 0, 0, 0]])
        return {**qkv(rng, (2, 2), lq=3, lk=5, d_k=4, d_v=6), "mask": padding_mask_by_hand(ids, 0)}


class Float32Mask(MaskedAttention):
    """float32 scores with padding and causal masks together."""

    id = "float32_mask"
    what = "mask_label.float32"

    def inputs(self, rng):
        ids = torch.tensor([[3, 1, 4, 1, 5, 9], [6, 5, 3, 0, 0, 0]])
        mask = padding_mask_by_hand(ids, 0) | causal_by_hand(6, 6)  # (B, 1, Lq, Lk)
        return {**qkv(rng, (2, 3), lq=6, lk=6, d_k=8, d_v=5, dtype=torch.float32), "mask": mask}


# ### BEGIN HIDDEN CHECKS


class CausalMaskDevice(Check):
    """causal_mask(L, device=...) creates the mask on that device (tried with 'meta').

    Hidden, and not public, only because the first triu on 'meta' loads PyTorch's Python
    decompositions (about 2 s), which would double the students' feedback loop. Its expectation
    is written out below, so the judge never runs that triu either."""

    id = "causal_mask_device"
    visibility = "hidden"
    observer = observers.causal_mask_on
    arguments = {"length": 4, "device": "meta"}

    def expected(self):
        return {"device": "meta", "shape": (4, 4), "dtype": "torch.bool"}


class RandomMasks(Check):
    """Random ids, pad ids and lengths: both masks against the reference."""

    id = "random_masks"
    visibility = "hidden"
    weight = 2
    observer = observers.both_masks

    def inputs(self, rng):
        pad_id = randindex(rng, 1, 3)  # not 0: comparing with 0 must not pass by chance
        length = randsize(rng, 2, 10)
        ids = torch.randint(3, 30, (randsize(rng, 2, 5), length), generator=rng)
        ids[0, randindex(rng, 1, length) :] = pad_id  # the first row ends in padding
        return {"ids": ids, "pad_id": pad_id, "length": length}


class RandomMaskedAttention(MaskedAttention):
    """Random sizes and random padding + causal masks, judged as the public mask checks are."""

    id = "random_masked_attention"
    visibility = "hidden"
    what = "mask_label.random"
    weight = 2

    def inputs(self, rng):
        B, lq, lk = randsize(rng, 2, 4), randsize(rng, 2, 7), randsize(rng, 2, 7)
        padding = torch.rand(B, 1, 1, lk, generator=rng) < 0.4  # (B, 1, 1, Lk)
        padding[..., 0] = False  # key 0 stays visible: no row is fully blocked (a fixed check's job)
        padding[..., -1] = True  # and every row has a blocked key
        mask = padding | causal_by_hand(lq, lk)  # (B, 1, Lq, Lk)
        return {
            **qkv(rng, (B, randsize(rng, 2, 4)), lq=lq, lk=lk, d_k=randsize(rng, 2, 9), d_v=randsize(rng, 2, 9)),
            "mask": mask,
        }


# ### PROBES (unscored: run when the step fails, to explain why)


class LocaliseMasked(Check):
    """Localisation (engine/mistakes/localise.py): attention with a padding and a causal mask,
    the blocked keys and the weights against the reference's (a finding before the mask is the
    attention step's: not said here). B=2, H=3, Lq=4, Lk=6, d_k=5, d_v=7."""

    diagnosis = "localised"
    localise = True
    observer = attention_observers.traced

    def inputs(self, rng):
        padding = torch.tensor([[j >= n for j in range(6)] for n in (6, 3)])[:, None, None, :]  # (B, 1, 1, Lk)
        return {**qkv(rng, (2, 3), 4, 6, 5, 7), "mask": padding | causal_by_hand(4, 6)}


class LocaliseMasks(Check):
    """Localisation: padding_mask of ids with padding (pad id 0), then causal_mask(5)."""

    diagnosis = "localised"
    localise = True
    observer = observers.traced_masks

    def inputs(self, rng):
        return {"ids": torch.tensor([[5, 7, 9, 0, 0], [4, 0, 0, 0, 0], [3, 8, 2, 6, 1]]), "length": 5}
