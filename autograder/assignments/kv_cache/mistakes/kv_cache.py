"""Known mistakes of step `kv_cache`, each a list of knob settings of the model (mistakes/model.py).

Instructor-only. Used by the diagnosis and by the fingerprints shipped to students; never
imported where student code runs.
"""

from . import Mistake

MISTAKES = [
    Mistake("cache_wrong_dim", {"cache_dim": 1}, {"cache_dim": 3}),
    Mistake("cache_prepends", {"cache_order": "prepend"}),
    Mistake("cache_keeps_last_chunk", {"cache_keep": "last"}),
    Mistake("cache_len_counts_updates", {"cache_len": "updates"}),
    Mistake("cache_len_wrong_axis", {"cache_len": "heads"}),
    Mistake("cache_reset_keeps", {"cache_reset": "noop"}),
    Mistake("cache_shared_between_instances", {"cache_storage": "class"}),
    Mistake("cache_values_from_keys", {"cache_values": "keys"}),
]
