"""engine/judge/charged_once.py: an exception raised on every device is excused only where a step
that judges the raising code alone charges the same exception at the same place, in a phase the
check may read."""

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from autograder.engine.checks.check import Fail
from autograder.engine.judge import charged_once
from autograder.engine.mistakes.diagnosis import Record

WHERE = "mha/output.py, line 66, in forward"


@dataclass(eq=False)
class FakeCheck:
    id: str
    visibility: str = "public"
    charged_where_raised: bool = False


@dataclass
class FakeRun:
    module: object
    outcomes: dict = field(default_factory=dict)
    records: list = field(default_factory=list)


def on_both(where=WHERE, kind="RuntimeError"):
    return Fail(
        "failed_on_both_devices", {"name": "output_projection", "error": f"{kind}: x", "type": kind, "where": where}
    )


def raised(where=WHERE, kind="RuntimeError"):
    return Fail("raised", {"type": kind, "message": "x", "where": where})


def runs(own_fail, other_fail, integrates=False, other_visibility="public", cuda_visibility="public"):
    cuda = FakeCheck("output_projection", cuda_visibility, charged_where_raised=True)
    other = FakeCheck("values", other_visibility)
    step = FakeRun(SimpleNamespace(INTEGRATES=integrates), {other: (other_fail is None, other_fail)})
    device = FakeRun(SimpleNamespace(INTEGRATES=True), {cuda: (False, own_fail)})
    device.records.append(Record(cuda, {}, None, own_fail))
    return [step, device], cuda


def excused(all_runs, cuda, hidden=False):
    charged_once.excuse(all_runs, hidden=hidden)
    passed, fail = all_runs[1].outcomes[cuda]
    assert (fail is None) == all(r.fail is None for r in all_runs[1].records if r.check is cuda)
    return passed is True and fail is None


def test_the_same_exception_charged_by_its_own_step_is_excused():
    assert excused(*runs(on_both(), raised()))


@pytest.mark.parametrize(
    "other",
    [
        raised(where="mha/output.py, line 67, in forward"),  # another place
        raised(kind="ValueError"),  # another exception
        Fail("values", {"name": "out", "where": WHERE, "type": "RuntimeError"}),  # charged, but not as raised
        None,  # the step passed: the code raises only in the cuda scenario
    ],
)
def test_an_exception_not_charged_at_that_place_is_not_excused(other):
    assert not excused(*runs(on_both(), other))


def test_an_integration_step_charging_it_is_no_excuse():
    """The module's own code: raising costs the module step and the cuda step."""
    assert not excused(*runs(on_both(), raised(), integrates=True))


def test_a_public_check_reads_no_hidden_verdict():
    assert not excused(*runs(on_both(), raised(), other_visibility="hidden"))
    assert excused(*runs(on_both(), raised(), other_visibility="public", cuda_visibility="hidden"), hidden=True)


def test_a_place_unknown_or_a_check_that_does_not_declare_it_is_not_excused():
    assert not excused(*runs(on_both(where=""), raised(where="")))
    all_runs, cuda = runs(on_both(), raised())
    cuda.charged_where_raised = False
    assert not excused(all_runs, cuda)
