"""Hostile submissions, graded through the sandbox. For each: the grader finishes, the honest
steps keep their scores, the hostile step gets zero with a clear reason, and nothing outside the
worker's scratch directory changes. Attacks on the sandbox run with the judge's source scan
turned off (the allow-list would refuse them before they ran: the sandbox must hold on its own);
attacks on the scan (SCAN_ATTACKS) run with it on."""

import hashlib
import os

import pytest

from autograder.engine.course import config as grading_config
from autograder.engine.course.assignment import step_modules
from autograder.engine.judge import plan
from autograder.engine.judge.runner import grade
from conftest import INTEGRATION_STEPS, KIT, SOLUTIONS, full_marks, replace_once

PAD_START = '    """\n    # TODO (padding)'  # start of pad_batch's body


def in_pad_batch(code):
    """Hostile code at the start of pad_batch (the only function of the padding step)."""
    body = "".join(f"    {line}\n" for line in code.splitlines())
    return {"padding.py": (PAD_START, '    """\n' + body + PAD_START[8:])}


RUN_TIME_NAME = "by a name made at run time"  # the allow-list's refusal of getattr(sys, "_getframe")


def hidden(name):
    """An expression for the string `name` that the source scan cannot read, so that the hostile
    code below tests the sandbox, not the scan (which flags frames and exec written plainly)."""
    return f"bytes({list(name.encode())}).decode()"


def at_import(code, file="padding.py"):
    return {file: ("import torch\n", "import torch\n" + code + "\n")}


OUT = "/tmp/mha-lab-adversarial-results"
HIDDEN_CHECKS = KIT / "autograder" / "assignments" / "mha" / "checks" / "padding.py"
HOSTILE = {
    # name: (changes, the reason every hostile check must give: a text, or a tuple of accepted texts)
    "infinite_loop": (in_pad_batch("while True:\n    pass"), "stopped after"),
    "sleep_forever": (in_pad_batch("import time\ntime.sleep(10**6)"), "stopped after"),
    "allocate_40_gb": (in_pad_batch("torch.ones(10**10)"), "can't allocate memory"),
    "memory_growth": (
        in_pad_batch("hoard = []\nwhile True:\n    hoard.append(torch.empty(50_000_000))"),
        "can't allocate memory",
    ),
    "segfault": (
        in_pad_batch("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)"),
        "crashed the interpreter (SIGSEGV)",
    ),
    "os_exit_at_import": (at_import("import os\nos._exit(0)"), "ended the Python process (exit code 0)"),
    "sys_exit_at_import": (at_import("import sys\nsys.exit(0)"), "importing mha/padding.py raised SystemExit"),
    "os_exit_in_step": (in_pad_batch("import os\nos._exit(3)"), "ended the Python process (exit code 3)"),
    "sys_exit_in_step": (in_pad_batch("raise SystemExit(0)"), "raised SystemExit"),
    "keyboard_interrupt": (in_pad_batch("raise KeyboardInterrupt"), "raised KeyboardInterrupt"),
    "patch_allclose": (at_import("torch.allclose = lambda *a, **k: True"), "which belongs to a library"),
    "patch_assert_close": (
        at_import("torch.testing.assert_close = lambda *a, **k: None"),
        "which belongs to a library",
    ),
    "patch_grader_modules": (
        at_import("import sys\nsys.modules['autograder.engine.checks.check'].compare = lambda *a, **k: None"),
        "reaches sys.modules",
    ),
    "read_the_reference": (
        at_import(f"REFERENCE = open({str(SOLUTIONS / 'mha' / 'padding.py')!r}).read()"),
        ("PermissionError", "FileNotFoundError"),
    ),  # outside the sandbox's view
    "read_the_hidden_checks": (
        at_import(f"SECRET = open({str(HIDDEN_CHECKS)!r}).read()"),
        ("PermissionError", "FileNotFoundError"),
    ),
    "write_a_fake_result": (
        at_import(f"open({OUT + '/fake.json'!r}, 'w').write('{{\"score\": 100}}')"),
        ("PermissionError", "FileNotFoundError"),
    ),
    "print_a_fake_score_table": (
        in_pad_batch("print('padding 10.00 / 10\\n  total 100.00 / 100')\nreturn None"),
        ("expected a pair (ids, pad_mask)", "nothing was raised"),
    ),
    "flood_of_output": (in_pad_batch("for _ in range(200):\n    print('x' * 1_000_000)"), "raised OSError"),
    "fork_bomb": (in_pad_batch("import os\nwhile True:\n    os.fork()"), "Operation not permitted"),
    "kill_the_grader": (
        in_pad_batch("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"),
        "Operation not permitted",
    ),
    "forge_a_worker_message": (
        in_pad_batch(
            f"import os, pickle, sys\nframe = getattr(sys, {hidden('_getframe')})()\n"
            f"while 'conn' not in getattr(frame, {hidden('f_locals')}):\n"
            f"    frame = getattr(frame, {hidden('f_back')})\ngetattr(frame, {hidden('f_locals')})['conn'].send_bytes("
            "pickle.dumps({'values': None, 'forbidden': [],"
            " 'error': {'message_id': 'full_marks', 'params': {}}}))\nos._exit(0)"
        ),
        # the run-time name check (harness/lookups.py) now refuses the frame walk before the wire
        ("sent back something unreadable", "ended the Python process (exit code 0)", RUN_TIME_NAME),
    ),
    "stall_a_worker_message": (
        in_pad_batch(
            "import os, signal, struct, sys, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
            f"frame = getattr(sys, {hidden('_getframe')})()\nwhile 'conn' not in getattr(frame, {hidden('f_locals')}):\n"
            f"    frame = getattr(frame, {hidden('f_back')})\n"
            f"os.write(getattr(frame, {hidden('f_locals')})['conn'].fileno(), struct.pack('!i', 1000) + b'{{')\n"
            "time.sleep(10**6)"
        ),
        ("stopped after", RUN_TIME_NAME),
    ),
    "sdpa_for_attention": (
        {
            "attention.py": (
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)\n",
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)\n"
                "    torch.nn.functional.scaled_dot_product_attention(q, k, v)\n",
            )
        },
        "torch.nn.functional.scaled_dot_product_attention",
    ),
}
# Attacks the judge's source scan must refuse (the others test the sandbox, with the scan off).
SCAN_ATTACKS = {"patch_allclose", "patch_assert_close", "patch_grader_modules", "sdpa_for_attention"}
STEP_OF_FILE = {"padding.py": {"padding"}, "attention.py": {"attention", "masking"}}
# A forbidden call costs the checks that made it: masking's checks of padding_mask and
# causal_mask alone do not run attention.py.
PARTLY = {"sdpa_for_attention": {"masking"}}


