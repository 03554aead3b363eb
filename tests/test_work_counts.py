"""What grading does once that it once did again and again, counted (never timed): the speed
work of issue 34 (benchmarks/phases.py shows what each saves). Each count fails on the code
before the change."""

import os
import shutil

import pytest
import torch

from autograder.assignments.mha.observers.multi_head_attention import EARLIER
from autograder.engine.judge.runner import grade
from autograder.harness import earlier
from autograder.harness.earlier import WRITTEN_OUT, with_earlier_steps
from autograder.harness.observe import trap
from autograder.harness.package import Package
from conftest import SOLUTIONS
from planted import planted_of


def package_of(tmp_path, name, mistake=None):
    root = tmp_path / name
    shutil.copytree(SOLUTIONS / "mha", root / name)
    if mistake is not None:
        target = root / name / mistake.file
        target.write_text(mistake.apply(target.read_text()))
    return Package.load(root, name)


@pytest.fixture
def probes(monkeypatch):
    """[function name] of every probe of an earlier function, traced or not."""
    seen = []
    real = earlier.probe
    monkeypatch.setattr(
        earlier, "probe", lambda function, entry, *a, **k: seen.append(entry.name) or real(function, entry, *a, **k)
    )
    return seen


def test_each_earlier_function_is_probed_once_per_package_whatever_the_runs(tmp_path, probes):
    """The integration step's module runs in ten checks or so, and each run asked every earlier
    function its probe again (the probe's inputs are fixed): now once per package."""
    package = package_of(tmp_path, "probed_once")
    for _ in range(3):
        assert with_earlier_steps(package, EARLIER, lambda: {"x": 1}) == {"x": 1}
    assert sorted(probes) == sorted(entry.name for entry in EARLIER)


def test_a_wrong_function_is_found_once_and_written_out_in_every_run(tmp_path, probes):
    mistake = next(m for m in planted_of("attention") if not m.needs_check)
    package = package_of(tmp_path, "probed_wrong", mistake)
    reports = [with_earlier_steps(package, EARLIER, lambda: {"x": 1})[WRITTEN_OUT] for _ in range(3)]
    assert reports[0]["functions"] == ["scaled_dot_product_attention"]
    for report in reports[1:]:  # the same report, probed or remembered
        assert {k: v for k, v in report.items() if k != "probes"} == {
            k: v for k, v in reports[0].items() if k != "probes"
        }
        torch.testing.assert_close(report["probes"], reports[0]["probes"], rtol=0, atol=0)
    # each right function once, the wrong one twice (quick, then traced): on the first run only
    assert len(probes) == len(EARLIER.entries) + 1


def test_a_trap_or_another_package_probes_again(tmp_path, probes):
    package = package_of(tmp_path, "probed_trap")
    with_earlier_steps(package, EARLIER, lambda: {"x": 1})
    trap(package, "heads.py", "no_such_function")  # any trap: what a probe found may have changed
    with_earlier_steps(package, EARLIER, lambda: {"x": 1})
    with_earlier_steps(package_of(tmp_path, "probed_other"), EARLIER, lambda: {"x": 1})
    assert len(probes) == 3 * len(EARLIER.entries)


def test_the_smallest_example_search_seeds_no_device_library(monkeypatch, config, submission):
    """torch.manual_seed queues a seed for every device library (CUDA, XPU, MTIA), each with the
    text of the caller's stack: milliseconds per candidate of the search. The search shrinks CPU
    checks only: it seeds the CPU generator alone."""
    seeds = []
    real = torch.manual_seed
    monkeypatch.setattr(torch, "manual_seed", lambda seed: seeds.append(seed) or real(seed))
    mistake = next(m for m in planted_of("attention") if not m.needs_check)
    result = grade(submission(mistake), config, steps=["attention"])
    assert result.step("attention").example is not None  # the search ran
    assert seeds == []


def test_a_batch_parses_each_distinct_text_once(tmp_path, monkeypatch, config):
    """Three submissions, two files changed in one: each distinct text is parsed once for the
    whole batch (a class shares most of the skeleton's text), and each grade is the grade of
    the submission alone."""
    import io
    from collections import Counter

    from autograder.engine.operations.batch import grade_batch
    from autograder.engine.scan import source_reader

    parsed = Counter()
    real = source_reader.parse
    monkeypatch.setattr(source_reader, "parse", lambda source: parsed.update([source]) or real(source))
    paths = []
    for name in ("first", "second", "third"):
        root = tmp_path / name
        shutil.copytree(SOLUTIONS / "mha", root / "mha")
        paths.append(root)
    (paths[2] / "mha" / "heads.py").write_text((paths[2] / "mha" / "heads.py").read_text() + "\n# mine\n")
    results = grade_batch(paths, config, tmp_path / "out", workers=1, isolate=False, log=io.StringIO())
    assert parsed and max(parsed.values()) == 1, parsed.most_common(2)
    alone = grade(paths[2], config)
    assert [s.score for s in results["third"].steps] == [s.score for s in alone.steps]


