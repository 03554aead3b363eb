"""The judge's own work has a bound (issue 31): the source scan reads and parses each file of a
submission once, whatever its steps and however many files it has, and its time is the
submission's budget's. Counted, never timed: how many times each file is parsed, how many files
are parsed before a budget (on a clock that the parses themselves move) runs out.
(benchmarks/scan_cost.py measures the time: linear in the bytes, per shape of code.)"""

import ast
import shutil
from collections import Counter

import pytest

from autograder.engine.course import config as grading_config
from autograder.engine.judge import budget as budget_module
from autograder.engine.judge.budget import Budget
from autograder.engine.judge.plan import every_forbidden, forbidden_in_source, source_evidence
from autograder.engine.judge.runner import grade
from autograder.engine.scan import source_reader
from autograder.engine.scan.forbidden import SourceScan
from conftest import KIT, SOLUTIONS, replace_once

DEAD = "import torch\n\n\ndef unused_{n}(x):\n    y = torch.relu(x) * {n}\n    return 'scaled_' + 'dot' + y\n"
STEP_FILES = ("padding.py", "attention.py", "heads.py", "mha.py", "masking.py", "embedding.py")


def quick_config():
    """The kit's grading.yml with the cuda step off (the scan is what is measured here)."""
    return grading_config.parse(replace_once((KIT / "grading.yml").read_text(), "mode: auto", "mode: off"))


def with_dead_code(root, files: int):
    """The reference, plus `files` modules of dead code that every step file imports: more files
    than any cache of a few files holds, each reached by every step's scan."""
    path = root / "dead"
    shutil.copytree(SOLUTIONS / "mha", path / "mha")
    imports = "".join(f"from . import unused_{n}  # noqa: F401\n" for n in range(files))
    for n in range(files):
        (path / "mha" / f"unused_{n}.py").write_text(DEAD.format(n=n))
    for name in STEP_FILES:
        target = path / "mha" / name
        target.write_text(target.read_text() + "\n" + imports)
    return path


@pytest.fixture
def parses(monkeypatch):
    """Counter of ast.parse calls by the source they parse (whoever calls it)."""
    counted = Counter()
    real = ast.parse

    def counting(source, *args, **kwargs):
        counted[source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")] += 1
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    return counted


def test_each_file_is_parsed_once_per_submission_whatever_its_steps(tmp_path, parses):
    """Graded through every step, a submission of 48 files reached by every step parses each once
    (the judge used to parse each file twice per step, for the tampering scan and for the file
    graph, and its caches held 16 and 32 files)."""
    config = quick_config()
    path = with_dead_code(tmp_path, 40)
    grade(path, config)
    sources = {p.read_bytes() for p in (path / "mha").glob("*.py")}
    assert len(sources) == len(list((SOLUTIONS / "mha").glob("*.py"))) + 40
    counts = Counter(parses[source] for source in sources)
    assert max(counts) == 1 and counts[1] >= 40 + len(STEP_FILES), counts  # once; a file no step reaches: never


def test_a_submissions_scan_parses_as_many_files_as_it_has_not_files_times_steps(tmp_path, parses):
    """The plan stage's questions for every step (tampering, the file graph, forbidden-call
    evidence) read one SourceScan: its parses are its files, and nothing else parses them."""
    config = quick_config()
    path = with_dead_code(tmp_path, 24)
    modules = config.step_modules()
    scan = SourceScan(path / "mha", forbidden=every_forbidden(config))
    for step in config.steps:
        assert forbidden_in_source(modules[step.id], step, scan) is None
        source_evidence(modules[step.id], step, scan)
    reached = {file for step in config.steps for file in scan.reached(modules[step.id].FILES)}
    assert len(reached) > 30 and set(parses.values()) == {1}
    assert scan.parses == sum(parses.values()) == len(reached)


class Clock:
    """time.monotonic for budget.py, moved on by one second at each parse: the budget's time is
    then the scan's work, counted."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_the_scan_stops_once_the_submissions_budget_is_spent(tmp_path, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(budget_module.time, "monotonic", clock)
    real = source_reader.parse

    def slow_parse(source):
        clock.now += 1.0
        return real(source)

    monkeypatch.setattr(source_reader, "parse", slow_parse)
    config = quick_config()
    path = with_dead_code(tmp_path, 20)
    scan = SourceScan(path / "mha", Budget(5), every_forbidden(config))
    step = config.step("padding")
    fail = forbidden_in_source(config.step_modules()["padding"], step, scan)
    assert fail is not None and fail.message_id == "budget_spent" and fail.params["seconds"] == 5
    assert scan.parses == 5  # the file that spent the last second is parsed; none after it


def test_the_scan_spends_the_budget_the_checks_then_have(tmp_path, monkeypatch):
    """One budget per submission, from the start of its grading: a scan that spends it leaves
    the checks none (each step then says the budget was spent), and nothing is parsed after."""
    clock = Clock()
    monkeypatch.setattr(budget_module.time, "monotonic", clock)
    real = source_reader.parse
    parsed = []

    def slow_parse(source):
        clock.now += 10.0
        parsed.append(source)
        return real(source)

    monkeypatch.setattr(source_reader, "parse", slow_parse)
    text = replace_once((KIT / "grading.yml").read_text(), "mode: auto", "mode: off")
    config = grading_config.parse(text.replace("defaults:\n", "defaults:\n  budget: 25\n", 1))
    assert config.budget == 25
    result = grade(with_dead_code(tmp_path, 10), config, steps=["padding", "attention"])
    messages = {check.message_id for step in result.steps for check in step.checks}
    assert messages == {"budget_spent"}, messages
    assert len(parsed) == 3
