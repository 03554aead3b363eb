"""Valid variants: correct code written differently scores full marks with no diagnosis."""

import pytest

from conftest import SOLUTIONS, full_marks, grade_with_hidden
from variants import VARIANTS


def test_every_variant_changes_the_reference():
    """A variant whose patch no longer applies (the reference moved on) raises here, and one
    that changes nothing would prove nothing."""
    for variant in VARIANTS:
        source = (SOLUTIONS / "mha" / variant.file).read_text()
        assert variant.apply(source) != source, variant.id


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.id)
@pytest.mark.parametrize(
    "seed", [11, pytest.param(12, marks=pytest.mark.slow), pytest.param(13, marks=pytest.mark.slow)]
)
def test_variant_gets_full_marks_and_no_diagnosis(config, submission, variant, seed):
    result = grade_with_hidden(submission(mistake=variant), config, seed=seed)
    assert full_marks(result) == [], [(s.id, [c.message for c in s.checks if c.passed is False]) for s in result.steps]
    assert [(s.id, s.diagnoses) for s in result.steps if s.diagnoses] == []
