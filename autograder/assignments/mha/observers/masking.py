"""Observers of step `masking`: the student's padding_mask and causal_mask, and the mask path of
their scaled_dot_product_attention."""

import torch

from autograder.assignments.mha.observers.attention import attend


def masked_and_per_row(mha, q, k, v, mask):
    """Masked attention on (B, H, Lq, d), and for each (b, i) unmasked attention of query i over
    only the keys it may see (None where it may see none)."""
    masked = attend(mha, q, k, v, mask=mask)
    blocked = mask.expand(q.shape[0], 1, q.shape[2], k.shape[2])[:, 0]  # (B, Lq, Lk)
    rows = []
    for b in range(q.shape[0]):
        for i in range(q.shape[2]):
            keep = ~blocked[b, i]
            if keep.any():
                rows.append(attend(mha, q[b : b + 1, :, i : i + 1], k[b : b + 1, :, keep], v[b : b + 1, :, keep]))
            else:
                rows.append(None)
    return {**masked, "rows": rows}


def padding_mask(mha, ids, pad_id=None):
    """{"mask"}: padding_mask(ids) (with pad_id when given)."""
    mask = mha.masking.padding_mask(ids) if pad_id is None else mha.masking.padding_mask(ids, pad_id=pad_id)
    return {"mask": mask}


def causal_masks(mha, lengths):
    """{"mask_<L>"}: causal_mask(L) for each length."""
    return {f"mask_{length}": mha.masking.causal_mask(length) for length in lengths}


# ### BEGIN HIDDEN CHECKS (observers only hidden checks use: left out of a student release)


def causal_mask_on(mha, length, device):
    """The device, shape and dtype of causal_mask(length, device=torch.device(device))."""
    mask = mha.masking.causal_mask(length, device=torch.device(device))
    return {
        "device": str(getattr(mask, "device", None)),
        "shape": tuple(getattr(mask, "shape", ())),
        "dtype": str(getattr(mask, "dtype", None)),
    }


def both_masks(mha, ids, pad_id, length):
    """{"padding", "causal"}: padding_mask(ids, pad_id=pad_id) and causal_mask(length)."""
    return {"padding": mha.masking.padding_mask(ids, pad_id=pad_id), "causal": mha.masking.causal_mask(length)}
