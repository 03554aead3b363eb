"""The public checks: one test per check, grouped by step. Run them with

    pytest assignments/                 every step of every assignment here
    pytest assignments/ -k masking      one step (or --step masking)
    pytest assignments/ --assignment mha

Each failing check says what was expected and what your code gave. The table at the end adds
up your points per step. (The final grade also runs hidden checks on inputs you never see.)
"""
import pytest

from autograder.routes.pytest_plugin import public_checks, run_public_check


@pytest.mark.parametrize("check", public_checks(__file__))
def test_check(check, lab):
    run_public_check(check, lab)
