"""The judge's half of harness/earlier.py: one mistake, one charge in an integration step.

    fail = judge_with_earlier_steps(got, judge_own, table, tol)

`judge_own(observations)` judges the module's own run. Where it fails, the judge first finds for
itself which earlier functions are wrong: the student's results on the probe differ from the
written-out version's (or it raised). None: the failure stands. Else:

* in the instructor's kit (it holds the written-out versions), the module is right when its run
  with those functions written out (harness.earlier.WRITTEN_OUT: "values") passes: the mistake is
  charged in that earlier step alone;
* in a student release (it holds none, so nothing was written out), the module's checks that
  failed after its run reached a wrong function are not judged here: they depend on that step
  (a Fail naming it, BLOCKED_BY that step: no points, the maximum kept), and the grade of record
  judges them with the function written out.

Why the judge's own finding and not the observer's: the judge decides every verdict from its own
facts. A function the judge finds right (within the step's tolerance) must not excuse the module:
a mistake it does not see would then be charged nowhere. Which kit this is (written-out versions
or not) is the judge's own fact too, never the worker's word.

A forbidden call is excused (forbidden_excused) only where the module's own code made none: every
call of its run was made inside a wrong earlier function that made it on its probe too (the
worker's "forbidden_own" is empty), and, in the instructor's kit, the run with those functions
written out made none and finished.
"""

import torch

from autograder.engine.checks.check import Fail, compare
from autograder.harness.earlier import OWN_RAISED, WRITTEN_OUT, expected_results, versions

BLOCKED_BY = "blocked_by"  # as verdict.BLOCKED_BY: the step whose mistake keeps a check from a verdict


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
    """judge_own's verdict on the module's own run, unless a wrong earlier function explains it
    (see the module docstring)."""
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
    if fail is None or not isinstance(written_out, dict):
        return fail
    wrong = wrong_entries(written_out, table, tol)
    if not wrong:
        return fail
    if versions(table.assignment) is None:
        return depends(written_out, wrong) or fail
    if written_out.get("values") is None:
        return fail
    return fail if judge_own(written_out["values"]) else None


def wrong_entries(written_out, table, tol) -> list:
    """The entries of `table` the report names that the judge itself finds wrong on the probe."""
    functions, probes = written_out.get("functions"), written_out.get("probes")
    if not isinstance(functions, (list, tuple)) or not isinstance(probes, dict):
        return []
    return [
        entry
        for entry in table
        if entry.name in functions and wrong_on_probe(table, entry, probes.get(entry.name), tol)
    ]


def depends(written_out, wrong):
    """In a student release: the Fail that says the module's check depends on the wrong earlier
    functions its run reached (None where it reached none of them)."""
    reached = written_out.get("reached")
    reached = [entry for entry in wrong if isinstance(reached, list) and entry.name in reached]
    if not reached:
        return None
    return Fail(
        "depends_on_earlier",
        {
            "functions": ", ".join(entry.name for entry in reached),
            "steps": ", ".join(sorted({entry.step for entry in reached})),
            BLOCKED_BY: reached[0].step,
        },
    )


def forbidden_excused(values, forbidden, assignment=None) -> bool:
    """Whether every forbidden call of an integration step's run (`forbidden`) was made inside an
    earlier step's function, which that step charges: the function made the call on its probe,
    the module's own code made none ("forbidden_own" empty) and, in the instructor's kit, the run
    with those functions written out made none and finished. The module is then judged on its
    values, as for an earlier function wrong by value."""
    written_out = values.get(WRITTEN_OUT) if isinstance(values, dict) else None
    if not forbidden or not isinstance(written_out, dict):
        return False
    inside, own = written_out.get("forbidden_in"), written_out.get("forbidden_own")
    if not isinstance(inside, dict) or own != []:
        return False
    names = {name for calls in inside.values() if isinstance(calls, list) for name in calls if isinstance(name, str)}
    if not set(forbidden) <= names:
        return False
    if assignment is not None and versions(assignment) is None:
        return True  # a student release: nothing is written out; the values are judged as they are
    return written_out.get("values") is not None and written_out.get("written_out_forbidden") == []


def wrong_on_probe(table, entry, theirs, tol) -> bool:
    """Whether the student's results on the entry's probe (None: it raised) are wrong, judged
    against the written-out version's within `tol`; where the contract leaves a result open
    (entry.care), only that it is finite. Without an expectation (a release without its stored
    answers) nothing is wrong."""
    mine = expected_results(table, entry)
    if mine is None:
        return False
    cares = [entry.care(args, kwargs) for args, kwargs in entry.calls()] if entry.care is not None else []
    if not isinstance(theirs, (list, tuple)) or len(theirs) != len(mine):
        return True
    for index, (result, want) in enumerate(zip(theirs, mine, strict=True)):
        care = cares[index] if index < len(cares) else None
        if isinstance(want, (list, tuple)):
            if not isinstance(result, (list, tuple)) or len(result) != len(want):
                return True
            pairs = list(zip(result, want, strict=True))
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
