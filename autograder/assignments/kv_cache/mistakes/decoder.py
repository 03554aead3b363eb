"""Known mistakes of step `decoder`, each a list of knob settings of the model (mistakes/model.py).
Instructor-only."""

from . import Mistake

MISTAKES = [
    Mistake("decoder_positions_restart", {"dec_positions": "restart"}),
    Mistake("decoder_kv_projection_too_wide", {"dec_kv_width": "d_model"}),
    Mistake("decoder_heads_merged_without_transpose", {"dec_merge": "view"}),
    # the cache never updated, or updated and its answer dropped: the same outputs, told apart by
    # what the cache was given (cache_holds_kv_heads)
    Mistake("decoder_ignores_cache", {"dec_cache": "ignore"}, {"dec_cache": "dropped"}),
    Mistake("decoder_no_divisibility_check", {"dec_check": "none"}),
    Mistake("decoder_caches_repeated_heads", {"dec_cache_heads": "repeated"}),
    Mistake("decoder_kv_viewed_as_query_heads", {"dec_kv_view": "query"}),
    Mistake("decoder_mask_skipped_with_cache", {"dec_mask": "without_cache"}),
]
