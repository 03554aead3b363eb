"""Checks for step `masking`: mha/masking.py and the `mask` path of scaled_dot_product_attention.

The mask path is judged against the student's OWN unmasked attention: for every query, masked
attention must equal unmasked attention over just the keys that are not blocked. That holds for
a correct implementation and keeps a mistake in the unmasked path (a wrong scale, say) from
costing points here too: it is graded in step `attention`.
"""

import torch

from autograder.engine import messages
from autograder.engine.check import (
    Check,
    Fail,
    check_form,
    compare_tensor,
    first_index,
    passes_everywhere,
    randindex,
    randsize,
)
from autograder.assignments.mha.observers import masking as observers
from .attention import qkv, weights_picture

FILES = ["masking.py", "attention.py"]  # what the step grades (scanned for forbidden calls)
MASKS_ONLY = ("masking.py",)  # `files` of the checks that call only the mask builders (see runner.HangGuard)


def padding_mask_by_hand(ids, pad_id):
    return torch.tensor([[[[token == pad_id for token in row]]] for row in ids.tolist()])


def causal_by_hand(lq, lk):
    return torch.tensor([[j > i for j in range(lk)] for i in range(lq)])


def judge_masked(got, q, k, v, mask, tol, what):
    """Blocked keys weigh exactly 0; kept keys weigh what unmasked attention over them alone
    gives; rows with every key blocked stay finite."""
    B, H, Lq, Lk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    weights, out = got["weights"], got["out"]
    # The dtype is the unmasked path's business (step `attention`); the per-row comparison
    # below still requires masked and unmasked results to agree in dtype.
    fail = check_form(
        weights, (B, H, Lq, Lk), getattr(weights, "dtype", None), q.device, f"weights ({what})"
    ) or check_form(out, (B, H, Lq, v.shape[-1]), getattr(out, "dtype", None), q.device, f"out ({what})")
    if fail:
        return fail
    fail = judge_mask_values(got, weights.detach(), out.detach(), mask, tol, what)
    return fail and (unnormalised_attention(got["rows"], what) or fail)


def judge_mask_values(got, weights, out, mask, tol, what):
    """judge_masked past the shapes: None, or the first way the masked result is wrong."""
    B, Lq, Lk = weights.shape[0], weights.shape[2], weights.shape[3]
    blocked = mask.expand(B, 1, Lq, Lk)[:, 0]  # (B, Lq, Lk)
    fully = blocked.all(-1)  # (B, Lq): every key blocked
    for name, value in (("weights", weights), ("out", out)):
        if not torch.isfinite(value).all():
            index = first_index(~torch.isfinite(value))
            message = "row_not_finite" if fully[index[0], index[2]] else "not_finite"
            return Fail(
                message, {"name": f"{name} ({what})", "index": index, "got": value[index].item(), "expected": 0.0}
            )
    leak = weights.abs() * (blocked & ~fully[..., None])[:, None]  # (B, H, Lq, Lk)
    if (leak > 0).any():
        index = first_index(leak > 0)
        return Fail("blocked_weight", {"name": f"weights ({what})", "value": leak[index].item(), "index": index})
    if rows_agree(got["rows"], weights, out, blocked, tol):
        return None
    return compare_rows(got["rows"], weights, out, blocked, tol, what)


def unnormalised_attention(rows, what):
    """A Fail naming step attention when the student's attention WITHOUT a mask does not give
    weights that sum to 1 over the keys (softmax over the wrong dim, no softmax): the masked
    result cannot agree with it, but the mistake is attention's, and the message says so."""
    sums = [
        row["weights"].detach().sum(-1).reshape(-1)
        for row in rows
        if isinstance(row, dict) and isinstance(row.get("weights"), torch.Tensor) and row["weights"].numel()
    ]
    if not sums:
        return None
    sums = torch.cat([s.to(torch.float64) for s in sums])
    if bool(((sums - 1).abs() <= 1e-3).all()):
        return None
    # blocked_by: not checked (runner.blocked): no points either way until attention is fixed
    return Fail(
        "mask_needs_attention",
        {"name": f"weights ({what})", "low": sums.min().item(), "high": sums.max().item(), "blocked_by": "attention"},
    )


