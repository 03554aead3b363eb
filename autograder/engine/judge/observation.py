"""The judge's reading of a worker's report: what it says, checked against what the judge itself
knows, becomes an Observation. Nothing in a report can name a verdict state, raise a score or
make the judge read a path.

    observation = read_report(report, facts)

A report (autograder/harness/observe.py) is untrusted: student code may have taken over the
process that wrote it. Every field is checked before it is used:

* `kind`: values | raised | timeout | contract | trapped; anything else is malformed;
* `forbidden`: names from the step's own forbidden list;
* `where`: a file the judge itself sent (matched by name, never opened), a line number, a
  function name of bounded length;
* `contract`: a name from CONTRACT_FAILURES or the check's assignment's own (Facts.contract:
  failures only, never "not checked", "blocked" or a skip) with the parameters its message
  takes, each a number or a short string;
* `trapped`: a function the judge itself saw run past its time limit.

Every kind but values is a failing verdict; on values, the check's own judge decides. Strings
are cut and their control characters escaped (text.printable). A malformed report is the
failure `bad_worker_message`: the check scores nothing.
"""

import re
from dataclasses import dataclass, field

from autograder.engine.checks import messages
from autograder.engine.checks.check import Fail
from autograder.engine.checks.text import printable, printable_values

# The ways a student's code can miss the contract that the harness reports (harness/contract.py,
# harness/package.py, harness/observe.py): each only ever fails a check. An assignment adds its
# observers' own (its CONTRACT_FAILURES, engine/course/assignment.py: Facts.contract).
CONTRACT_FAILURES = frozenset(
    {
        "missing_package",
        "missing_file",
        "syntax_error",
        "syntax_error_text",
        "syntax_error_in_import",
        "import_error",
        "not_implemented",
        "near_miss",
        "missing_attribute",
        "bad_attribute",
        "wrong_type",
        "refused_lookup",  # harness/lookups.py: a name made at run time that the source policy refuses
    }
)
KINDS = ("values", "raised", "timeout", "contract", "trapped")
TEXT_LIMIT = 300  # characters of one string from a report
NAME = re.compile(r"[A-Za-z_<>][A-Za-z0-9_.<>]{0,199}")  # a type or function (qualified) name


@dataclass
class Observation:
    """What running one check's student half produced, as the judge accepts it."""

    values: object = None  # what the observer returned (None after a failure)
    error: Fail = None  # the failure that stopped it, in the judge's words
    forbidden: tuple = ()  # forbidden calls (dotted names from the step's list) seen while observing
    hung: tuple = None  # (file, function): where the code ran past its time limit, when known
    overran: bool = False  # the judge stopped a worker that did not answer in time (the place is unknown)


@dataclass(frozen=True)
class Hang:
    """A function the judge saw run past its time limit, and where: later checks that reach it
    are stopped at once (harness.observe.trap) and say so."""

    check: str  # the check (or probe) that hung
    step: str
    seconds: float
    where: str  # 'mha/heads.py, line 4, in split_heads'


@dataclass
class Facts:
    """What the judge knows when it reads a report of one check."""

    package: str  # the package's name, e.g. mha
    files: frozenset  # the student's files the judge sent, relative to the package folder
    step: str
    timeout: float = None  # the check's time limit, seconds
    forbidden: tuple = ()  # the step's forbidden names
    hangs: dict = field(default_factory=dict)  # (file, function) -> Hang, seen so far in this submission
    contract: frozenset = frozenset()  # the assignment's own contract failures (assignment.contract_failures)


def read_report(report, facts: Facts) -> Observation:
    """The Observation a report stands for, or the failure `bad_worker_message` when any part of
    it is not what a harness sends."""
    try:
        return _read(report, facts)
    except _Malformed as error:
        return Observation(error=malformed(facts.step, str(error)))


def malformed(step: str, detail: str) -> Fail:
    return Fail("bad_worker_message", {"step": step, "detail": printable(detail, 160, one_line=True)})


class _Malformed(Exception):
    pass


