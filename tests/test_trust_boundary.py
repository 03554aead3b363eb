"""Issue 21: the worker is an untrusted oracle. Whatever student code makes its worker send, the
judge decides from its own facts, within its own bounds: no forged verdict state, no path read,
no unbounded memory, no unbounded time, no control character on the instructor's terminal, and a
submission that staging cannot take is reported, not crashed on.

Some tests switch the source policy off (`no_source_policy`), so that the hostile code reaches
the worker: they test the judge's own defence, the layer behind it."""

import json
import struct
import subprocess
import sys

import pytest
import torch

from autograder.engine.course import config as grading_config
from autograder.engine.judge import plan, verdict
from autograder.engine.judge.observation import Facts, read_report
from autograder.engine.judge.runner import grade
from autograder.sandbox import wire
from conftest import KIT, SOLUTIONS

FACTS = Facts("mha", frozenset({"attention.py", "heads.py"}), "attention", 10.0, ("torch.nn.MultiheadAttention",))


@pytest.fixture
def no_source_policy(monkeypatch):
    """The judge without its source policy: hostile code gets to run in the worker."""
    monkeypatch.setattr(plan, "forbidden_in_source", lambda module, step, student: None)


def attention_with(prelude: str, body: str) -> str:
    """The reference attention.py with `prelude` at the top and `body` first in the function."""
    source = (SOLUTIONS / "mha" / "attention.py").read_text()
    marker = "    ### BEGIN SOLUTION\n"
    assert marker in source
    body = "".join(line[4:] if line.startswith("        ") else line for line in body.splitlines(keepends=True))
    return prelude + "\n" + source.replace(marker, marker + body, 1)


# ---------------------------------------------------------------------------- verdict forgery


@pytest.mark.parametrize(
    "report",
    [
        {"kind": "contract", "what": "not_checked", "params": {"reason": "no GPU"}},
        {"kind": "contract", "what": "mask_needs_attention", "params": {"blocked_by": "attention"}},
        {"kind": "contract", "what": "skipped_after_hang", "params": {}},
        {"kind": "not_checked"},
        {"kind": "trapped", "function": ["attention.py", "never_hung"]},
        {"kind": "values", "values": {}, "forbidden": ["torch.nn.functional.anything_else"]},
        {"kind": "raised", "type": "x\x1b[2J", "message": "m"},
        "not a report",
    ],
)
def test_a_report_cannot_name_a_verdict_state(report):
    """Only failures come out of a report's kind (a malformed one is bad_worker_message), never
    "not checked", "blocked by another step" or a skip the judge did not see happen."""
    if isinstance(report, dict):
        report.setdefault("forbidden", [])
    seen = read_report(report, FACTS)
    assert seen.error is not None and seen.error.message_id == "bad_worker_message"
    assert not verdict.not_checked(seen.error)


def test_a_contract_report_is_a_failure_with_checked_and_printable_parameters():
    seen = read_report(
        {
            "kind": "contract",
            "what": "missing_file",
            "params": {"file": "mha/x.py\x1b[2J" + "y" * 900},
            "forbidden": [],
        },
        FACTS,
    )
    assert seen.error.message_id == "missing_file"
    assert "\x1b" not in seen.error.params["file"] and len(seen.error.params["file"]) < 320
    unknown = read_report({"kind": "contract", "what": "missing_file", "params": {"nope": 1}, "forbidden": []}, FACTS)
    assert unknown.error.message_id == "bad_worker_message"  # the message needs {file}: malformed


