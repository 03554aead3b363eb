"""Known mistakes of step `output_projection`: the reference with one specific error planted.

Instructor-only: the patches quote reference code. Used by the diagnosis (autograder/diagnosis.py)
and by the kit's fairness tests; never imported where student code runs.
"""
from ..check import Mistake

MISTAKES = [
    Mistake("out_no_merge_transpose", "output.py", [
        ("heads.transpose(1, 2).contiguous().view(B, L, H * d_k)", "heads.contiguous().view(B, L, H * d_k)")]),
    Mistake("out_missing_bias", "output.py", [
        ("self.w_o = nn.Linear(d_model, d_model, bias=bias)\n", "self.w_o = nn.Linear(d_model, d_model, bias=False)\n")]),
]
