"""Known mistakes of step `attention`: the reference with one specific error planted.

Instructor-only: the patches quote reference code. Used by the diagnosis (autograder/diagnosis.py)
and by the kit's fairness tests; never imported where student code runs.
"""
from ..check import Mistake

MISTAKES = [
    Mistake("scale_by_d_model", "attention.py", [("d_k = q.size(-1)", "d_k = q.size(-1) * q.size(1)")]),
    Mistake("no_scale", "attention.py", [(" / math.sqrt(d_k)", "")]),
    Mistake("scale_not_sqrt", "attention.py", [("/ math.sqrt(d_k)", "/ d_k")]),
    # Normalising over the queries cannot block keys, so the mask path breaks too.
    Mistake("softmax_wrong_dim", "attention.py", [("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)")],
            also_breaks=("masking",)),
    Mistake("k_not_transposed", "attention.py", [("q @ k.transpose(-2, -1)", "q @ k")], also_breaks=("masking",)),
    Mistake("output_upcast", "attention.py", [("out = weights @ v", "out = weights.double() @ v.double()")]),
]
