"""Known mistakes of step `grouped_query_attention`, each a list of knob settings of the model
(mistakes/model.py). Instructor-only."""

from . import Mistake

MISTAKES = [
    Mistake("kv_heads_tiled", {"repeat": "tile"}),
    Mistake("kv_repeated_on_wrong_axis", {"repeat": "seq"}),
    Mistake("gqa_kv_not_repeated", {"repeat": "none"}),
    Mistake("gqa_no_error_when_not_divisible", {"gqa_check": "none"}),
    Mistake("gqa_no_scale", {"gqa_scale": False}),
    Mistake("gqa_mask_ignored", {"gqa_mask": "ignored"}),
]
