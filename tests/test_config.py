"""grading.yml: the kit's own file is valid, and malformed files get errors naming key and line."""
import pytest

from autograder import KIT

from autograder.engine import config as grading_config
from autograder.engine.assignment import step_modules

GOOD = """\
assignment: Test
steps:
  - id: padding
    title: Padding
    points: 10
    weights: {values: 5}
  - id: cuda
    title: Cuda
    points: 5
    options: {mode: off}
id: mha
"""


def parse(text):
    return grading_config.parse(text)


def test_kit_grading_yml_has_every_step_and_100_points(config):
    assert [s.id for s in config.steps] == ["padding", "embedding", "qkv_projection", "split_heads",
                                            "attention", "masking", "output_projection",
                                            "multi_head_attention", "cuda"]
    assert sum(s.points for s in config.steps) == 100
    assert [s.points for s in config.steps] == [10, 5, 15, 15, 15, 15, 10, 10, 5]


def test_every_step_module_is_graded_by_the_kit_config(config):
    assert set(step_modules("mha")) == {s.id for s in config.steps}


def test_good_config_is_read_with_overrides():
    config = parse(GOOD)
    assert config.step("padding").weights == {"values": 5.0}
    assert config.step("cuda").options == {"mode": "off"}
    assert config.step("padding").timeout == grading_config.DEFAULT_TIMEOUT


@pytest.mark.parametrize("text,line,words", [
    (GOOD.replace("points: 10", "points: ten"), 5, ["steps[0].points", "number"]),
    (GOOD.replace("points: 10", "points: -1"), 5, ["steps[0].points", ">= 0"]),
    (GOOD.replace("    title: Padding\n", "    title: Padding\n    pointz: 3\n"), 5, ["pointz", "not a known key"]),
    (GOOD.replace("id: padding", "id: paddin"), 3, ["steps[0].id", "paddin", "no known step"]),
    (GOOD.replace("{values: 5}", "{valuez: 5}"), 6, ["valuez", "not a known key"]),
    (GOOD.replace("mode: off", "mode: sometimes"), 10, ["options.mode", "one of"]),
    (GOOD.replace("    title: Cuda\n", ""), 7, ["steps[1]", "title"]),
    (GOOD.replace("id: cuda", "id: padding"), 7, ["repeats", "padding"]),
    (GOOD.replace("assignment: Test\n", "assignment: Test\nassignment: Again\n"), 2, ["appears twice"]),
    (GOOD.replace("    points: 5\n", "    points: 5\n   bad: [\n"), None, ["not valid YAML"]),
    ("id: mha\nassignment: Test\nsteps: []\n", 3, ["steps", "non-empty"]),
    (GOOD.replace("id: mha", "id: mhaa"), 11, ["id", "mhaa", "no known assignment"]),
    ("assignments:\n  - id: mha\n    title: A\n    steps: [{id: padding, title: P, points: 1}]\n"
     "  - id: mha\n    title: B\n    steps: [{id: padding, title: P, points: 1}]\n", 5, ["repeats", "mha"]),
    (GOOD.replace("    points: 10\n", "    points: 10\n    all_or_nothing: maybe\n"), 6, ["all_or_nothing", "true or false"]),
])
def test_malformed_config_names_key_and_line(text, line, words):
    with pytest.raises(grading_config.ConfigError) as error:
        parse(text)
    message = str(error.value)
    if line is not None:
        assert f"line {line}:" in message, message
    for word in words:
        assert word in message, message


def test_tolerance_and_timeout_overrides():
    text = GOOD.replace("steps:", "defaults:\n  timeout: 2\n  tolerance:\n    float32: {rtol: 0.01, atol: 0.001}\nsteps:")
    step = parse(text).step("padding")
    import torch
    assert step.timeout == 2.0
    assert step.tolerance[torch.float32] == (0.01, 0.001)
    assert step.tolerance[torch.float64] == grading_config.DEFAULT_TOLERANCE["float64"]


def test_precheck_needs_no_torch_and_finds_what_it_can(tmp_path):
    """The command line validates grading.yml before it starts any process or imports torch."""
    bad = tmp_path / "grading.yml"
    bad.write_text(GOOD.replace("points: 10", "points: ten"))
    code = ("import sys\nfrom autograder.engine import config\n"
            f"try:\n    config.precheck({str(bad)!r})\nexcept config.ConfigError as e:\n    print('ERROR', e)\n"
            "print('torch loaded:', 'torch' in sys.modules)\n")
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=KIT).stdout
    assert "ERROR" in out and "line 5" in out and "torch loaded: False" in out, out


def test_a_malformed_config_starts_no_worker_server(tmp_path, monkeypatch):
    from autograder.routes import cli
    from autograder.sandbox import fork_server
    started = []
    monkeypatch.setattr(fork_server, "start", lambda *args: started.append(args))
    bad = tmp_path / "grading.yml"
    bad.write_text(GOOD.replace("id: padding", "id: paddin", 1))
    assert cli.main(["grade", str(KIT / "solutions"), "--config", str(bad)]) == 2
    assert started == []
    good = tmp_path / "good.yml"
    good.write_text((KIT / "grading.yml").read_text())
    monkeypatch.setattr(fork_server, "start", lambda *args: started.append(args) or (_ for _ in ()).throw(SystemExit(9)))
    with pytest.raises(SystemExit):  # the planted server start: reached only once the file is valid
        cli.main(["grade", str(KIT / "solutions"), "--config", str(good)])
    assert started