@pytest.fixture(scope="module")
def quick_config():
    """The kit's grading.yml with short time limits, so that hostile loops end quickly."""
    text = replace_once(grading_config.default_path().read_text(), "timeout: 10", "timeout: 0.5")
    return grading_config.parse(text)


def fingerprint(*roots):
    """path -> content hash of every file under `roots`, to see that nothing changed."""
    prints = {}
    for root in roots:
        for directory, _, files in os.walk(root):
            for name in files:
                path = os.path.join(directory, name)
                if "__pycache__" not in path:
                    with open(path, "rb") as f:
                        prints[path] = hashlib.sha256(f.read()).hexdigest()
    return prints


def test_every_hostile_submission_is_planted_where_it_says():
    """Each attack's change applies to the reference exactly once, and the files the attacks
    aim at exist (an attack on a path that is not there would pass for the wrong reason)."""
    for name, (changes, _) in HOSTILE.items():
        for file, (old, new) in changes.items():
            source = (SOLUTIONS / "mha" / file).read_text()
            assert source.count(old) == 1 and old != new, (name, file)
    assert HIDDEN_CHECKS.is_file() and (SOLUTIONS / "mha" / "padding.py").is_file()


@pytest.mark.slow  # a minute for all of them; CI runs them (pytest -m "")
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_submission(name, submission, quick_config, monkeypatch):
    changes, reason = HOSTILE[name]
    if name not in SCAN_ATTACKS:
        monkeypatch.setattr(plan, "forbidden_in_source", lambda *args, **kwargs: None)
    files = {}
    for file, (old, new) in changes.items():
        source = (SOLUTIONS / "mha" / file).read_text()
        assert source.count(old) == 1, (file, old)
        files[file] = source.replace(old, new)
    path = submission(files=files)
    os.makedirs(OUT, exist_ok=True)
    watched = [str(path), str(KIT / "solutions"), str(KIT / "autograder"), OUT]
    before = fingerprint(*watched)

    result = grade(path, quick_config, reference=SOLUTIONS, seed=1, isolate=True)

    if (
        name in ("read_the_reference", "read_the_hidden_checks", "write_a_fake_result")
        and "landlock" not in result.sandbox
    ):
        pytest.skip("Landlock is not available on this kernel")
    if name == "fork_bomb" and "seccomp" not in result.sandbox:
        pytest.skip("seccomp is not available here")
    hostile = set().union(*(STEP_OF_FILE[file] for file in changes))
    assert set(full_marks(result)) - INTEGRATION_STEPS == hostile
    for step_id in hostile:
        step = result.step(step_id)
        if step_id in PARTLY.get(name, ()):
            assert 0 < step.score < step.max_score, (step_id, [c.message for c in step.checks])
        else:
            assert step.score == 0, (step_id, [c.message for c in step.checks])
        failing = [c.message for c in step.checks if c.passed is False]
        reasons = reason if isinstance(reason, tuple) else (reason,)
        assert failing and all(any(r in m for r in reasons) for m in failing), failing
    assert fingerprint(*watched) == before
    assert not os.path.exists(os.path.join(OUT, "fake.json"))


