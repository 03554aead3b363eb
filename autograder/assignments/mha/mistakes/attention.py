"""Known mistakes of step `attention`, each a list of knob settings of the model (mistakes/model.py).

Instructor-only. Used by the diagnosis (autograder/diagnosis.py) and by the fingerprints shipped
to students (autograder/fingerprints.py); never imported where student code runs.
"""

from . import Mistake

MISTAKES = [
    Mistake("scale_by_d_model", {"scale": "d_model"}),
    Mistake("no_scale", {"scale": "none"}),
    Mistake("scale_not_sqrt", {"scale": "d_k_not_sqrt"}),
    Mistake("scale_inverted", {"scale": "inverted"}),
    Mistake("scale_by_d_v", {"scale": "d_v"}),
    Mistake("scale_after_softmax", {"scale_place": "weights"}),
    # Normalising over the queries cannot block keys, so the mask path breaks too.
    Mistake("softmax_wrong_dim", {"softmax_dim": -2}, {"softmax_dim": 1}, also_breaks=("masking",)),
    Mistake("no_softmax", {"softmax": False}, also_breaks=("masking",)),
    Mistake("k_not_transposed", {"k_transpose": None}, {"k_transpose": (1, 2)}, also_breaks=("masking",)),
    Mistake("returns_swapped", {"returns": "weights_out"}, also_breaks=("masking",)),
    Mistake("weights_before_softmax", {"weights_are_scores": True}, also_breaks=("masking",)),
    Mistake("output_upcast", {"out_upcast": True}),
]
