"""A student's `pytest assignments/`, run for real in a subprocess on copies of the kit."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from autograder.engine.course import config as grading_config
from conftest import ASSIGNMENTS, KIT, SOLUTIONS, cuda_available, replace_once


def student_copy(tmp_path, mha_source, grading=None):
    """What a student has: assignments/ (test file, conftest, mha/) with a grading.yml above it."""
    root = tmp_path / "kit"
    (root / "assignments").mkdir(parents=True)
    for name in ("conftest.py", "test_checks.py"):
        shutil.copy(ASSIGNMENTS / name, root / "assignments" / name)
    shutil.copytree(mha_source, root / "assignments" / "mha")
    (root / "grading.yml").write_text(grading or (KIT / "grading.yml").read_text())
    return root


def pytest_in(root, *args, cache=False):
    """`pytest assignments/` in a student copy, with the grader of this checkout (not whichever
    copy the environment has installed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(KIT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "assignments", *([] if cache else ["-p", "no:cacheprovider"]), *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def table_line(output, step):
    return next(line for line in output.splitlines() if line.strip().startswith(step + " "))


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_untouched_skeleton_scores_zero_with_not_implemented_and_no_traceback(tmp_path):
    completed = pytest_in(student_copy(tmp_path, ASSIGNMENTS / "mha"), "--cuda")
    out = completed.stdout
    assert completed.returncode == 1
    assert "MHA Lab score (public checks)" in out
    for step in (step.id for step in grading_config.load(assignment="mha").steps):
        assert "0.00 /" in table_line(out, step) and "not implemented yet" in table_line(out, step)
    assert "Traceback" not in out and "raise NotImplementedError" not in out


def test_reference_gets_full_public_marks(tmp_path):
    completed = pytest_in(student_copy(tmp_path, SOLUTIONS / "mha"), "--cuda")
    assert completed.returncode == 0, completed.stdout[-3000:]
    assert "100.00 / 100" in table_line(completed.stdout, "total")
    assert "simulated CUDA device" in completed.stdout


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_without_a_gpu_the_quick_run_leaves_the_cuda_step_to_cuda_flag(tmp_path):
    if cuda_available():
        import pytest

        pytest.skip("with a GPU the cuda step always runs")
    completed = pytest_in(student_copy(tmp_path, SOLUTIONS / "mha"))
    assert completed.returncode == 0, completed.stdout[-3000:]
    assert "not checked: no GPU here; run `pytest assignments/ --cuda`" in table_line(completed.stdout, "cuda")
    assert "95.00 / 100" in table_line(completed.stdout, "total")


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_one_failing_check_shows_expected_and_seen(tmp_path):
    root = student_copy(tmp_path, SOLUTIONS / "mha")
    heads = root / "assignments" / "mha" / "heads.py"
    heads.write_text(heads.read_text().replace("x = x.transpose(1, 2).contiguous()", "x = x.contiguous()"))
    completed = pytest_in(root)
    out = completed.stdout
    assert "15.00 / 15" not in table_line(out, "split_heads")
    assert "10.00 / 10" in table_line(out, "padding")
    # on the smallest input that still fails: what was expected, what the code gave
    assert "smallest input that fails (merge_values): x " in out and "expected merged = " in out, out[-3000:]
    assert "values out of tolerance, the first at index" not in out  # the details are behind -v
    out = pytest_in(root, "-v", "--step", "split_heads").stdout
    assert "x merge_values: merged: " in out and "values out of tolerance, the first at index" in out


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_endless_loop_ends_in_a_per_check_timeout(tmp_path):
    grading = replace_once((KIT / "grading.yml").read_text(), "timeout: 10", "timeout: 1")
    root = student_copy(tmp_path, SOLUTIONS / "mha", grading)
    padding = root / "assignments" / "mha" / "padding.py"
    padding.write_text(
        padding.read_text().replace(
            "    if len(sequences) == 0:", "    while True:\n        pass\n    if len(sequences) == 0:"
        )
    )
    completed = pytest_in(root, "-k", "padding or embedding")
    out = completed.stdout
    assert completed.returncode == 1
    assert "0.00 / 10" in table_line(out, "padding") and "stopped after 1 s" in out
    assert "5.00 / 5" in table_line(out, "embedding")


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_student_exception_shows_a_traceback_into_their_file(tmp_path):
    root = student_copy(tmp_path, SOLUTIONS / "mha")
    output = root / "assignments" / "mha" / "output.py"
    output.write_text(output.read_text().replace("return self.w_o(merged)", "return self.w_o(merged.T)"))
    completed = pytest_in(root, "-k", "output_projection")
    assert "mha/output.py" in completed.stdout and "RuntimeError" in completed.stdout
    assert "your code raised RuntimeError" in completed.stdout


@pytest.mark.slow  # two end-to-end runs of tens of seconds: CI runs it (pytest -m "")
def test_an_exception_on_both_devices_fails_the_cuda_check_in_a_students_own_run(tmp_path):
    """`pytest assignments/ --cuda` judges as the grade of record does: code that raises the same
    exception on the CPU and on the device fails the scenario's cuda check, named, whichever step's
    file raised it."""
    from planted import PLANTED, REAL_BUGS

    for name, file in (("rb_heads_summed", "mha/output.py"), ("rb_mha_mask_missing_head_axis", "mha/mha.py")):
        mistake = next(m for m in PLANTED + REAL_BUGS if m.name == name)
        source = tmp_path / name / "mha"
        shutil.copytree(SOLUTIONS / "mha", source)
        (source / mistake.file).write_text(mistake.apply((source / mistake.file).read_text()))
        completed = pytest_in(student_copy(tmp_path / name, source), "--cuda", "-v")
        assert "5.00 / 5.00" not in table_line(completed.stdout, "cuda"), (name, completed.stdout[-3000:])
        assert f"on the CPU and on cuda alike ({file}, line" in completed.stdout, (name, completed.stdout[-3000:])


LOAD_PLUGIN = """
import gc, json, sys
import pytest  # pytest has started: its objects are tracked
passes = []
gc.callbacks.append(lambda phase, info: phase == "start" and "torch" in sys.modules and passes.append(info))
gc.set_threshold(50, 1, 1)  # a collector as eager as can be: left on, it makes many full passes
sys.path.insert(0, "assignments")
import conftest  # the kit's pytest set-up: it loads the grader
print(json.dumps({"passes while torch loads": len(passes), "enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
                  "torch": "torch" in sys.modules}))
"""


def test_loading_the_grader_makes_no_collection_and_freezes_what_it_loaded():
    # in the kit's conftest.py, torch and the grader load with the cyclic collector paused (left on, after pytest's start,
    # it made two or three full passes over torch's objects as they loaded: 0.2 to 0.3 s of each
    # run); after it the collector is on again, and what loaded is frozen out of its later passes
    env = {**os.environ, "PYTHONPATH": str(KIT)}
    completed = subprocess.run(
        [sys.executable, "-c", LOAD_PLUGIN], cwd=KIT, env=env, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    seen = json.loads(completed.stdout)
    assert seen["torch"] and seen["passes while torch loads"] == 0 and seen["enabled"], seen
    assert seen["frozen"] > 100_000, seen  # torch's objects, out of every later pass


def test_the_collector_is_on_again_where_the_grader_fails_to_load():
    script = (
        "import gc, sys\n"
        "sys.path.insert(0, 'assignments')\n"
        "sys.modules['autograder.routes.pytest_plugin'] = None  # its import fails, as a broken install's\n"
        "try:\n"
        "    import conftest\n"
        "except ImportError:\n"
        "    print(gc.isenabled())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(KIT)}
    completed = subprocess.run([sys.executable, "-c", script], cwd=KIT, env=env, capture_output=True, text=True)
    assert completed.stdout.split() == ["True"], completed.stdout + completed.stderr[-2000:]
