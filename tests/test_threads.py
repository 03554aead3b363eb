"""Threads refused once student code is loaded (issue 21): a CPU worker cannot start a thread,
so all student code runs on the thread the run-time watch of forbidden calls sees. Graded as an
instructor grades (tests/test_attacks.py's harness, the source scan off)."""

import sys

import pytest

from test_attacks import assert_contained, flag, grade, honest, hostile

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="Linux sandbox"), pytest.mark.slow]

# The fused kernel the attention step forbids, called on a thread of its own (the watch was per
# thread): the flag is whether the thread ran.
ON_A_THREAD = """
    import threading, torch
    q = torch.randn(1, 2, 3, 4)
    ran = []
    worker = threading.Thread(target=lambda: ran.append(torch.nn.functional.scaled_dot_product_attention(q, q, q)))
    worker.start()
    worker.join()
    return bool(ran)
"""


def test_student_code_cannot_start_a_thread(tmp_path):
    """On the code before this, the thread ran (the flag earned the padding step's points)."""
    attacker = hostile(tmp_path, "attacker", flag(ON_A_THREAD.strip("\n")), gated=True)
    neighbour = honest(tmp_path)
    outcome = grade(tmp_path, [attacker, neighbour])
    assert_contained(outcome, [attacker, neighbour], [neighbour])
    assert outcome.step(attacker, "padding")["score"] == 0
    assert "can't start new thread" in outcome.results[str(attacker)]["output"]
