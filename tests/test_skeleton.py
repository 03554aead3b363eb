"""assignments/mha is generated from solutions/mha and must be up to date."""

import pytest

from autograder.engine.skeleton import skeleton_source, solution_regions, write_skeletons
from conftest import ASSIGNMENTS, SOLUTIONS


def test_assignments_are_up_to_date_with_solutions():
    stale = write_skeletons(SOLUTIONS / "mha", ASSIGNMENTS / "mha", dry_run=True)
    assert stale == [], "run `python -m autograder skeleton` and commit assignments/"


def test_no_solution_code_reaches_the_skeletons():
    for source_path in (SOLUTIONS / "mha").glob("*.py"):
        skeleton = (ASSIGNMENTS / "mha" / source_path.name).read_text()
        for region in solution_regions(source_path.read_text()):
            for line in region.splitlines():
                if line.strip() and not line.strip().startswith("#"):
                    assert line not in skeleton, f"{source_path.name}: {line.strip()!r} leaked"


def test_every_step_file_has_a_todo_region():
    for name in ["padding", "embedding", "projection", "heads", "attention", "masking", "output", "mha"]:
        assert solution_regions((SOLUTIONS / "mha" / f"{name}.py").read_text()), name


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
