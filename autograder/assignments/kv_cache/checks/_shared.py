"""What several steps' checks use (not a step: the engine loads only checks modules whose names
do not start with `_`). The student release ships what its public checks still use once their
oracles are out (engine/generate/stored_checks.py).
"""

import torch


def mask_by_hand(q_len, k_len):
    """Query i sits at position k_len - q_len + i and may see keys 0..that: True = blocked."""
    return torch.tensor([[j > k_len - q_len + i for j in range(k_len)] for i in range(q_len)])