def test_a_place_outside_the_files_the_judge_sent_is_not_believed():
    """A time-out's `where` names a file: only one the judge itself sent counts, and nothing is
    ever opened (the old judge read every .py file beside a submission from a `../` here)."""
    for where in (
        ["../neighbour/mha/attention.py", 3, "f"],
        ["/etc/passwd", 1, "f"],
        ["attention.py/../../x.py", 1, "f"],
    ):
        seen = read_report({"kind": "timeout", "where": where, "forbidden": []}, FACTS)
        assert seen.error.message_id == "timeout" and seen.hung is None
        assert seen.error.params["where"] == "called from the grader"
    theirs = read_report({"kind": "timeout", "where": ["attention.py", 3, "f"], "forbidden": []}, FACTS)
    assert theirs.hung == ("attention.py", "f") and theirs.error.params["where"] == "mha/attention.py, line 3, in f"


FORGE = '''
import json as _json, os as _os, stat as _stat, struct as _struct


def _forge(report):
    """Write `report` to the worker's socket to the judge, framed as the harness frames one."""
    pairs = [[key, {"{": [[k, v] for k, v in value.items()]} if isinstance(value, dict) else value]
             for key, value in report.items()]
    header = _json.dumps({"{": pairs}).encode()
    message = _struct.pack("!I", len(header)) + header
    for fd in range(3, 64):
        try:
            if _stat.S_ISSOCK(_os.fstat(fd).st_mode):
                _os.write(fd, _struct.pack("!i", len(message)) + message)
                _os._exit(0)
        except OSError:
            pass
'''


@pytest.mark.slow
def test_a_worker_taken_over_cannot_make_its_checks_not_checked(submission, no_source_policy, config):
    """Student code writes the judge a forged report of its own ("not checked, no GPU") and
    ends its worker: the checks fail against the full maximum (the old judge took the forged
    id as its own word, and the attention step had nothing left to score)."""
    forged = (
        '        _forge({"kind": "contract", "what": "not_checked", "params": {"reason": "no GPU"}, "forbidden": []})\n'
    )
    path = submission(files={"attention.py": attention_with(FORGE, forged)})
    result = grade(path, config, steps=["attention"], isolate=True)
    step = result.step("attention")
    assert step.max_score == 15 and step.score == 0
    assert all(c.passed is False for c in step.checks), [(c.id, c.message_id) for c in step.checks]


@pytest.mark.slow
def test_the_graders_modules_are_not_in_the_registry_student_code_sees(submission, no_source_policy, config):
    """Nothing of the grader to reach by name: an attack that looked for the harness's watch in
    sys.modules (to switch it off) finds nothing, and the forbidden call is still seen."""
    prelude = "import sys as _sys\nimport torch.nn.functional as _F\n"
    body = (
        "        for _name, _module in list(_sys.modules.items()):\n"
        "            if _name.startswith('autograder'):\n"
        "                raise RuntimeError('found ' + _name)\n"
        "        return _F.scaled_dot_product_attention(q, k, v), torch.softmax(q @ k.transpose(-2, -1), -1)\n"
    )
    path = submission(files={"attention.py": attention_with(prelude, body)})
    result = grade(path, config, steps=["attention"], isolate=True)
    messages = {c.message_id for c in result.step("attention").checks}
    assert messages == {"forbidden_call_at"}, [c.message for c in result.step("attention").checks]


# ---------------------------------------------------------------------------- forbidden calls on any thread


@pytest.mark.slow
def test_a_fused_kernel_on_another_thread_is_seen(submission, no_source_policy, config):
    """The old watch was per thread: the same kernel on a threading.Thread scored 100. In a
    worker the dispatcher kernels are process-wide now (and a sandboxed CPU worker starts no
    thread)."""
    prelude = "import threading as _threading\n"
    body = (
        "        _out = []\n"
        "        _t = _threading.Thread(target=lambda: _out.append(\n"
        "            torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q.float(), k.float(), v.float())))\n"
        "        _t.start()\n"
        "        _t.join()\n"
    )
    path = submission(files={"attention.py": attention_with(prelude, body)})
    result = grade(path, config, steps=["attention"], isolate=True)
    step = result.step("attention")
    assert step.score == 0, [(c.id, c.message) for c in step.checks]
    assert {c.message_id for c in step.checks} <= {"forbidden_call", "forbidden_call_at", "raised"}


