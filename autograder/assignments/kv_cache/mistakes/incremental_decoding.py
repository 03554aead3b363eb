"""Known mistakes of step `incremental_decoding`, each a list of knob settings of the model
(mistakes/model.py). Instructor-only."""

from . import Mistake

MISTAKES = [
    Mistake("decode_positions_restart", {"offset": "zero"}),
    Mistake("decode_offset_off_by_one", {"offset": "plus_one"}, {"offset": "minus_one"}),
    Mistake("decode_ignores_cache", {"decode_keys": "chunk"}, {"decode_keys": "no_update"}),
    Mistake("decode_no_mask", {"decode_mask": "none"}),
    Mistake("decode_mask_for_chunk_only", {"decode_mask": "chunk_len"}),
    Mistake("decode_no_scale", {"decode_scale": False}),
    Mistake("decode_mask_ignores_device", {"decode_mask_device": False}),
]