@pytest.mark.slow  # an end-to-end run of seconds: CI runs it (pytest -m "")
def test_printed_output_is_shown_cut_and_never_parsed(submission, quick_config):
    changes, _ = HOSTILE["print_a_fake_score_table"]
    ((old, new),) = changes.values()
    path = submission(files={"padding.py": (SOLUTIONS / "mha" / "padding.py").read_text().replace(old, new)})
    result = grade(path, quick_config, reference=SOLUTIONS, seed=1, isolate=True)
    assert "total 100.00 / 100" in result.output
    assert result.step("padding").score == 0 and result.score < 100


def test_output_flood_is_cut(submission, quick_config):
    changes, _ = HOSTILE["flood_of_output"]
    ((old, new),) = changes.values()
    path = submission(files={"padding.py": (SOLUTIONS / "mha" / "padding.py").read_text().replace(old, new)})
    result = grade(path, quick_config, reference=SOLUTIONS, seed=1, isolate=True)
    assert len(result.output) < 5000 and result.output.endswith("[... output cut ...]")


def test_sandbox_layers_in_force_are_reported(quick_config):
    """The result names the layers in force (each one is attacked in the hostile tests)."""
    result = grade(SOLUTIONS, quick_config, reference=SOLUTIONS, seed=1, isolate=True)
    assert result.score == result.max_score
    assert "rlimits" in result.sandbox
    assert result.to_json()["sandbox"] == result.sandbox


def test_every_submission_gets_a_worker_of_its_own(submission, tmp_path, quick_config, monkeypatch):
    """Workers are forked ahead of need (spares), but none ever grades two submissions: what one
    submission leaves behind in its process never reaches the next (os.environ: the scan, which
    refuses `import os`, is off)."""
    monkeypatch.setattr(plan, "forbidden_in_source", lambda *args, **kwargs: None)
    source = (SOLUTIONS / "mha" / "padding.py").read_text()
    leave = (
        "import os\nprint('pid', os.getpid(), 'saw', os.environ.get('MHA_LAB_LEFTOVER'))\n"
        "os.environ['MHA_LAB_LEFTOVER'] = 'from the previous submission'\n"
    )
    outputs = []
    for _ in range(3):
        path = submission(files={"padding.py": source.replace("import torch\n", "import torch\n" + leave, 1)})
        result = grade(path, quick_config, reference=SOLUTIONS, seed=1, isolate=True)
        assert result.step("padding").score == result.step("padding").max_score
        outputs.append(result.output.split())
    assert all(words[3] == "None" for words in outputs), outputs
    assert len({words[1] for words in outputs}) == 3, outputs


def test_a_worker_that_dies_before_it_gets_its_submission_is_replaced(monkeypatch, quick_config):
    """A spare worker killed while it waits (from outside, or by a hostile neighbour) costs the
    submission that takes it nothing."""
    from autograder.sandbox import worker

    real_take = worker.take_worker
    killed = []

    def take_a_dying_worker(preload):
        process, conn, output = real_take(preload)
        if len(killed) < 2:  # the first worker of the submission, and its replacement, die
            process.kill()
            process.join(5)
            killed.append(process)
        return process, conn, output

    monkeypatch.setattr(worker, "take_worker", take_a_dying_worker)
    result = grade(SOLUTIONS, quick_config, reference=SOLUTIONS, seed=1, isolate=True)
    assert len(killed) == 2
    assert result.score == result.max_score


