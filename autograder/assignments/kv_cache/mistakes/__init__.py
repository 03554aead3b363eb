"""Known mistakes of the kv_cache assignment per step (instructor-only: a second reference), one
module per step id, each defining MISTAKES: a list of Mistake, a specific, common error modelled
by what it computes, as one or more knob settings of mistakes/model.py.
"""

from autograder.engine.course.assignment import Mistake  # noqa: F401 - the step modules import it from here
