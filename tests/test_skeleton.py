"""How a skeleton is made from a solution (every assignment's own skeleton is up to date, leaks
nothing and keeps a TODO region per graded file: tests/test_assignment_contract.py)."""

import pytest

from autograder.engine.generate.skeleton import skeleton_source


def test_regions_become_not_implemented_at_their_indentation():
    source = "def f(x):\n    # TODO: double x\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n"
    assert skeleton_source(source) == 'def f(x):\n    # TODO: double x\n    raise NotImplementedError("TODO")\n'


@pytest.mark.parametrize(
    "source",
    [
        "### BEGIN SOLUTION\nx = 1\n",
        "x = 1\n### END SOLUTION\n",
        "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n",
    ],
)
def test_unbalanced_markers_are_errors(source):
    with pytest.raises(ValueError):
        skeleton_source(source)
