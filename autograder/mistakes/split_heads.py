"""Known mistakes of step `split_heads`: the reference with one specific error planted.

Instructor-only: the patches quote reference code. Used by the diagnosis (autograder/diagnosis.py)
and by the kit's fairness tests; never imported where student code runs.
"""
from ..check import Mistake

MISTAKES = [
    Mistake("split_without_transpose", "heads.py", [
        ("    x = x.view(B, L, num_heads, d_k)  # (B, L, H, d_k)\n    return x.transpose(1, 2)",
         "    return x.view(B, num_heads, L, d_k)")]),
    Mistake("merge_without_transpose", "heads.py", [
        ("x = x.transpose(1, 2).contiguous()", "x = x.contiguous()")]),
    Mistake("merge_view_not_contiguous", "heads.py", [
        ("x = x.transpose(1, 2).contiguous()", "x = x.transpose(1, 2)")]),
    Mistake("split_no_divisibility_check", "heads.py", [
        ('raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")', "pass")]),
]
