"""`python -m autograder doctor` (issue 25): one line per layer, PASS / FAIL / SKIP, non-zero on a
FAIL; here (no GPU) it passes and says the cuda step will be simulated; on a GPU machine it
passes with the cuda step real (marked cuda)."""

import subprocess
import sys

import pytest

from autograder.routes.cli import doctor
from conftest import KIT, cuda_available


def test_any_fail_makes_the_exit_code_non_zero():
    lines = [doctor.Line("PASS", "a", "fine"), doctor.Line("SKIP", "b", "not here", "install b")]
    assert doctor.exit_code(lines) == 0
    assert doctor.exit_code([*lines, doctor.Line("FAIL", "c", "broken", "fix c")]) == 1
    assert str(lines[1]).splitlines() == ["SKIP  b                        not here", "      hint: install b"]


def test_a_layer_that_breaks_the_probe_fails_with_the_raw_error():
    said = []
    results = [
        {"layers": [], "in_force": [], "ok": True, "device": "cpu"},
        {"layers": ["rlimits"], "in_force": ["rlimits"], "ok": True, "device": "cpu"},
        {"layers": ["rlimits", "landlock"], "in_force": ["rlimits"], "ok": True, "device": "cpu"},
        {"layers": ["rlimits", "landlock", "seccomp"], "in_force": [], "ok": False, "error": "OSError: [Errno 1] x"},
    ]
    layers = doctor.probe_lines(results, False, lambda *parts: said.append(doctor.Line(*parts)))
    assert [(line.verdict, line.name) for line in said] == [
        ("PASS", "probe (no sandbox)"),
        ("PASS", "layer +rlimits"),
        ("SKIP", "layer +landlock"),
        ("FAIL", "layer +seccomp"),
    ]
    assert said[-1].reason == "OSError: [Errno 1] x" and said[-1].hint
    assert layers == {"wanted": ["rlimits", "landlock", "seccomp"], "in_force": ["rlimits"]}


def run_doctor():
    return subprocess.run(
        [sys.executable, "-m", "autograder", "doctor"], cwd=KIT, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
@pytest.mark.skipif(cuda_available(), reason="a GPU machine: see the cuda test")
def test_doctor_passes_here_and_says_the_cuda_step_is_simulated():
    done = run_doctor()
    lines = [line for line in done.stdout.splitlines() if line[:4] in ("PASS", "FAIL", "SKIP")]
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(lines) >= 10 and not [line for line in lines if line.startswith("FAIL")]
    assert "the cuda step will be simulated" in done.stdout
    assert any(line.startswith("PASS  layer +seccomp") for line in lines)
    assert any(line.startswith("PASS  reference") for line in lines)


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
def test_doctor_passes_on_a_gpu_with_the_cuda_step_real():
    done = run_doctor()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  cuda (no sandbox)" in done.stdout and "PASS  layer +seccomp" in done.stdout
    assert "step cuda real" in done.stdout and "the cuda step runs on the real GPU" in done.stdout


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
def test_the_reference_scores_full_marks_on_the_real_gpu_in_the_sandbox():
    from autograder.engine.course import config as grading_config
    from autograder.engine.judge.runner import grade

    for config in grading_config.load_all():
        result = grade(KIT / "solutions", config, reference=KIT / "solutions", seed=1, isolate=True)
        assert result.score == result.max_score, [(s.id, s.score) for s in result.steps]
        if any(step.mode == "mode_real" for step in result.steps):  # kv_cache has no cuda step
            assert "cuda" in result.sandbox, result.sandbox  # CUDA initialised in the worker, before confinement
        for step in result.steps:
            assert step.mode in (None, "mode_real"), step.mode
