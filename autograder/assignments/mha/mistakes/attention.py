"""Known mistakes of step `attention`, each a list of knob settings of the model (mistakes/model.py).

Instructor-only. Used by the diagnosis (autograder/engine/mistakes/diagnosis.py) and by the fingerprints shipped
to students (autograder/engine/mistakes/fingerprints.py); never imported where student code runs.
"""

from . import Mistake

MISTAKES = [
    Mistake("scale_by_d_model", {"scale": "d_model"}),
    Mistake("no_scale", {"scale": "none"}),
    Mistake("scale_not_sqrt", {"scale": "d_k_not_sqrt"}),
    Mistake("scale_inverted", {"scale": "inverted"}),
    # `d_k ** 1/2` and `d_k ** -1/2`: ** binds before /, so these are d_k / 2 and 1 / (2 d_k),
    # as a divisor or as a factor (equal to the right scale only when d_k = 4)
    Mistake(
        "scale_precedence",
        {"scale": "half"},
        {"scale": "half_factor"},
        {"scale": "negative_half"},
        {"scale": "negative_half_divisor"},
    ),
    Mistake("scale_by_num_heads", {"scale": "size_1"}),
    Mistake("scale_by_d_v", {"scale": "d_v"}),
    Mistake("scale_after_softmax", {"scale_place": "weights"}),
    # Each variant says which dim it normalises: the queries (dim -2), dim 1 (the heads of 4-D
    # scores), or the dim that nn.Softmax() without dim picks (the heads of 4-D scores, the batch
    # of 3-D ones). None of these costs the masking step: it is judged beside the reference's
    # attention (one mistake, one charge).
    Mistake(
        "softmax_wrong_dim",
        {"softmax_dim": -2},
        {"softmax_dim": 1},
        {"softmax_dim": "implicit"},
        says=(None, "softmax_over_dim_1", "softmax_without_dim"),
    ),
    Mistake("no_softmax", {"softmax": False}),
    Mistake("k_not_transposed", {"k_transpose": None}, {"k_transpose": (1, 2)}),
    # k.view / k.reshape to (..., d_k, Lk): the shape of k^T with k's numbers in the wrong places
    Mistake("k_viewed_not_transposed", {"k_transpose": "view"}),
    Mistake("returns_swapped", {"returns": "weights_out"}),
    Mistake("weights_before_softmax", {"weights_are_scores": True}),
    Mistake("output_upcast", {"out_upcast": True}),
]