def test_the_observers_seed_no_device_library(monkeypatch, config, submission):
    """The cuda step seeds before each of its scenarios and the localisation probes before each
    traced run: the CPU's generator alone (and CUDA's where a worker initialised it), never
    torch.manual_seed, which queues a seed with a stack's text for every device library."""
    seeds = []
    real = torch.manual_seed
    monkeypatch.setattr(torch, "manual_seed", lambda seed: seeds.append(seed) or real(seed))
    mistake = next(m for m in planted_of("multi_head_attention") if not m.needs_check)
    result = grade(submission(mistake), config, steps=["multi_head_attention", "cuda"])
    assert result.step("multi_head_attention").score < result.step("multi_head_attention").max_score
    assert result.step("cuda").status != "not_checked"  # its scenarios ran
    assert seeds == []


def test_a_package_in_a_fresh_folder_leaves_the_import_caches_alone(tmp_path, monkeypatch):
    """A worker loads one package, from a folder no import has seen: invalidating every finder
    torch's imports left costs milliseconds in a fresh fork, for nothing. Loading a package again
    (the judge's own runs, a changed file) still invalidates, and imports the new text."""
    import importlib

    from autograder.harness import package as package_module

    calls = []
    real = importlib.invalidate_caches
    monkeypatch.setattr(importlib, "invalidate_caches", lambda: calls.append(1) or real())
    root = tmp_path / "fresh"
    (root / "cached_pkg").mkdir(parents=True)
    (root / "cached_pkg" / "values.py").write_text("X = 1\n")
    assert package_module.Package.load(root, "cached_pkg").values.X == 1
    assert calls == []
    (root / "cached_pkg" / "values.py").write_text("X = 22\n")
    assert package_module.Package.load(root, "cached_pkg").values.X == 22
    assert calls == [1]


LEAN_WATCH = r"""
import json, sys
from autograder.harness import watch
watch.install(every_thread=True)  # as the worker server's warm-up does
import test_forbidden_runtime as routes
modes = {"function": 0, "dispatch": 0}
for cls, method, key in ((watch._FunctionWatch, "__torch_function__", "function"),
                         (watch._DispatchWatch, "__torch_dispatch__", "dispatch")):
    def counted(self, *args, _real=getattr(cls, method), _key=key, **kwargs):
        modes[_key] += 1
        return _real(self, *args, **kwargs)
    setattr(cls, method, counted)

def seen(forbidden, run):
    with watch.watching(forbidden) as calls:
        try:
            run()
        except RuntimeError:  # a fused kernel's gradient is lost in a worker (watch._guard)
            pass
    return list(calls)

import torch
with torch.inference_mode():  # made before any watch, its weights inference tensors: no key of ours
    module = torch.nn.MultiheadAttention(8, 2, batch_first=True).double().eval()

def inference_module():
    with torch.inference_mode():
        x = torch.randn(2, 4, 8, dtype=torch.float64)
        module(x, x, x)

found = {}
for label, table, forbidden in (("sdpa", routes.SDPA_ROUTES, routes.ATTENTION),
                                ("mha", routes.MHA_ROUTES, routes.ATTENTION), ("pad", routes.PAD_ROUTES, [routes.PAD])):
    for name, run in table.items():
        found[f"{label}: {name}"] = seen(forbidden, run)
found["mha: inference mode, module made outside the watch"] = seen(routes.ATTENTION, inference_module)
for disable in (False, True):  # named as the functional form, with its frame on the stack
    routes.test_functional_multi_head_attention_is_named_as_such(disable)
routes.test_sdpa_on_fake_tensors_is_seen()
routes.test_ordinary_attention_code_is_not_flagged()
print(json.dumps({"found": found, "modes": modes, "lean": getattr(watch, "lean", lambda names: None)(routes.ATTENTION)}))
"""


def test_a_worker_watches_the_grading_lists_without_a_mode():
    """In a grading worker the watch of grading.yml's forbidden names is the process-wide kernels
    alone (on the forbidden operators and on softmax and matrix products, where forbidden
    frames show): not one torch function or operator goes through a Python mode. Every route of
    tests/test_forbidden_runtime.py is still seen there, and so is an nn.MultiheadAttention made
    and run in inference mode (its fast path would reach no key of ours)."""
    import json
    import subprocess
    import sys

    from conftest import KIT

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(KIT), str(KIT / "tests")])}
    completed = subprocess.run(
        [sys.executable, "-c", LEAN_WATCH], capture_output=True, text=True, env=env, cwd=KIT, timeout=600
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.splitlines()[-1])
    assert report["modes"] == {"function": 0, "dispatch": 0} and report["lean"]
    from test_forbidden_runtime import MHA, MHA_ROUTES, PAD, PAD_ROUTES, SDPA, SDPA_ROUTES

    for name in SDPA_ROUTES:
        assert report["found"][f"sdpa: {name}"] == [SDPA], name
    for name in [*MHA_ROUTES, "inference mode, module made outside the watch"]:
        assert MHA in report["found"][f"mha: {name}"], name
    for name in PAD_ROUTES:
        assert report["found"][f"pad: {name}"] == [PAD], name


