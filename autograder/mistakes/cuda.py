"""Known mistakes of step `cuda`: the reference with one specific error planted.

Instructor-only: the patches quote reference code. Used by the diagnosis (autograder/diagnosis.py)
and by the kit's fairness tests; never imported where student code runs.
"""
from ..check import Mistake

MISTAKES = [
    Mistake("cpu_tensor_in_forward", "mha.py", [
        ("blocked = torch.zeros(Lq, Lk, dtype=torch.bool, device=scores.device)",
         "blocked = torch.zeros(Lq, Lk, dtype=torch.bool)")]),
    Mistake("mask_not_buffer", "mha.py", [
        ("        self.dropout = nn.Dropout(dropout)\n",
         "        self.dropout = nn.Dropout(dropout)\n"
         "        self.future = torch.triu(torch.ones(256, 256, dtype=torch.bool), diagonal=1)\n"),
        ("blocked = torch.ones_like(blocked).triu(diagonal=1)  # (Lq, Lk)", "blocked = self.future[:Lq, :Lk]")]),
    Mistake("embedding_cpu_ids", "embedding.py", [
        ("return self.embedding(ids)  # (B, L, d_model)", "return self.embedding(ids.cpu())  # (B, L, d_model)")]),
    Mistake("output_on_cpu", "output.py", [
        ("return self.w_o(merged)  # (B, L, D)", "return self.w_o(merged.cpu())  # (B, L, D)")]),
    Mistake("mask_moved_to_cpu", "attention.py", [("scores.masked_fill(mask,", "scores.masked_fill(mask.cpu(),")]),
]
