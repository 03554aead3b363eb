"""What counts as evidence that a known mistake explains a step's failures: the one rule that the
instructor's diagnosis (diagnosis.py: mistake variants run on the checks' inputs) and the
student release's (fingerprints.py: variants matched by their stored fingerprints) both follow.
"""

from autograder.engine.checks.earlier import own_run
from autograder.engine.course import assignment as assignments

# Failures that say nothing about the computation: nothing to diagnose. An assignment adds its
# checks' own (its NOT_EVIDENCE: says_nothing).
NOT_EVIDENCE = {
    "not_implemented",
    "not_checked",
    "missing_package",
    "missing_package_archive",
    "missing_file",
    "syntax_error",
    "import_error",
    "forbidden_call",
    "forbidden_call_at",
    "forbidden_source",
    "tampering",
    "timeout",
    "worker_crashed",
    "worker_exited",
    "bad_worker_message",
    "unreadable_observation",
    "refused_file",
    "skipped_after_hang",
    "skipped_after_hang_elsewhere",
    "syntax_error_text",
    "syntax_error_in_import",
    "near_miss",
    "depends_on_earlier",
}


def says_nothing(fail, check) -> bool:
    """Whether `fail`, a failure (checks.check.Fail) of `check`, says nothing about the
    computation: its id is one of NOT_EVIDENCE, or of the check's assignment's own
    (assignment.not_evidence)."""
    message_id = fail.message_id
    return message_id in NOT_EVIDENCE or message_id in assignments.not_evidence(getattr(check, "assignment", None))


# The diagnoses of localisation (localise.py): `localised.<stage>[.<relation>]`. Made from public
# probes only, with the reference's values stored for them: any student may read one.
LOCALISED = "localised."


def is_localised(diagnosis_id: str) -> bool:
    """Whether a diagnosis is a localisation finding (public by construction)."""
    return diagnosis_id.startswith(LOCALISED)


# A known mistake explains a step's records when one of its variants passes what the student
# passes and reproduces at least one failure. Of the mistakes that do, one is left out when
# another reproduces strictly more of the student's failures (no "zeroed the pad row by hand" for a student who
# has no padding_idx at all, which also shows on the check that the pad row is zero).


class Evidence(frozenset):
    """The ids of the student's failing checks that a mistake variant reproduces exactly, and
    `also_failing`: those of the student's failing checks that the variant fails too, reproduced
    or not. Where both fail differently, the observation may hold random parts (a fresh layer's
    initial weights, dropout in train()) or a second mistake; where the variant passes, it
    leaves that failure unexplained. So of two variants that reproduce the same checks, the one
    that also fails more of the others explains more."""

    def __new__(cls, reproduced=(), also_failing=()):
        evidence = super().__new__(cls, reproduced)
        evidence.also_failing = frozenset(also_failing) | evidence
        return evidence


def strength(evidence) -> tuple:
    """How strongly a variant's evidence names its mistake: the failures it reproduces exactly,
    then the failures it shares."""
    return len(evidence), len(getattr(evidence, "also_failing", evidence))


def best_variant(evidences):
    """(index, evidence) of the consistent variant with the strongest evidence (the first of
    equals), or None: no variant reproduces a failure."""
    found = [(index, e) for index, e in enumerate(evidences) if e]
    return max(found, key=lambda item: strength(item[1])) if found else None


def most_specific(explained):
    """The ids to name, strongest evidence first (catalog order among equals): each id whose
    reproduced set is not strictly inside another's, nor equal to another's that explains at
    least as much (two mistakes with the same evidence cannot be told apart: naming either
    could be wrong)."""
    kept = {i: e for i, e in explained.items() if e}

    def outdone(i, e):
        return any(e < other or (e == other and strength(e) <= strength(other)) for j, other in kept.items() if j != i)

    named = [i for i, e in kept.items() if not outdone(i, e)]
    return sorted(named, key=lambda i: tuple(-n for n in strength(kept[i])))


def without_where(params):
    """Error parameters minus the file position, which differs between two packages, and minus
    the message of an exception code raises on purpose to reject its input (ValueError,
    AssertionError): that is the author's own wording."""
    drop = {"where", "message"} if params.get("type") in ("AssertionError", "ValueError") else {"where"}
    return {key: value for key, value in params.items() if key not in drop}


def compared(values):
    """What of an observation's values is evidence: the submission's own run (earlier.own_run),
    and of an exception an observer caught for raised_verdict ({"raised": its type name, "message":
    its text}) the type alone. The text is the wording of whichever operation failed first (matmul
    and einsum say one shape clash in two ways): a spelling of the code, not what it did."""
    values = own_run(values)
    if isinstance(values, dict) and set(values) == {"raised", "message"}:
        return {"raised": values["raised"]}
    return values
