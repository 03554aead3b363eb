"""Known mistakes of step `qkv_projection`: the reference with one specific error planted.

Instructor-only: the patches quote reference code. Used by the diagnosis (autograder/diagnosis.py)
and by the kit's fairness tests; never imported where student code runs.
"""
from ..check import Mistake

MISTAKES = [
    Mistake("qkv_shared_weight", "projection.py", [("k = self.w_k(x)", "k = self.w_q(x)")]),
    Mistake("qkv_fused_split_per_head", "projection.py", [
        ("q, k, v = qkv.split(self.d_model, dim=-1)",
         "q, k, v = [t.reshape(x.shape) for t in qkv.view(*x.shape[:-1], 2, -1).chunk(3, dim=-1)]")]),
    Mistake("qkv_wrong_order", "projection.py", [("q, k, v = qkv.split(", "k, q, v = qkv.split(")]),
    Mistake("qkv_bias_always_on", "projection.py", [
        ("self.w_q = nn.Linear(d_model, d_model, bias=bias)", "self.w_q = nn.Linear(d_model, d_model)")]),
    Mistake("qkv_fused_bias_always_on", "projection.py", [
        ("self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)\n", "self.c_attn = nn.Linear(d_model, 3 * d_model)\n")]),
]
