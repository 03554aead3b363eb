"""Known mistakes of step `masking`, each a list of knob settings of the model (mistakes/model.py).

Instructor-only. Used by the diagnosis (autograder/engine/mistakes/diagnosis.py) and by the fingerprints shipped
to students (autograder/engine/mistakes/fingerprints.py); never imported where student code runs.
"""

from . import Mistake

MISTAKES = [
    Mistake("mask_fill_zero", {"fill": "zero"}),
    Mistake("mask_after_softmax", {"mask_place": "after_softmax"}),
    Mistake("mask_added", {"mask_place": "add"}),
    Mistake("mask_ignored", {"mask_place": "ignored"}),
    Mistake("mask_inverted", {"mask_invert": True}),
    Mistake("fully_masked_nan", {"fill": "-inf"}),
    Mistake("mask_fill_positive", {"fill": "+inf"}),  # -float('-inf') is +inf: blocked keys win
    Mistake("mask_on_queries", {"padding_mask_shape": "queries"}),
    Mistake("padding_mask_not_broadcastable", {"padding_mask_shape": "flat"}, {"padding_mask_shape": "three_dims"}),
    Mistake("padding_mask_inverted", {"padding_mask_invert": True}),
    Mistake("padding_mask_ignores_pad_id", {"padding_mask_pad_id": False}),
    Mistake("causal_includes_diagonal", {"causal": "triu0"}),
    Mistake("causal_wrong_direction", {"causal": "tril-1"}),
    Mistake("causal_inverted", {"causal": "tril0"}),
    Mistake("causal_ignores_device", {"causal_device": False}),
]
