"""Known mistakes of step `masking`: the reference with one specific error planted.

Instructor-only: the patches quote reference code. Used by the diagnosis (autograder/diagnosis.py)
and by the kit's fairness tests; never imported where student code runs.
"""
from ..check import Mistake

MISTAKES = [
    Mistake("mask_fill_zero", "attention.py", [("torch.finfo(scores.dtype).min)", "0.0)")]),
    Mistake("mask_after_softmax", "attention.py", [
        ("scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)", "pass"),
        ("    weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)\n",
         "    weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)\n"
         "    if mask is not None:\n        weights = weights.masked_fill(mask, 0.0)\n")]),
    Mistake("mask_inverted", "attention.py", [("scores.masked_fill(mask,", "scores.masked_fill(~mask,")]),
    Mistake("fully_masked_nan", "attention.py", [("torch.finfo(scores.dtype).min)", "float(\"-inf\"))")]),
    Mistake("mask_on_queries", "masking.py", [("[:, None, None, :]", "[:, None, :, None]")]),
    Mistake("padding_mask_ignores_pad_id", "masking.py", [("(ids == pad_id)", "(ids == 0)")]),
    Mistake("causal_includes_diagonal", "masking.py", [("torch.triu(ones, diagonal=1)", "torch.triu(ones, diagonal=0)")]),
    Mistake("causal_wrong_direction", "masking.py", [("torch.triu(ones, diagonal=1)", "torch.tril(ones, diagonal=-1)")]),
    Mistake("causal_ignores_device", "masking.py", [("dtype=torch.bool, device=device)", "dtype=torch.bool)")]),
]