def _read(report, facts):
    if not isinstance(report, dict) or report.get("kind") not in KINDS:
        raise _Malformed("an unknown kind of report")
    forbidden = report.get("forbidden", [])
    if not isinstance(forbidden, list) or any(name not in facts.forbidden for name in forbidden):
        raise _Malformed("a forbidden call the step does not list")
    forbidden = tuple(dict.fromkeys(forbidden))
    kind = report["kind"]
    if kind == "values":
        return Observation(values=printable_values(report.get("values"), TEXT_LIMIT), forbidden=forbidden)
    if kind == "raised":
        error_type = report.get("type")
        if not isinstance(error_type, str) or not NAME.fullmatch(error_type):
            raise _Malformed("an exception without a readable type")
        message = printable(report.get("message") or "", TEXT_LIMIT, one_line=True) or "(no message)"
        where = _where(report.get("where"), facts)
        params = {"type": error_type, "message": message, "where": where_text(where, facts)}
        return Observation(error=Fail("raised", params), forbidden=forbidden)
    if kind == "timeout":
        where = _where(report.get("where"), facts)
        params = {"seconds": facts.timeout, "where": where_text(where, facts)}
        hung = None if where is None else (where[0], where[2])
        return Observation(error=Fail("timeout", params), forbidden=forbidden, hung=hung)
    if kind == "contract":
        return Observation(error=_contract(report, facts), forbidden=forbidden)
    function = report.get("function")
    if not (isinstance(function, list) and len(function) == 2 and tuple(function) in facts.hangs):
        raise _Malformed("a stop in a function that never hung")
    hang = facts.hangs[tuple(function)]
    params = {"seconds": hang.seconds, "where": hang.where, "check": hang.check}
    if hang.step == facts.step:
        return Observation(error=Fail("skipped_after_hang", params), forbidden=forbidden)
    return Observation(error=Fail("skipped_after_hang_elsewhere", {**params, "step": hang.step}), forbidden=forbidden)


def _where(where, facts):
    """(file, line, function) when `where` names a file the judge sent, else None."""
    if where is None:
        return None
    if not (isinstance(where, list) and len(where) == 3):
        raise _Malformed("a malformed place in the code")
    file, line, function = where
    if not isinstance(file, str) or file not in facts.files:
        return None  # not one of the student's files: the place is unknown, not believed
    if not isinstance(line, int) or isinstance(line, bool) or line < 0 or not isinstance(function, str):
        raise _Malformed("a malformed place in the code")
    if not NAME.fullmatch(function):
        return None
    return file, line, function


def where_text(where, facts) -> str:
    """'mha/heads.py, line 12, in split_heads' for a checked place; the grader's own words when
    the place is unknown (no line of the submission raised it)."""
    if where is None:
        return messages.render("grader_frame")
    file, line, function = where
    return f"{facts.package}/{file}, line {line}, in {function.rsplit('.', 1)[-1]}"


def _contract(report, facts) -> Fail:
    what, params = report.get("what"), report.get("params")
    if (
        (what not in CONTRACT_FAILURES and what not in facts.contract)
        or not isinstance(params, dict)
        or len(params) > 12
    ):
        raise _Malformed("an unknown contract failure")
    safe = {}
    for key, value in params.items():
        if not isinstance(key, str) or not key.isidentifier() or len(key) > 40:
            raise _Malformed("a malformed parameter")
        if isinstance(value, str):
            safe[key] = printable(value, TEXT_LIMIT, one_line=True)
        elif value is None or isinstance(value, (bool, int, float)):
            safe[key] = value
        elif isinstance(value, (list, tuple)) and len(value) <= 8 and all(isinstance(v, int) for v in value):
            safe[key] = tuple(value)
        else:
            raise _Malformed("a malformed parameter")
    if what in ("not_implemented", "near_miss", "refused_lookup") and not safe.get("where"):
        safe["where"] = messages.render("grader_frame")
    try:
        messages.render(what, **safe)
    except (KeyError, IndexError, ValueError, TypeError):
        raise _Malformed(f"parameters that {what} does not take") from None
    return Fail(what, safe)
