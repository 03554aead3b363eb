"""Known mistakes per step (instructor-only: they quote the reference), one module per step id.

Each module defines MISTAKES, a list of check.Mistake: a specific, common error written as
patches on the reference. The diagnosis runs them on failing checks' inputs; the kit's tests
plant each one and check that it costs points in its own step only.
"""
import importlib
import importlib.util


def mistakes_of(step_id):
    """The step's MISTAKES ([] when the step has none)."""
    if importlib.util.find_spec(f"{__name__}.{step_id}") is None:
        return []
    return importlib.import_module(f"{__name__}.{step_id}").MISTAKES
