"""A release that earns nothing by itself (issue 30): no function or class the student release
ships computes a step's answer, tried in every step where its signature fits and graded with the
hidden checks (tests/leak.py says how).

On main 7d8dbad the measure found 25 such (shipped function, step) pairs, among them the
observers' written-out split_heads (5.36 public + 3.21 hidden points), attention (11.25 + 3.75),
masks and kv_cache functions, the KVCache written out (15.38 + 4.62), and the public checks'
oracles: attention's (dict values, 11.25 + 3.75), grouped attention's (17.14 + 6.43), the
padding rule, heads_by_slicing, concat_heads, heads_by_rule, mask_by_hand, padding_mask_by_hand.

The quick run measures the files an assignment ships (its observers and checks, warm-up), the
skeleton and the notebooks' cells. The whole release (the engine, routes, sandbox and harness
too, about 1,300 callables in 11,000 trials) is slow, and so is a planted leak, which shows that
the measure finds one.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import KIT, SOLUTIONS

LEAK = KIT / "tests" / "leak.py"


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory):
    from autograder.publish.release import release

    return release(tmp_path_factory.mktemp("leak") / "mha-lab")


def measured(release: Path, out: Path, only=None) -> dict:
    """tests/leak.py's report, run in a process of its own (it forks once per candidate)."""
    command = [sys.executable, str(LEAK), str(release), str(out), *(["--only", only] if only else [])]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=3000)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(out.read_text())


def graded_steps() -> set:
    """ "<assignment>:<step>" of every step but cuda (which judges the devices, not values)."""
    from autograder.engine.course import config as grading_config

    return {f"{config.id}:{step.id}" for config in grading_config.load_all() for step in config.steps} - {
        f"{config.id}:cuda" for config in grading_config.load_all()
    }


def described(report) -> list:
    return [f"{row['candidate']} in {row['slot']} ({row['adapter']}): {row['checks']}" for row in report["earned"]]


def test_nothing_an_assignment_ships_computes_an_answer(release_dir, tmp_path):
    report = measured(release_dir, tmp_path / "report.json", only="assignments/")
    assert report["tried"] > 500  # the measure ran, in every step that judges a function's values
    assert {slot.rsplit(":", 1)[0] for slot in report["slots"]} == graded_steps()
    assert described(report) == []


@pytest.mark.slow
def test_nothing_the_release_ships_computes_an_answer(release_dir, tmp_path):
    report = measured(release_dir, tmp_path / "report.json")
    assert report["candidates"] > 1000 and report["tried"] > 5000
    assert report["unloaded"] == {}  # every shipped module loaded: none was left out of the measure
    assert described(report) == []


@pytest.mark.slow
def test_the_measure_finds_a_planted_answer(release_dir, tmp_path):
    """A shipped file that holds right functions (the reference's heads and padding, renamed, one
    of them nested in a class) is found, in its step, public and hidden checks alike."""
    planted = tmp_path / "mha-lab"
    shutil.copytree(release_dir, planted, ignore=shutil.ignore_patterns("notebooks", "__pycache__"))
    heads = (SOLUTIONS / "mha" / "heads.py").read_text().replace("def split_heads(", "def _cut(")
    heads += "\n\nclass Helper:\n    @staticmethod\n    def join(x):\n        return merge_heads(x)\n"
    (planted / "autograder" / "assignments" / "mha" / "observers" / "_planted.py").write_text(heads)
    report = measured(planted, tmp_path / "report.json", only="_planted")
    found = {(row["candidate"].rsplit(":", 1)[1], row["slot"]) for row in report["earned"]}
    assert ("_cut", "mha:split_heads:split_heads") in found
    assert ("Helper.join", "mha:split_heads:merge_heads") in found
    rows = [row for row in report["earned"] if row["slot"] == "mha:split_heads:split_heads"]
    assert all(row["public"] > 0 and row["hidden"] > 0 for row in rows)
