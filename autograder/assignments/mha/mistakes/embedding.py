"""Known mistakes of step `embedding`, each a list of knob settings of the model (mistakes/model.py).

Instructor-only. Used by the diagnosis (autograder/engine/mistakes/diagnosis.py) and by the fingerprints shipped
to students (autograder/engine/mistakes/fingerprints.py); never imported where student code runs.
"""

from . import Mistake

MISTAKES = [
    Mistake("embedding_no_padding_idx", {"emb_padding_idx": None}),
    Mistake("embedding_pad_row_trained", {"emb_padding_idx": "zeroed_row"}),
    Mistake("embedding_padding_idx_zero", {"emb_padding_idx": "zero"}),
    Mistake("embedding_scaled", {"emb_scale": True}),
]
