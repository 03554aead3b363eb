"""Correct code in public implementations' styles that the grader still marks down (issue 22).

tests/styles.py holds the styles; the ones that get full marks today are graded with the other
variants (tests/test_variants.py, seeds 11, 12 and 13). The ones here lose points today, each for
the reason it carries. They are expected failures, strictly: when a style starts passing, the
strict xfail fails, and the style moves to STYLES_PASSING. (The 11 measured in issue 22 moved
there when the grader began to find the parts by what they do; the list is empty until a new
style is found that loses points.)
"""

import pytest

from conftest import SOLUTIONS, full_marks, grade_with_hidden
from styles import STYLES, STYLES_FAILING, STYLES_PASSING


def test_every_style_changes_the_reference_and_ids_are_unique():
    ids = [style.id for style in STYLES]
    assert len(ids) == len(set(ids))
    for style in STYLES:
        source = (SOLUTIONS / "mha" / style.file).read_text()
        assert style.apply(source) != source, style.id
        assert style.reason is None or style in STYLES_FAILING, style.id
    assert all(style.reason for style in STYLES_FAILING)
    assert not set(ids[: len(STYLES_PASSING)]) & {style.id for style in STYLES_FAILING}


@pytest.mark.parametrize(
    "style",
    [pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=s.reason)) for s in STYLES_FAILING],
    ids=lambda s: s.id,
)
@pytest.mark.parametrize(
    "seed", [11, pytest.param(12, marks=pytest.mark.slow), pytest.param(13, marks=pytest.mark.slow)]
)
def test_style_gets_full_marks_and_no_diagnosis(config, submission, style, seed):
    result = grade_with_hidden(submission(mistake=style), config, seed=seed)
    assert full_marks(result) == [], [(s.id, [c.message for c in s.checks if c.passed is False]) for s in result.steps]
    assert [(s.id, s.diagnoses) for s in result.steps if s.diagnoses] == []
