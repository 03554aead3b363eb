"""An exception charged once (a stage of runner.py after each phase's judging; the pytest plugin
asks the same per check).

A check that declares `charged_where_raised` (the cuda step's scenarios) fails when the code
raises the same exception at the same place on every device: nothing shows the device. It is
excused where a step that judges that code alone, not an integration step, failed a check of the
same phase on the same exception (type and place): that step charges it, and one mistake costs
one charge. The module's own code is no such step's: an exception it raises costs the module step
and the cuda step alike. The judge reads only its own verdicts here: a place the student's code
raises at only in the excused check is charged there.
"""

from autograder.engine.checks.check import Fail


def place(fail: Fail | None) -> tuple | None:
    """(exception type, where) of a failure that names an exception and its place, or None."""
    if fail is None:
        return None
    found = fail.params.get("type"), fail.params.get("where")
    return found if all(isinstance(part, str) and part for part in found) else None


def charged_elsewhere(check, fail: Fail | None, others) -> bool:
    """Whether `check`'s failure is an exception that one of `others` (the failures of the checks
    of steps that judge the raising code alone) charges: "raised" at the same place."""
    if not getattr(check, "charged_where_raised", False):
        return False
    mine = place(fail)
    return mine is not None and any(
        other is not None and other.message_id == "raised" and place(other) == mine for other in others
    )


def excuse(runs, hidden: bool) -> None:
    """The stage: each failing `charged_where_raised` check of this phase that another step's check
    charges passes (its outcome and its record). A public check reads only public verdicts."""
    for run in runs:
        for check, (_, fail) in list(run.outcomes.items()):
            if (check.visibility != "public") != hidden:
                continue
            others = [
                other_fail
                for other in runs
                if other is not run and not getattr(other.module, "INTEGRATES", False)
                for other_check, (_, other_fail) in other.outcomes.items()
                if hidden or other_check.visibility == "public"
            ]
            if charged_elsewhere(check, fail, others):
                run.outcomes[check] = (True, None)
                for record in run.records:
                    if record.check is check:
                        record.fail = None