# ---------------------------------------------------------------------------- bounds on the judge


def test_a_message_cannot_share_or_repeat_its_bytes():
    """The old wire format was a pickle: one 16 MiB buffer referenced 48 times decoded to
    768 MiB. Now every tensor takes its own bytes, checked before anything is made."""
    header = json.dumps([{"T": ["float64", [1024, 1024, 2]]}] * 48).encode()
    message = struct.pack("!I", len(header)) + header + bytes(16 << 20)
    with pytest.raises(wire.WireError):
        wire.loads(message)
    with pytest.raises(wire.TooLarge):
        wire.loads(message, limit=1 << 20)
    nested = b"[" * 200_000
    with pytest.raises(wire.WireError):
        wire.loads(struct.pack("!I", len(nested)) + nested)


def test_what_the_wire_carries_comes_back_the_same():
    value = {
        "out": torch.randn(2, 3, dtype=torch.float64),
        "t": (1, "a", None, [True]),
        "b": b"xy",
        "h": torch.ones(2).half(),
    }
    back = wire.loads(wire.dumps(value))
    assert torch.equal(back["out"], value["out"]) and back["t"] == (1, "a", None, [True]) and back["b"] == b"xy"
    assert back["h"].dtype == torch.float16


@pytest.mark.slow
def test_a_report_larger_than_its_budget_is_refused_unread(submission, config):
    """A broadcast view that is 1 GB once made contiguous: the worker cannot send it in one
    message the judge will read; the check fails saying so, the others are judged."""
    body = "        if q.shape[-2] == 5:\n            return q.expand(4096, *q.shape), q\n"
    path = submission(files={"attention.py": attention_with("", body)})
    result = grade(path, config, steps=["attention"], isolate=True)
    ids = {c.id: c.message_id for c in result.step("attention").checks}
    assert ids["output"] in ("report_too_large", "worker_crashed", "worker_exited", "raised"), ids
    assert ids["square_keys"] is None  # its own inputs (Lq = 3): judged as usual


def test_an_exception_text_of_megabytes_is_cut(submission, config):
    body = "        raise ValueError('\\x1b[2J' + 'x' * 5_000_000)\n"
    path = submission(files={"attention.py": attention_with("", body)})
    result = grade(path, config, steps=["attention"])
    message = result.step("attention").checks[0].message
    assert len(message) < 600 and "\x1b" not in message


# ---------------------------------------------------------------------------- time


@pytest.mark.slow
def test_a_submission_has_a_time_budget(submission, no_source_policy):
    """Correct code that sleeps just under each check's limit held a worker for minutes; now the
    budget runs out, the worker is stopped and the checks not run fail, saying so."""
    text = grading_config.default_path().read_text().replace("timeout: 10", "timeout: 1\n  budget: 3")
    config = grading_config.parse(text, assignment="mha")
    prelude = "import time as _time\n"
    path = submission(files={"attention.py": attention_with(prelude, "        _time.sleep(0.7)\n")})
    result = grade(path, config, steps=["attention", "masking"], isolate=True)
    ids = [c.message_id for step in result.steps for c in step.checks]
    assert "budget_spent" in ids and "timeout" not in ids, ids
    assert result.step("masking").max_score == 15


# ---------------------------------------------------------------------------- what reaches the terminal


@pytest.mark.slow
def test_escape_sequences_never_reach_the_graders_terminal(submission, tmp_path):
    """A submission printed escape sequences at import: they cleared the screen and drew a fake
    table. The table, the JSON and the printed output carry them escaped."""
    prelude = "print('\\x1b[2J\\x1b[H  total  100.00 / 100\\r')\n"
    path = submission(files={"attention.py": attention_with(prelude, "        raise ValueError('\\x1b[31mred')\n")})
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade",
            str(path),
            "--assignment",
            "mha",
            "--json",
            str(tmp_path / "r.json"),
        ],
        cwd=KIT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "\x1b" not in out.stdout and "\x1b" not in out.stderr
    assert "\\x1b[2J" in out.stdout  # still legible, as text
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert "\x1b" not in data["output"] and all(
        "\x1b" not in c["message"] for step in data["steps"] for c in step["checks"]
    )


