"""Fairness to correct code in any style, and no new way for a wrong answer to pass (issue 12).

The style gallery itself is in tests/variants.py (GALLERY) and graded in tests/test_variants.py;
here: the blind spots that are closed, the role mapping of projections on wrong answers, the
tolerance rule, and the hidden inputs drawn from the contract."""

import pytest
import torch
from conftest import SOLUTIONS, grade_with_hidden

from autograder.assignments.mha.observers._projections import find_projections
from autograder.harness.contract import ContractError
from autograder.engine.assignment import step_modules
from autograder.engine.runner import grade

MHA = "mha.py"
DROPOUT = "weights = self.dropout(weights)  # (B, H, Lq, Lk)"
RETURN = "return self.w_o(out)  # (B, Lq, D)"


def failing(result, step):
    return sorted(check.id for check in result.step(step).checks if check.passed is False)


def planted(submission, file, *patches):
    root = submission()
    target = root / "mha" / file
    source = target.read_text()
    for old, new in patches:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    target.write_text(source)
    return root


# ---------------------------------------------------------------------------- dropout placement

WRONG_DROPOUT = {
    "on_the_output": [(DROPOUT, "pass"), (RETURN, "return self.dropout(self.w_o(out))")],
    "on_the_merged_heads": [(DROPOUT, "pass"), (RETURN, "return self.w_o(self.dropout(out))")],
    "on_the_scores": [
        (DROPOUT, "pass"),
        ("weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(self.dropout(scores), dim=-1)"),
    ],
    "on_the_values": [
        (DROPOUT, "pass"),
        ("out = merge_heads(weights @ v)", "out = merge_heads(weights @ self.dropout(v))"),
    ],
    "not_rescaled": [(DROPOUT, "weights = self.dropout(weights) * ((1 - self.dropout.p) if self.training else 1.0)")],
}


@pytest.mark.parametrize("name", WRONG_DROPOUT)
def test_dropout_anywhere_but_on_the_weights_fails_the_dropout_check_only(config, submission, name):
    result = grade(
        planted(submission, MHA, *WRONG_DROPOUT[name]),
        config,
        reference=SOLUTIONS,
        seed=5,
        steps=["multi_head_attention"],
    )
    assert failing(result, "multi_head_attention") == ["dropout"]
    message = next(c.message for c in result.step("multi_head_attention").checks if c.id == "dropout")
    assert "dropout on the attention weights" in message


# ---------------------------------------------------------------------------- projections by role

WRONG_PROJECTIONS = {
    # Seed 003: k and v projected with w_q.
    "k_and_v_with_w_q": [
        ("k = split_heads(self.w_k(key)", "k = split_heads(self.w_q(key)"),
        ("v = split_heads(self.w_v(value)", "v = split_heads(self.w_q(value)"),
    ],
    "w_k_is_w_q": [
        (
            "        self.w_v = nn.Linear(d_model, d_model, bias=bias)\n",
            "        self.w_v = nn.Linear(d_model, d_model, bias=bias)\n        self.w_k = self.w_q\n",
        )
    ],
    "fused_cut_k_q_v": [
        (
            "        self.w_q = nn.Linear(d_model, d_model, bias=bias)\n"
            "        self.w_k = nn.Linear(d_model, d_model, bias=bias)\n"
            "        self.w_v = nn.Linear(d_model, d_model, bias=bias)\n",
            "        self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)\n",
        ),
        (
            "q = split_heads(self.w_q(query), self.num_heads)",
            "k_, q_, v_ = self.c_attn(query).split(self.d_model, dim=-1)\n        q = split_heads(q_, self.num_heads)",
        ),
        (
            "k = split_heads(self.w_k(key), self.num_heads)",
            "k = split_heads(self.c_attn(key).split(self.d_model, dim=-1)[0], self.num_heads)",
        ),
        (
            "v = split_heads(self.w_v(value), self.num_heads)",
            "v = split_heads(self.c_attn(value).split(self.d_model, dim=-1)[2], self.num_heads)",
        ),
    ],
    "no_output_projection": [(RETURN, "return out")],
}


