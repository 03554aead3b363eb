"""Known mistakes of step `decoder`, each a list of knob settings of the model (mistakes/model.py).
Instructor-only."""

from . import Mistake

MISTAKES = [
    Mistake("decoder_positions_restart", {"dec_positions": "restart"}),
    Mistake("decoder_kv_projection_too_wide", {"dec_kv_width": "d_model"}),
    Mistake("decoder_heads_merged_without_transpose", {"dec_merge": "view"}),
    Mistake("decoder_ignores_cache", {"dec_cache": "ignore"}),
    Mistake("decoder_no_divisibility_check", {"dec_check": "none"}),
]
