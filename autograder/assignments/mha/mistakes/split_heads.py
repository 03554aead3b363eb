"""Known mistakes of step `split_heads`, each a list of knob settings of the model (mistakes/model.py).

Instructor-only. Used by the diagnosis (autograder/engine/mistakes/diagnosis.py) and by the fingerprints shipped
to students (autograder/engine/mistakes/fingerprints.py); never imported where student code runs.
"""

from . import Mistake

MISTAKES = [
    Mistake("split_without_transpose", {"split": "view_only"}),
    Mistake("split_interleaved", {"split": "interleaved"}),
    Mistake("split_one_slice", {"split": "one_slice"}),
    Mistake("merge_without_transpose", {"merge": "no_transpose"}),
    Mistake("merge_interleaved", {"merge": "interleaved"}),
    Mistake("merge_view_not_contiguous", {"merge": "view_not_contiguous"}),
    Mistake("split_no_divisibility_check", {"split_check": "none"}, {"split_check": "assert"}),
]