def compare_rows(rows, weights, out, blocked, tol, what):
    """judge_masked's row by row comparison: the first row whose masked result differs."""
    B, Lq = blocked.shape[:2]
    for (b, i), row in zip(((b, i) for b in range(B) for i in range(Lq)), rows):
        if row is None:
            continue
        keep = ~blocked[b, i]
        for name, masked_row, free_row in (
            ("weights", weights[b, :, i, keep], row["weights"]),
            ("out", out[b, :, i], row["out"]),
        ):
            fail = compare_tensor(
                free_row,
                masked_row.reshape(free_row.shape)
                if isinstance(free_row, torch.Tensor) and free_row.numel() == masked_row.numel()
                else masked_row,
                tol,
                name=f"unmasked {name} of one query",
            )
            if fail and fail.message_id == "values":
                return Fail(
                    "mask_changes_kept_keys",
                    {
                        "name": f"{name} ({what})",
                        "batch": b,
                        "query": i,
                        "diff": fail.params["max_abs"],
                        "tolerance": fail.params["tolerance"],
                    },
                )
            if fail:
                return fail
    return None


def rows_agree(rows, weights, out, blocked, tol):
    """True if every row's unmasked attention has the masked one's dtype, device and size and
    agrees with it within tolerance: what the row-by-row loop of judge_masked accepts, in one
    comparison. False means "let the loop find the first row that differs, and say how"."""
    B, Lq = blocked.shape[:2]
    pairs = {"weights": ([], []), "out": ([], [])}  # name -> (unmasked rows, masked rows), flat
    for (b, i), row in zip(((b, i) for b in range(B) for i in range(Lq)), rows):
        if row is None:
            continue
        if not isinstance(row, dict):
            return False
        for name, masked_row in (("weights", weights[b, :, i, ~blocked[b, i]]), ("out", out[b, :, i])):
            free_row = row.get(name)
            if (
                not isinstance(free_row, torch.Tensor)
                or free_row.dtype != masked_row.dtype
                or free_row.device != masked_row.device
                or free_row.numel() != masked_row.numel()
            ):
                return False
            pairs[name][0].append(free_row.reshape(-1))
            pairs[name][1].append(masked_row.reshape(-1))
    return all(
        not free or passes_everywhere(torch.cat(free), torch.cat(masked), tol) for free, masked in pairs.values()
    )


class MaskedAttention(Check):
    """Helper: attention with a mask, judged against the student's own unmasked attention."""

    what = "mask_label.mask"  # message ids: the masks named in the messages and pictures
    observer = observers.masked_and_per_row

    def judge(self, inputs, got, expected, tol):
        return judge_masked(got, inputs["q"], inputs["k"], inputs["v"], inputs["mask"], tol, messages.render(self.what))

    def picture(self, inputs, got, expected):
        """The first head's masked weights, the student's next to softmax over the kept keys."""
        q, k, mask = inputs["q"], inputs["k"], inputs["mask"]
        scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
        blocked = mask.expand(scores.shape)
        want = torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1).nan_to_num(0.0)
        return weights_picture(got, want, messages.render("picture.masked_weights", what=messages.render(self.what)))


class PaddingMaskValues(Check):
    """padding_mask(ids) is bool (B, 1, 1, L), True where ids == pad_id (on the key axis)."""

    id = "padding_mask_values"
    files = MASKS_ONLY
    weight = 2
    observer = observers.padding_mask

    def inputs(self, rng):
        return {"ids": torch.tensor([[5, 7, 9, 3, 0, 0], [4, 2, 0, 0, 0, 0], [8, 1, 6, 2, 4, 3]])}

    def expected(self, ids):
        return {"mask": padding_mask_by_hand(ids, 0)}


class PaddingMaskPadId(Check):
    """padding_mask(ids, pad_id) uses pad_id, not 0."""

    id = "padding_mask_pad_id"
    files = MASKS_ONLY
    observer = observers.padding_mask
    arguments = {"pad_id": 1}

    def inputs(self, rng):
        return {"ids": torch.tensor([[5, 7, 1, 1], [0, 1, 1, 1]])}

    def expected(self, ids):
        return {"mask": padding_mask_by_hand(ids, 1)}


class CausalMaskValues(Check):
    """causal_mask(L) is bool (L, L), True strictly above the diagonal (the future)."""

    id = "causal_mask_values"
    files = MASKS_ONLY
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
    files = MASKS_ONLY
    visibility = "hidden"
    observer = observers.causal_mask_on
    arguments = {"length": 4, "device": "meta"}

    def expected(self):
        return {"device": "meta", "shape": (4, 4), "dtype": "torch.bool"}


class RandomMasks(Check):
    """Random ids, pad ids and lengths: both masks against the reference."""

    id = "random_masks"
    files = MASKS_ONLY
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
