"""grading.yml: the kit's own file is valid, and malformed files get errors naming key and line."""
import pytest

from autograder import config as grading_config
from autograder.checks import step_modules

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
"""


def parse(text):
    return grading_config.parse(text, known_steps=step_modules())


def test_kit_grading_yml_has_every_step_and_100_points(config):
    assert [s.id for s in config.steps] == ["padding", "embedding", "qkv_projection", "split_heads",
                                            "attention", "masking", "output_projection",
                                            "multi_head_attention", "cuda"]
    assert sum(s.points for s in config.steps) == 100
    assert [s.points for s in config.steps] == [10, 5, 15, 15, 15, 15, 10, 10, 5]


def test_every_step_module_is_graded_by_the_kit_config(config):
    assert set(step_modules()) == {s.id for s in config.steps}


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
    ("assignment: Test\nsteps: []\n", 2, ["steps", "non-empty"]),
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
