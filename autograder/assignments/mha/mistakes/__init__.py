"""Known mistakes per step (instructor-only: they are a second reference), one module per step id.

Each module defines MISTAKES, a list of Mistake: a specific, common error modelled by what it
computes, as one or more knob settings of the model in mistakes/model.py (the ways of making
the same mistake that compute different things: `k = self.w_q(x)` and `self.w_k = self.w_q`
give different outputs once the grader loads its weights). The diagnosis runs them on a
failing step's checks; `python -m autograder fingerprints` stores what they observe on the
public checks for the student release.
"""

import itertools

from autograder.engine.course.assignment import Mistake  # noqa: F401 - the step modules import it from here

LAYERS = ("w_q", "w_k", "w_v")
# q, k, v computed with layers that are not all different (k = self.w_q(x), ...), and two
# attributes made one layer (self.w_k = self.w_q: loading w_k's weights then overwrites w_q's).
SHARED = tuple(
    {"q_from": q, "k_from": k, "v_from": v} for q, k, v in itertools.product(LAYERS, repeat=3) if len({q, k, v}) < 3
) + (
    {"alias": (("w_k", "w_q"),)},
    {"alias": (("w_v", "w_q"),)},
    {"alias": (("w_k", "w_q"), ("w_v", "w_q"))},
    {"alias": (("w_v", "w_k"),)},
)
# (Each of q, k, v from its own layer but not the one of its name is no mistake: the grader finds
# the projections by the output each gives, issue 22.)