@pytest.mark.parametrize("name", WRONG_PROJECTIONS)
def test_a_wrong_projection_still_loses_points_whatever_the_mapping(config, submission, name):
    result = grade(
        planted(submission, MHA, *WRONG_PROJECTIONS[name]),
        config,
        reference=SOLUTIONS,
        seed=5,
        steps=["multi_head_attention"],
    )
    lost = failing(result, "multi_head_attention")
    assert {"self_attention", "cross_attention"} & set(lost) or "gradients" in lost, lost
    assert result.step("multi_head_attention").score < 10


def test_a_projection_shared_by_two_roles_fails_the_gradient_check_and_says_so(config, submission):
    result = grade(
        planted(submission, MHA, *WRONG_PROJECTIONS["k_and_v_with_w_q"]), config, steps=["multi_head_attention"]
    )
    message = next(c.message for c in result.step("multi_head_attention").checks if c.id == "gradients")
    assert "the key projection is the same weights as the query projection (w_q)" in message


class RawParameters(torch.nn.Module):
    """Projections as bare parameters and F.linear: nothing tells which is which."""

    def __init__(self, d_model):
        super().__init__()
        self.weights = torch.nn.Parameter(torch.randn(4, d_model, d_model, dtype=torch.float64))

    def forward(self, query, key=None, value=None, pad_mask=None):
        return torch.nn.functional.linear(query, self.weights[0])


def test_when_no_layer_can_be_found_the_message_names_what_the_contract_accepts():
    with pytest.raises(ContractError) as caught:
        find_projections(RawParameters(6), 6)
    from autograder.engine.messages import render

    text = render(caught.value.what, **caught.value.params)
    assert "fused (d_model -> 3*d_model)" in text and "w_q, w_k, w_v, w_o" in text and "QKVProjection" in text


def test_a_layer_applied_to_the_key_but_discarded_does_not_count_as_the_key_projection():
    """The student's composed QKVProjection runs all three layers on every input; only the
    calls whose output the result depends on give a role."""

    class Composed(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.a, self.b, self.c, self.d = (torch.nn.Linear(d, d).double() for _ in range(4))

        def forward(self, query, key=None, value=None, pad_mask=None):
            def three(x):  # q, k, v from layers registered in another order
                return self.c(x), self.a(x), self.b(x)

            q, k, v = three(query)[0], three(key)[1], three(value)[2]
            w = torch.softmax(q @ k.transpose(-2, -1), -1)
            return self.d(w @ v)

    roles = find_projections(Composed(6), 6)
    assert {role: slot.path for role, slot in roles.items()} == {"w_q": "c", "w_k": "a", "w_v": "b", "w_o": "d"}


# ---------------------------------------------------------------------------- hidden inputs


def test_hidden_padding_is_trailing_as_pad_batch_makes_it():
    check = next(c for c in step_modules("mha")["multi_head_attention"].CHECKS if c.id == "random_configurations")
    for seed in range(40):
        mask = check.inputs(torch.Generator().manual_seed(seed))["pad_mask"]
        lengths = (~mask).sum(-1)
        assert torch.equal(mask, torch.arange(mask.shape[1])[None, :] >= lengths[:, None])
        assert (lengths >= 1).all() and mask[:, -1].all()


def test_a_lengths_based_mask_passes_and_the_hidden_check_still_catches_an_ignored_mask(config, submission):
    lengths = planted(
        submission,
        MHA,
        (
            "blocked = blocked | pad_mask[:, None, None, :]  # (B, 1, Lq, Lk)",
            "n = (~pad_mask).sum(-1)\n"
            "            blocked = blocked | (torch.arange(Lk, device=n.device)[None, :] >= n[:, None])[:, None, None, :]",
        ),
    )
    for seed in (1, 2, 3):
        assert failing(grade_with_hidden(lengths, config, seed=seed), "multi_head_attention") == []
    ignored = planted(submission, MHA, ("if pad_mask is not None:", "if False:"))
    assert "random_configurations" in failing(grade_with_hidden(ignored, config, seed=1), "multi_head_attention")
