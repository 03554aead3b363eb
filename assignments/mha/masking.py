"""Step `masking` — which keys may a query not look at?

Two masks, both bool with True = BLOCKED:

  * padding mask: no query may attend to a padding token. From ids (B, L) it is True where
    ids == pad_id, shaped (B, 1, 1, L) so that it broadcasts over heads (dim 1) and over queries
    (dim 2) against scores of shape (B, H, Lq, Lk). The padding is on the KEY axis (the last).

  * causal mask: in a language model token i may only see tokens 0..i. For scores (L, L) this
    blocks everything above the diagonal:

        L = 4:  [[F, T, T, T],
                 [F, F, T, T],
                 [F, F, F, T],
                 [F, F, F, F]]

    Create it directly on `device`: a mask built on the CPU cannot be combined with scores that
    live on a GPU.
"""
import torch


def padding_mask(ids, pad_id=0):
    """ids int64 (B, L) -> bool (B, 1, 1, L), True where ids == pad_id."""
    # TODO
    raise NotImplementedError("TODO")


def causal_mask(seq_len, device=None):
    """-> bool (seq_len, seq_len) on `device`, True strictly above the diagonal."""
    # TODO
    raise NotImplementedError("TODO")
