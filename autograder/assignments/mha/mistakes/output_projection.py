"""Known mistakes of step `output_projection`, each a list of knob settings of the model (mistakes/model.py).

Instructor-only. Used by the diagnosis (autograder/engine/mistakes/diagnosis.py) and by the fingerprints shipped
to students (autograder/engine/mistakes/fingerprints.py); never imported where student code runs.
"""

from . import Mistake

MISTAKES = [
    Mistake("out_no_merge_transpose", {"merge": "no_transpose"}),
    Mistake("out_merge_interleaved", {"merge": "interleaved"}),
    Mistake("out_merge_view_not_contiguous", {"merge": "view_not_contiguous"}),
    Mistake("heads_summed", {"merge": "sum"}),
    Mistake("out_missing_bias", {"out_bias": "never"}),
    Mistake("out_bias_always_on", {"out_bias": "always"}),
]
