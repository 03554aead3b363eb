"""Known mistakes of step `qkv_projection`, each a list of knob settings of the model (mistakes/model.py).

Instructor-only. Used by the diagnosis (autograder/engine/mistakes/diagnosis.py) and by the fingerprints shipped
to students (autograder/engine/mistakes/fingerprints.py); never imported where student code runs.
"""

import itertools

from . import SHARED, Mistake

MISTAKES = [
    # k and/or v (or q) computed with another projection's layer, at call time (k = self.w_q(x))
    # or by making two attributes one layer (self.w_k = self.w_q)
    Mistake("qkv_shared_weight", *SHARED),
    Mistake("qkv_fused_split_per_head", {"fused_split": "per_pair"}, {"fused_split": "interleaved"}),
    Mistake("qkv_fused_split_wrong_dim", {"fused_split": "wrong_dim"}),
    Mistake(
        "qkv_wrong_order", *({"fused_order": "".join(p)} for p in itertools.permutations("qkv") if p != tuple("qkv"))
    ),
    Mistake("qkv_bias_always_on", {"qkv_bias_always": True}),
    Mistake("qkv_fused_bias_always_on", {"fused_bias_always": True}),
]
