"""The masking step sees what enters the softmax however the softmax is spelled (observers/masking.py):
a softmax over the wrong axis is the attention step's mistake, and the masking step's verdict on it
is the same for torch.softmax and for one written out with exp after a max or a logsumexp taken
along that axis (fails before: the written-out ones were charged in masking too). An additive mask
written as a subtraction is no such shift: correct code that uses one passes masking."""

import shutil

import pytest

from autograder.engine.course import config as grading_config
from autograder.engine.judge.runner import grade
from conftest import SOLUTIONS

LINE = "weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)"
SPELLINGS = {
    "torch": "weights = torch.softmax(scores, dim={a})",
    "max": "e = torch.exp(scores - scores.amax(dim={a}, keepdim=True))\n    weights = e / e.sum(dim={a}, keepdim=True)",
    "logsumexp": "weights = torch.exp(scores - scores.logsumexp(dim={a}, keepdim=True))",
    "max_of_values": "e = (scores - scores.max(dim={a}, keepdim=True).values).exp()\n    weights = e / e.sum({a}, keepdim=True)",
}


def masking_lost(tmp_path, line):
    root = tmp_path / "submission"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(SOLUTIONS / "mha", root / "mha")
    target = root / "mha" / "attention.py"
    source = target.read_text()
    assert source.count(LINE) == 1
    target.write_text(source.replace(LINE, line))
    result = grade(root, grading_config.load(assignment="mha"), reference=SOLUTIONS, seed=1, steps=["masking"])
    step = next(s for s in result.steps if s.id == "masking")
    return sorted(c.id for c in step.checks if c.passed is False)


@pytest.mark.slow
@pytest.mark.parametrize("axis", [-1, -2, 1])
def test_the_masking_verdict_does_not_depend_on_how_the_softmax_is_spelled(tmp_path, axis):
    verdicts = {name: masking_lost(tmp_path, code.format(a=axis)) for name, code in SPELLINGS.items()}
    assert len({tuple(v) for v in verdicts.values()}) == 1, verdicts
    if axis == -1:
        assert verdicts["torch"] == []


ADDITIVE = "s = scores - 1e9 * mask.float() if mask is not None else scores\n    "


def test_an_additive_mask_written_as_a_subtraction_is_no_softmax_shift(tmp_path):
    """The mask subtracted, then a softmax written out (after a max or a logsumexp): the same
    verdict as torch.softmax of it; subtracting the mask is not subtracting a maximum."""
    spellings = [
        ADDITIVE + "weights = torch.softmax(s, dim=-1)",
        ADDITIVE + "e = torch.exp(s - s.amax(-1, keepdim=True))\n    weights = e / e.sum(-1, keepdim=True)",
        ADDITIVE + "e = torch.exp(s - s.logsumexp(-1, keepdim=True))\n    weights = e",
    ]
    verdicts = [masking_lost(tmp_path, code) for code in spellings]
    assert verdicts == [[], [], []], verdicts  # a float32 mask on float64 scores too: nothing raised


def test_correct_code_with_a_written_out_softmax_passes_masking(tmp_path):
    code = "e = torch.exp(scores - scores.amax(-1, keepdim=True))\n    weights = e / e.sum(-1, keepdim=True)"
    assert masking_lost(tmp_path, code) == []
