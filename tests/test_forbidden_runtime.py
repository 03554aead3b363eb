"""The run-time watch (autograder/harness/watch.py) sees a forbidden call however it is reached:
through torch.ops.aten, torch._C entry points, inside DisableTorchFunction, in inference mode,
on fake tensors; and it never flags ordinary attention arithmetic."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.harness.watch import watching

SDPA = "torch.nn.functional.scaled_dot_product_attention"
MHA_F = "torch.nn.functional.multi_head_attention_forward"
MHA = "torch.nn.MultiheadAttention"
PAD = "torch.nn.utils.rnn.pad_sequence"
ATTENTION = (SDPA, MHA_F, MHA)


def qkv(dtype=torch.float64, grad=False):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, 3, 4, 5, dtype=dtype, generator=g, requires_grad=grad) for _ in range(3)]


def seen(forbidden, fn):
    with watching(forbidden) as calls:
        fn()
    return list(calls)


def _no_torch_function(fn):
    def run():
        with torch._C.DisableTorchFunction():
            fn()

    return run


def _mha_module():
    module = nn.MultiheadAttention(8, 2, batch_first=True).double()
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    return module, x


def _mha_fast_path():
    module, x = _mha_module()
    module.eval()
    with torch.no_grad():
        module(x, x, x)


SDPA_ROUTES = {
    "plain": lambda: F.scaled_dot_product_attention(*qkv()),
    "float32 with grad": lambda: F.scaled_dot_product_attention(*qkv(torch.float32, grad=True)).sum().backward(),
    "getattr with a built name": lambda: getattr(F, "scaled_dot_" + "product_attention")(*qkv()),
    "aten math": lambda: torch.ops.aten._scaled_dot_product_attention_math(*qkv()),
    "aten fused cpu kernel": lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(*qkv()),
    "torch._C._nn": lambda: torch._C._nn.scaled_dot_product_attention(*qkv()),
    "DisableTorchFunction + getattr": _no_torch_function(
        lambda: getattr(F, "scaled_dot_" + "product_attention")(*qkv())
    ),
    "DisableTorchFunction + aten math": _no_torch_function(
        lambda: torch.ops.aten._scaled_dot_product_attention_math.default(*qkv())
    ),
    "DisableTorchFunction + fused kernel": _no_torch_function(
        lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(*qkv())
    ),
    "inference mode": lambda: torch.inference_mode()(lambda: F.scaled_dot_product_attention(*qkv()))(),
    "with dropout": lambda: F.scaled_dot_product_attention(*qkv(), dropout_p=0.5),
}


@pytest.mark.parametrize("route", SDPA_ROUTES, ids=str)
def test_sdpa_is_seen_however_it_is_reached(route):
    assert seen(ATTENTION, SDPA_ROUTES[route]) == [SDPA]


MHA_ROUTES = {
    "module": lambda: (lambda m, x: m(x, x, x))(*_mha_module()),
    "module fast path": _mha_fast_path,
    "DisableTorchFunction + module": _no_torch_function(lambda: (lambda m, x: m(x, x, x))(*_mha_module())),
    "DisableTorchFunction + fast path": _no_torch_function(_mha_fast_path),
}


@pytest.mark.parametrize("route", MHA_ROUTES, ids=str)
def test_multihead_attention_is_seen_however_it_is_reached(route):
    assert MHA in seen(ATTENTION, MHA_ROUTES[route])


@pytest.mark.parametrize("disable", [False, True])
def test_functional_multi_head_attention_is_named_as_such(disable):
    module, x = _mha_module()
    t = x.transpose(0, 1)

    def run():
        F.multi_head_attention_forward(
            t,
            t,
            t,
            8,
            2,
            module.in_proj_weight,
            module.in_proj_bias,
            None,
            None,
            False,
            0.0,
            module.out_proj.weight,
            module.out_proj.bias,
        )

    assert seen(ATTENTION, _no_torch_function(run) if disable else run) == [MHA_F]


PAD_ROUTES = {
    "plain": lambda: nn.utils.rnn.pad_sequence([torch.tensor([1, 2]), torch.tensor([3])], batch_first=True),
    "DisableTorchFunction + torch._C._nn": _no_torch_function(
        lambda: torch._C._nn.pad_sequence([torch.tensor([1, 2]), torch.tensor([3])], True, 0.0)
    ),
    "aten": lambda: torch.ops.aten.pad_sequence([torch.tensor([1, 2]), torch.tensor([3])], True),
}


@pytest.mark.parametrize("route", PAD_ROUTES, ids=str)
def test_pad_sequence_is_seen_however_it_is_reached(route):
    assert seen([PAD], PAD_ROUTES[route]) == [PAD]


def test_sdpa_on_fake_tensors_is_seen():
    """The simulated cuda step runs student code on fake tensors (meta here: no compiler needed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    def run():
        with FakeTensorMode():
            q = torch.empty(2, 3, 4, 5, device="meta")
            F.scaled_dot_product_attention(q, q, q)

    assert seen(ATTENTION, run) == [SDPA]


def test_ordinary_attention_code_is_not_flagged():
    def attention():
        q, k, v = qkv(grad=True)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / 5**0.5 + (q @ k.transpose(-2, -1)) * 0
        mask = torch.ones(4, 4, dtype=torch.bool).triu(1)
        weights = scores.masked_fill(mask, float("-inf")).softmax(-1)
        weights = F.dropout(torch.softmax(weights, dim=-1, dtype=torch.float32).double(), 0.1, training=True)
        out = torch.baddbmm(torch.zeros(6, 4, 5, dtype=torch.float64), weights.reshape(6, 4, 4), v.reshape(6, 4, 5))
        linear, embedding = nn.Linear(5, 5).double(), nn.Embedding(10, 5, padding_idx=0)
        (linear(out).sum() + embedding(torch.tensor([[1, 0]])).sum()).backward()
        with torch.inference_mode():
            torch.softmax(torch.randn(3, 3), -1)
        nn.functional.pad(torch.ones(2, 3), (0, 2))

    assert seen(ATTENTION + (PAD,), attention) == []


def test_the_grader_own_calls_outside_a_watch_are_unchanged():
    """Our composite kernels run ATen's own decomposition: same values and gradients."""
    q, k, v = qkv(grad=True)
    out = F.scaled_dot_product_attention(q, k, v)
    out.sum().backward()
    expected = torch.softmax(q @ k.transpose(-2, -1) / 5**0.5, -1) @ v
    assert torch.allclose(out, expected) and q.grad is not None