def test_grading_yml_is_checked_against_the_schema_once_per_machine(tmp_path, monkeypatch):
    """Every command (a student's `pytest assignments/` twice per run) read grading.yml through
    jsonschema, whose import alone costs a tenth of a second: what passed a schema once (the
    file, each step's weights and options) is not checked against it again on this machine, and
    jsonschema is then not imported at all. A changed text, a changed schema or a text the
    schema refuses is checked (and refused) every time."""
    import subprocess
    import sys

    from autograder.engine.course import config as grading_config
    from conftest import KIT

    monkeypatch.setenv("MHA_LAB_CACHE", str(tmp_path / "cache"))
    checked = []
    real = grading_config._schema_validator
    monkeypatch.setattr(grading_config, "_schema_validator", lambda: checked.append(1) or real())
    text = grading_config.default_path().read_text()
    for _ in range(3):
        assert grading_config.parse_all(text, deep=False)
    assert checked == [1]
    bad = text.replace("points: 15", "pointz: 15", 1)
    for _ in range(2):
        with pytest.raises(grading_config.ConfigError, match="pointz"):
            grading_config.parse_all(bad, deep=False)
    assert checked == [1, 1, 1]
    grading_config.load_all()  # deep: each step's weights and options too
    code = "import sys\nfrom autograder.engine.course import config\nconfig.load_all()\nprint('jsonschema' in sys.modules)\n"
    env = {**os.environ, "MHA_LAB_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(KIT)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=KIT, env=env)
    assert run.stdout.strip() == "False", run.stderr[-2000:]


def test_the_judge_decodes_a_report_without_copying_its_tensors():
    """A worker's report is read straight into one buffer and its tensors are views of their own
    bytes there: no byte is copied between the socket and the judge's tensors (bytes were joined
    once, then copied again per tensor). A tensor whose bytes are not aligned for its dtype is
    the exception, copied alone; each tensor is still its own (writing one changes no other)."""
    import socket
    from multiprocessing.connection import Connection

    from autograder.sandbox import wire
    from autograder.sandbox.worker import read_message

    value = {
        "out": [torch.randn(2, 3, 4, dtype=torch.float64) for _ in range(3)],
        "weights": torch.rand(4, 4, dtype=torch.float32),
        "ids": torch.arange(7),
        "blocked": torch.ones(3, dtype=torch.bool),  # 3 bytes: what follows is not aligned
        "after": torch.randn(4, dtype=torch.float64),
    }
    judge_end, worker_end = socket.socketpair()
    with Connection(judge_end.detach()) as judge, Connection(worker_end.detach()) as worker:
        worker.send_bytes(wire.dumps(value))
        data = read_message(judge, 5)
    base = torch.frombuffer(data, dtype=torch.uint8).data_ptr()
    back = wire.loads(data)

    def in_place(tensor):
        return base <= tensor.data_ptr() < base + len(data)

    assert [in_place(t) for t in [*back["out"], back["weights"], back["ids"], back["blocked"]]] == [True] * 6
    assert not in_place(back["after"])  # realigned: a copy
    for name in ("weights", "ids", "blocked", "after"):
        assert torch.equal(back[name], value[name])
    back["out"][0].fill_(0)
    assert torch.equal(back["out"][1], value["out"][1]) and torch.equal(back["weights"], value["weights"])


def test_a_students_run_reads_grading_yml_once(tmp_path, monkeypatch):
    """`pytest assignments/` read grading.yml when its plugin started and again to collect the
    checks (a YAML parse and a build each): now once per text. A changed file is read again."""
    from autograder.engine.course import config as grading_config
    from autograder.routes import pytest_plugin

    reads = []
    real = grading_config.load_all
    monkeypatch.setattr(grading_config, "load_all", lambda *a, **k: reads.append(1) or real(*a, **k))
    monkeypatch.setattr(pytest_plugin, "_last_read", {}, raising=False)
    shutil.copytree(SOLUTIONS / "mha", tmp_path / "assignments" / "mha")
    text = grading_config.default_path().read_text()
    (tmp_path / "grading.yml").write_text(text)
    first = pytest_plugin.present_assignments(tmp_path / "assignments")
    second = pytest_plugin.present_assignments(tmp_path / "assignments")
    assert [c.id for c in first] == [c.id for c in second] == ["mha"] and len(reads) == 1
    (tmp_path / "grading.yml").write_text(text.replace("points: 15", "points: 16", 1))
    again = pytest_plugin.present_assignments(tmp_path / "assignments")
    assert len(reads) == 2 and sum(s.points for s in again[0].steps) == sum(s.points for s in first[0].steps) + 1
