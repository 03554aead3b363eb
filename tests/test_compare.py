"""compare_tensor's verdicts, pinned: its quick path for the common case (everything within
tolerance) must accept exactly what its full comparison accepts, and no more."""

import math

import pytest
import torch

from autograder.engine.checks.check import compare_tensor

TOL = {torch.float64: (1e-7, 1e-9), torch.float32: (1e-5, 1e-6)}


def verdict(got, expected, where=None):
    fail = compare_tensor(got, expected, TOL, name="out", where=where)
    return None if fail is None else fail.message_id


def test_equal_and_within_tolerance_pass():
    expected = torch.randn(3, 4, dtype=torch.float64)
    assert verdict(expected.clone(), expected) is None
    assert verdict(expected + 1e-10, expected) is None


def test_just_outside_tolerance_fails_at_the_worst_position():
    expected = torch.zeros(2, 3, dtype=torch.float64)
    got = expected.clone()
    got[0, 1], got[1, 2] = 1e-6, 5e-6
    fail = compare_tensor(got, expected, TOL)
    assert fail.message_id == "values"
    assert fail.params["index"] == (0, 1)  # the first mismatch
    assert fail.params["max_abs_index"] == (1, 2) and math.isclose(fail.params["max_abs"], 5e-6)
    assert fail.params["count"] == 2 and fail.params["got_dtype"] == "float64"


def float32_rounded(expected):
    """What float32 arithmetic would give: expected rounded to float32 a few times over."""
    return (expected.float() * 3).double() / 3 + expected.abs().max() * torch.finfo(torch.float32).eps


def test_a_float64_result_with_float32_rounding_passes():
    expected = torch.randn(4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    got = float32_rounded(expected)
    assert (got - expected).abs().max() > 1e-8  # far outside the float64 tolerance
    assert verdict(got, expected) is None


def test_a_float64_result_off_by_a_real_mistake_fails_with_every_figure_in_the_message():
    from autograder.engine.checks.messages import render

    expected = torch.randn(4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    got = expected * (1 + 1e-3)  # a thousand times less than the smallest mistake measured
    fail = compare_tensor(got, expected, TOL, name="out")
    assert fail.message_id == "values"
    text = render("values", **fail.params)
    for words in (
        "largest absolute error",
        "largest relative error 0.001",
        "float32 arithmetic",
        "got float64, expected float64",
        "the first at index (0, 0)",
    ):
        assert words in text, text


def test_float32_results_get_no_float16_tier():
    expected = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
    assert verdict(expected + expected.abs().max() * 1e-4, expected) == "values"


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_a_non_finite_value_where_a_finite_one_is_expected_fails(bad):
    expected = torch.ones(4, dtype=torch.float64)
    got = expected.clone()
    got[2] = bad
    assert verdict(got, expected) == "not_finite"


def test_matching_infinities_and_an_expected_nan_pass():
    expected = torch.tensor([math.inf, -math.inf, math.nan, 1.0], dtype=torch.float64)
    assert verdict(expected.clone(), expected) is None
    assert verdict(torch.tensor([math.inf, -math.inf, 7.0, 1.0], dtype=torch.float64), expected) is None


def test_an_infinity_of_the_wrong_sign_or_a_finite_value_for_an_infinity_fails():
    expected = torch.tensor([math.inf, 1.0], dtype=torch.float64)
    assert verdict(torch.tensor([-math.inf, 1.0], dtype=torch.float64), expected) == "values"
    assert verdict(torch.tensor([1e300, 1.0], dtype=torch.float64), expected) == "values"


def test_where_limits_the_comparison_to_the_positions_that_matter():
    expected = torch.zeros(2, 3, dtype=torch.float64)
    got = expected.clone()
    got[1, 0] = 1.0
    assert verdict(got, expected, where=torch.tensor([[True], [False]])) is None
    assert verdict(got, expected, where=torch.tensor([[False], [True]])) == "values"


def test_integers_and_booleans_compare_exactly():
    assert verdict(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 3])) is None
    assert verdict(torch.tensor([1, 2, 4]), torch.tensor([1, 2, 3])) == "exact_values"
    assert verdict(torch.tensor([True, False]), torch.tensor([True, True])) == "exact_values"


def test_form_comes_first():
    expected = torch.zeros(2, 3, dtype=torch.float64)
    assert verdict(torch.zeros(3, 2, dtype=torch.float64), expected) == "shape"
    assert verdict(torch.zeros(2, 3, dtype=torch.float32), expected) == "dtype"
    assert verdict([[0.0] * 3] * 2, expected) == "not_tensor"


def test_a_fill_beyond_float32_range_widens_no_tolerance():
    """float64's most negative number (a mask fill) cannot come from float32 arithmetic: it must
    not make the float32 rounding allowance of the other values astronomically large."""
    expected = torch.tensor([[0.25, -0.5, torch.finfo(torch.float64).min]], dtype=torch.float64)
    got = expected.clone()
    got[0, 0] += 1e-3  # a real error, far beyond float32 rounding of 0.25
    assert verdict(got, expected) == "values"
    assert verdict(expected.clone(), expected) is None
