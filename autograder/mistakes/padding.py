"""Known mistakes of step `padding`: the reference with one specific error planted.

Instructor-only: the patches quote reference code. Used by the diagnosis (autograder/diagnosis.py)
and by the kit's fairness tests; never imported where student code runs.
"""
from ..check import Mistake

MISTAKES = [
    Mistake("pad_mask_inverted", "padding.py", [
        ("pad_mask = torch.ones(", "pad_mask = torch.zeros("), ("pad_mask[b, :n] = False", "pad_mask[b, :n] = True")]),
    Mistake("pad_left", "padding.py", [
        ("ids[b, :n] = ", "ids[b, L - n:] = "), ("pad_mask[b, :n] = False", "pad_mask[b, L - n:] = False")]),
    Mistake("pad_no_truncate", "padding.py", [
        ("lengths = [len(seq) if max_len is None else min(len(seq), max_len) for seq in sequences]",
         "lengths = [len(seq) for seq in sequences]"),
        ("L = max(lengths) if max_len is None else max_len", "L = max(lengths + [max_len or 0])")]),
    Mistake("pad_mutates_input", "padding.py", [
        ("    return ids, pad_mask", "    for seq in sequences:\n        seq.extend([pad_id] * (L - len(seq)))\n    return ids, pad_mask")]),
    Mistake("pad_ignores_pad_id", "padding.py", [("torch.full((len(sequences), L), pad_id,", "torch.full((len(sequences), L), 0,")]),
    Mistake("pad_ignores_longer_max_len", "padding.py", [
        ("L = max(lengths) if max_len is None else max_len", "L = max(lengths)")]),
    Mistake("pad_rejects_empty_sequence", "padding.py", [
        ("if len(sequences) == 0:", "if len(sequences) == 0 or min(map(len, sequences)) == 0:")]),
    Mistake("pad_empty_batch_no_error", "padding.py", [
        ('raise ValueError("pad_batch needs at least one sequence")',
         "return torch.zeros(0, 0, dtype=torch.long), torch.zeros(0, 0, dtype=torch.bool)")]),
]
