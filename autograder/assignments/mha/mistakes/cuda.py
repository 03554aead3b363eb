"""Known mistakes of step `cuda`, each a list of knob settings of the model (mistakes/model.py).

Instructor-only. Used by the diagnosis (autograder/engine/mistakes/diagnosis.py) and by the fingerprints shipped
to students (autograder/engine/mistakes/fingerprints.py); never imported where student code runs.
"""

from . import Mistake

MISTAKES = [
    Mistake("cpu_tensor_in_forward", {"mha_mask_device": "cpu"}),
    Mistake("mask_not_buffer", {"mha_mask_buffer": False}),
    Mistake("embedding_cpu_ids", {"emb_ids_cpu": True}),
    Mistake("output_on_cpu", {"out_cpu": True}),
    Mistake("mask_moved_to_cpu", {"mask_cpu": True}),
]
