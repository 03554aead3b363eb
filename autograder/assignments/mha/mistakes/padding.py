"""Known mistakes of step `padding`, each a list of knob settings of the model (mistakes/model.py).

Instructor-only. Used by the diagnosis (autograder/engine/mistakes/diagnosis.py) and by the fingerprints shipped
to students (autograder/engine/mistakes/fingerprints.py); never imported where student code runs.
"""

import torch

from . import Mistake

MISTAKES = [
    Mistake("pad_mask_inverted", {"pad_mask_true": "token"}),
    Mistake("pad_mask_from_ids", {"pad_mask_true": "pad_id"}),
    Mistake("pad_mask_after_padding", {"pad_mask_true": "nothing"}),
    Mistake("pad_left", {"pad_side": "left"}),
    Mistake("pad_no_truncate", {"pad_truncate": False}),
    Mistake("pad_mutates_input", {"pad_mutate": "extend"}, {"pad_mutate": "replace"}),
    Mistake("pad_ignores_pad_id", {"pad_fill": "zero"}),
    Mistake("pad_ignores_longer_max_len", {"pad_keep_longer_max_len": False}),
    Mistake("pad_rejects_empty_sequence", {"pad_empty_sequence": "reject"}),
    Mistake("pad_empty_batch_no_error", {"pad_empty_batch": "zeros"}, {"pad_empty_batch": "index"}),
    Mistake(
        "pad_mask_not_bool",
        *({"pad_mask_dtype": d} for d in (torch.long, torch.int32, torch.uint8, torch.float32, torch.float64)),
    ),
    Mistake("pad_ids_not_long", *({"pad_ids_dtype": d} for d in (torch.int32, torch.float32, torch.float64))),
]
