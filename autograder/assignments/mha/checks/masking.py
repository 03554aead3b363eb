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

How a mask is judged (any fill, -inf or finite, before or after the softmax) is checks/_masking.py.
"""

import torch

from autograder.assignments.mha.observers import attention as attention_observers
from autograder.assignments.mha.observers import masking as observers
from autograder.engine.checks import messages
from autograder.engine.checks.check import (
    Check,
    randindex,
    randsize,
)

from ._masking import judge_masked, normalised
from ._shared import causal_by_hand, qkv, weights_picture

FILES = ["masking.py", "attention.py"]  # what the step grades (scanned for forbidden calls)


def padding_mask_by_hand(ids, pad_id):
    return torch.tensor([[[[token == pad_id for token in row]]] for row in ids.tolist()])


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