MALFORMED = [None, "junk", 7, [], {}, {"out": "junk", "weights": None, "rows": [None, "x"], "outputs": {"x": {}}}]


def test_judging_never_raises_on_malformed_observations():
    """Observations come from student code, or from a worker that student code has taken over
    (it can write anything to its pipe): judging them gives a verdict, never an exception that
    would stop a batch. None, the least a forged message can send, fails every scored check."""
    from autograder.engine.checks.check import Fail
    from autograder.engine.judge.observation import Observation
    from autograder.engine.judge.plan import cached_inputs, check_seed
    from autograder.engine.judge.verdict import expectation, judge, load_reference

    config = grading_config.load()
    reference = load_reference(SOLUTIONS, "mha")
    for step in config.steps:
        module = step_modules("mha")[step.id]
        for check in [*module.CHECKS, *module.PROBES]:
            mode = "simulated" if check.requires == "cuda" else None
            inputs = cached_inputs(check, check_seed(check, 1), mode)
            expected = None if check.diagnosis else expectation(check, inputs, reference)
            for values in MALFORMED:
                verdict = judge(check, inputs, Observation(values=values), expected, step.tolerance)
                assert verdict is None or isinstance(verdict, Fail), (check, values)
                if values is None and not check.diagnosis:
                    assert isinstance(verdict, Fail), check


def test_a_message_that_would_expand_beyond_memory_is_refused():
    """A pickle can share one list many times over: a few hundred bytes that decode into millions
    of values (2**60 with 60 levels; 2**21 here, enough to pass the budget) are refused, not
    expanded until the judge runs out of time or memory."""
    import pickle

    from autograder.sandbox import wire

    value = [0]
    for _ in range(21):
        value = [value, value]
    data = pickle.dumps({"values": value, "error": None, "forbidden": []})
    assert len(data) < 1000
    with pytest.raises(wire.WireError, match="too large"):
        wire.loads(data)


def _namespaces_work():
    import shutil
    import subprocess

    if shutil.which("bwrap") is None:
        return False
    return (
        subprocess.run(
            ["bwrap", "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "true"], capture_output=True
        ).returncode
        == 0
    )


@pytest.mark.skipif(not _namespaces_work(), reason="bubblewrap is missing or cannot make namespaces here")
def test_every_layer_is_in_force_where_the_system_offers_it(quick_config):
    """On a Linux with bubblewrap and user namespaces (CI installs bubblewrap), every layer of
    the security model is in force, the uid drop too when the grader runs as root."""
    from autograder.sandbox.confine import landlock_abi

    result = grade(SOLUTIONS, quick_config, seed=1, isolate=True)
    expected = {"bubblewrap", "private-scratch", "no-capabilities", "rlimits", "one-cpu", "seccomp"}
    expected |= {"uid-drop"} if os.geteuid() == 0 else set()
    expected |= {"landlock"} if landlock_abi() else set()
    assert expected <= set(result.sandbox), result.sandbox
    assert result.score == result.max_score


@pytest.mark.slow  # an end-to-end run of seconds: CI runs it (pytest -m "")
def test_without_bubblewrap_the_worker_server_still_confines(tmp_path):
    """Where bubblewrap is missing or refused, the server runs as a plain process and the
    per-worker layers still hold (a fresh command: the server is started once per process)."""
    import json
    import subprocess
    import sys

    env = {**os.environ, "MHA_LAB_NO_BWRAP": "1"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade",
            str(SOLUTIONS),
            "--assignment",
            "mha",
            "--json",
            str(tmp_path / "r.json"),
        ],
        cwd=KIT,
        env=env,
        capture_output=True,
        check=True,
    )
    result = json.loads((tmp_path / "r.json").read_text())
    assert "bubblewrap" not in result["sandbox"]
    assert {"no-capabilities", "rlimits"} <= set(result["sandbox"])
    if os.geteuid() == 0:
        assert "uid-drop" in result["sandbox"]
    assert result["score"] == result["max_score"]
