"""Step `padding` — turn token-id lists of different lengths into one rectangular batch.

A model works on tensors, and a tensor is a rectangle. Sentences have different lengths, so the
shorter ones are filled up on the RIGHT with a special token id, `pad_id`, until every row has
length L:

    [[5, 7, 9],          ids = [[5, 7, 9],       pad_mask = [[False, False, False],
     [4, 2]]      ->            [4, 2, 0]]                   [False, False, True ]]

`pad_mask` remembers which positions were added. Later, attention uses it so that no token
attends to padding. Mask convention in this kit: True = blocked (here: True = padding).
"""
import torch


def pad_batch(sequences, pad_id=0, max_len=None):
    """Right-pad a list of token-id lists into one tensor.

    Args:
        sequences: list of B lists of ints (token ids). Must not be modified.
        pad_id:    the id written into padding positions.
        max_len:   if given, L = max_len and longer sequences keep only their first max_len
                   tokens; if None, L = length of the longest sequence.

    Returns:
        ids:      int64 tensor (B, L), right-padded with pad_id.
        pad_mask: bool tensor (B, L), True exactly at the padding positions.

    Raises:
        ValueError: if `sequences` is empty (an empty *sequence* inside the batch is fine).
    """
    # TODO: build `ids` and `pad_mask` as described above. Work on copies (or build new
    # tensors): the caller's lists must come back unchanged.
    ### BEGIN SOLUTION
    if len(sequences) == 0:
        raise ValueError("pad_batch needs at least one sequence")
    lengths = [len(seq) if max_len is None else min(len(seq), max_len) for seq in sequences]
    L = max(lengths) if max_len is None else max_len
    ids = torch.full((len(sequences), L), pad_id, dtype=torch.long)  # (B, L)
    pad_mask = torch.ones(len(sequences), L, dtype=torch.bool)  # (B, L)
    for b, (seq, n) in enumerate(zip(sequences, lengths)):
        ids[b, :n] = torch.tensor(list(seq[:n]), dtype=torch.long)  # (n,)
        pad_mask[b, :n] = False
    return ids, pad_mask
    ### END SOLUTION