# ---------------------------------------------------------------------------- staging


def test_a_folder_nested_a_thousand_levels_is_refused_with_a_message(tmp_path, config):
    """It raised RecursionError in the judge, and the submission was never graded."""
    import os

    deep = tmp_path / "deep"
    deep.mkdir()
    cwd = os.getcwd()
    try:
        os.chdir(deep)
        for _ in range(1100):
            os.mkdir("a")
            os.chdir("a")
        with open("x.py", "w") as f:
            f.write("x = 1\n")
    finally:
        os.chdir(cwd)
    try:
        result = grade(deep, config, steps=["padding"])
    finally:  # pytest's own clean-up would recurse as deep: take it apart from the bottom
        bottom = deep.joinpath(*["a"] * 1100)
        (bottom / "x.py").unlink()
        while bottom != deep:
            bottom.rmdir()
            bottom = bottom.parent
    assert result.step("padding").max_score == 10 and result.step("padding").score == 0
    assert {c.message_id for c in result.step("padding").checks} == {"staging_too_deep"}


def test_a_notebook_nested_thousands_of_levels_is_read_as_broken(tmp_path, config):
    notebook = tmp_path / "mha.ipynb"
    notebook.write_text('{"cells": ' + "[" * 5000 + "]" * 5000 + "}")
    result = grade(tmp_path, config, steps=["padding"])
    assert {c.message_id for c in result.step("padding").checks} == {"missing_file"}


@pytest.mark.slow
def test_a_helper_in_a_sub_package_reaches_the_worker(submission, config):
    """The judge scans sub-folders of the package; the worker gets them too (it had the top-level
    files only, so a correct helper in mha/tools/ failed at import in the sandbox alone)."""
    helper = "import math\n\n\ndef scale(d_k):\n    return 1 / math.sqrt(d_k)\n"
    attention = (SOLUTIONS / "mha" / "attention.py").read_text()
    old = "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)"
    assert old in attention
    attention = "from .tools.numbers import scale\n" + attention.replace(
        old, "scores = q @ k.transpose(-2, -1) * scale(d_k)"
    )
    root = submission(files={"attention.py": attention})
    (root / "mha" / "tools").mkdir()
    (root / "mha" / "tools" / "numbers.py").write_text(helper)
    result = grade(root, config, steps=["attention"], isolate=True)
    assert result.step("attention").score == 15, [c.message for c in result.step("attention").checks]


def test_the_smallest_example_search_never_fails_the_grading():
    """The red team's broadcast-view submission made the search shrink split_heads' num_heads to 0,
    where the check's own oracle divides by it: the judge crashed and the submission was NOT
    GRADED. A candidate the oracle cannot take is rejected, and a failing search gives no example."""
    from autograder.engine.checks.check import Fail
    from autograder.engine.course.assignment import step_modules
    from autograder.engine.judge.example import first_example
    from autograder.engine.judge.observation import Observation
    from autograder.engine.judge.plan import check_inputs, check_seed
    from autograder.engine.mistakes.diagnosis import Record

    check = next(c for c in step_modules("mha")["split_heads"].CHECKS if c.id == "split_values")
    inputs = check_inputs(check, check_seed(check))
    fail = Fail("raised", {"type": "ZeroDivisionError", "message": "x", "where": "mha/heads.py, line 3, in f"})
    record = Record(check, inputs, Observation(error=fail), fail)

    def always_raises(check, candidate):  # the student's code: fails the same way on any input
        return Observation(error=fail)

    example = first_example([record], always_raises, {torch.float64: (1e-7, 1e-9), torch.float32: (1e-4, 1e-5)})
    assert example is None or example.inputs["num_heads"] > 0
