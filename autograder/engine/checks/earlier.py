"""The judge's half of harness/earlier.py: one mistake, one charge in an integration step.

    fail = judge_with_earlier_steps(got, judge_own, table, tol)

`judge_own(observations)` judges the module's own run. Where it fails, and the observer also ran
the module with written-out versions of earlier steps' functions (harness.earlier.WRITTEN_OUT),
the module is right when that run passes and the judge itself finds at least one of the
functions replaced wrong: the student's results on the probe differ from the written-out ones
(or it raised). The mistake is then charged in that earlier step alone.

Why the judge's own finding and not the observer's: the judge decides every verdict from its own
facts. A function the judge finds right (within the step's tolerance) must not excuse the module:
a mistake it does not see would then be charged nowhere. The finding is the same in every route,
whether or not the earlier step is graded in the same run (`-k`, one step of a notebook).
"""

import torch

from autograder.engine.checks.check import Fail, compare
from autograder.harness.earlier import OWN_RAISED, WRITTEN_OUT


def own_run(values):
    """An observation's values without the run with earlier functions written out: what the
    submission's own code computed. Diagnosis compares only that: which earlier functions a
    module calls says where its code lives, not what it computes (a module that scales by
    sqrt(d_model) inline and a model of that mistake made through the attention function are
    the same mistake)."""
    if isinstance(values, dict) and WRITTEN_OUT in values:
        return {key: value for key, value in values.items() if key != WRITTEN_OUT}
    return values


def judge_with_earlier_steps(got, judge_own, table, tol):
    """judge_own's verdict on the module's own run, unless the run with the earlier steps' wrong
    functions written out passes (see the module docstring)."""
    written_out = got.get(WRITTEN_OUT) if isinstance(got, dict) else None
    raised = got.get(OWN_RAISED) if isinstance(got, dict) else None
    if isinstance(raised, dict):
        fail = Fail(
            "raised",
            {
                "type": str(raised.get("type", ""))[:100],
                "message": str(raised.get("message", "")) or "(no message)",
                "where": str(raised.get("where", "")),
            },
        )
    else:
        fail = judge_own({key: value for key, value in got.items() if key != WRITTEN_OUT})
    if fail is None or not isinstance(written_out, dict) or written_out.get("values") is None:
        return fail
    functions = written_out.get("functions")
    probes = written_out.get("probes")
    if not isinstance(functions, (list, tuple)) or not isinstance(probes, dict):
        return fail
    entries = [entry for entry in table if entry.name in functions]
    if not any(wrong_on_probe(entry, probes.get(entry.name), tol) for entry in entries):
        return fail
    return fail if judge_own(written_out["values"]) else None


def forbidden_excused(values, forbidden) -> bool:
    """Whether every forbidden call of an integration step's run (`forbidden`) was made inside an
    earlier step's function, which that step charges: the observer found each of them in a
    function's probe, and the run with those functions written out made none and finished.
    The module is then judged on its values, as for an earlier function wrong by value."""
    written_out = values.get(WRITTEN_OUT) if isinstance(values, dict) else None
    if not forbidden or not isinstance(written_out, dict) or written_out.get("values") is None:
        return False
    inside, after = written_out.get("forbidden_in"), written_out.get("written_out_forbidden")
    if not isinstance(inside, dict) or after != []:
        return False
    names = {name for calls in inside.values() if isinstance(calls, list) for name in calls if isinstance(name, str)}
    return set(forbidden) <= names


def wrong_on_probe(entry, theirs, tol) -> bool:
    """Whether the student's results on the entry's probe (None: it raised) are wrong, judged
    against the written-out version's within `tol`; where the contract leaves a result open
    (entry.care), only that it is finite."""
    mine = entry.results(entry.by_hand)
    cares = [entry.care(args, kwargs) for args, kwargs in entry.calls()] if entry.care is not None else []
    if not isinstance(theirs, (list, tuple)) or len(theirs) != len(mine):
        return True
    for index, (result, want) in enumerate(zip(theirs, mine)):
        care = cares[index] if index < len(cares) else None
        if isinstance(want, list):
            if not isinstance(result, (list, tuple)) or len(result) != len(want):
                return True
            pairs = list(zip(result, want))
        else:
            pairs = [(result, want)]
        for got, expected in pairs:
            if not isinstance(got, torch.Tensor):
                return True
            if care is not None and expected.is_floating_point() and got.shape == expected.shape:
                where = care.expand_as(expected)
                if not bool(torch.isfinite(got[~where]).all()):
                    return True
                got = torch.where(where, got, torch.zeros_like(got))
                expected = torch.where(where, expected, torch.zeros_like(expected))
            if compare(got, expected, tol) is not None:
                return True
    return False
