"""What an assignment owns, the engine reads through it (engine/course/assignment.py): its observers'
contract failures (CONTRACT_FAILURES) and its checks' failures that are no evidence
(NOT_EVIDENCE), declared in its package's __init__.py, each a message of its own catalog.

The judge accepts an assignment's contract failure from a worker only for a check of that
assignment, and the diagnosis leaves out an assignment's no-evidence failures for its checks only.
"""

import ast

import pytest

from autograder.engine.checks import messages
from autograder.engine.checks.check import Fail
from autograder.engine.course import assignment as assignments
from autograder.engine.judge.observation import Facts, read_report
from autograder.engine.mistakes.evidence import NOT_EVIDENCE, says_nothing


def own_code_strings(assignment_id: str) -> set:
    """The string constants of an assignment's code, its __init__.py (the declarations) aside."""
    root = assignments.folder(assignment_id)
    return {
        node.value
        for path in root.rglob("*.py")
        if path != root / "__init__.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


@pytest.mark.parametrize("assignment_id", assignments.known())
def test_each_declared_id_is_the_assignments_own_and_in_use(assignment_id):
    """A declared id is a message of the assignment's own catalog (not the engine's), and its code
    raises it (a declaration outliving its check would widen what a worker may report)."""
    own = set(messages.catalog("en", ((assignments.folder(assignment_id) / "locale", "assignment"),)))
    engine = set(messages.catalog("en", ((messages.GRADER / "locale", "autograder"),)))
    declared = assignments.contract_failures(assignment_id) | assignments.not_evidence(assignment_id)
    assert declared <= own - engine, f"declared ids outside {assignment_id}'s own catalog"
    assert declared <= own_code_strings(assignment_id), f"declared ids {assignment_id}'s code never raises"
    assert not declared & NOT_EVIDENCE


def test_the_kit_declares_what_its_observers_report():
    """mha's observers report layers they could not find and a device mismatch; kv_cache none."""
    assert {"projections_not_found", "embedding_not_found", "device_mismatch"} <= assignments.contract_failures("mha")
    assert assignments.contract_failures("kv_cache") == frozenset()
    assert assignments.contract_failures(None) == frozenset()
    assert "failed_on_both_devices" in assignments.not_evidence("mha")


def facts_of(assignment_id):
    return Facts("pkg", frozenset({"m.py"}), "step", 1.0, (), {}, assignments.contract_failures(assignment_id))


def contract_report(what="projections_not_found"):
    return {"kind": "contract", "what": what, "params": {"owner": "MHA", "found": "nothing"}, "forbidden": []}


def test_an_assignments_contract_failure_is_read_for_its_own_checks_only():
    """A worker may report mha's `projections_not_found` for an mha check; for another assignment's
    check (or one of no assignment) it names no contract the judge knows: malformed."""
    seen = read_report(contract_report(), facts_of("mha"))
    assert seen.error == Fail("projections_not_found", {"owner": "MHA", "found": "nothing"})
    for other in ("kv_cache", None):
        seen = read_report(contract_report(), facts_of(other))
        assert seen.error.message_id == "bad_worker_message"
    assert read_report(contract_report("missing_file") | {"params": {"file": "x"}}, facts_of(None)).error == Fail(
        "missing_file", {"file": "x"}
    )


class _Check:
    def __init__(self, assignment):
        self.assignment = assignment


def test_an_assignments_no_evidence_failure_says_nothing_for_its_own_checks_only():
    fail = Fail("failed_on_both_devices", {})
    assert says_nothing(fail, _Check("mha"))
    assert not says_nothing(fail, _Check("kv_cache"))
    assert not says_nothing(fail, object())  # a check of no assignment: the engine's rule alone
    assert says_nothing(Fail("timeout", {}), object())
    assert not says_nothing(Fail("values", {}), _Check("mha"))
