"""Observers of step `qkv_projection`: the student's QKVProjection and FusedQKVProjection.

QKVProjection's three projections are found by what they do (_projections.find_qkv: the layer
whose output q, k or v is), whatever they are called or however they are kept; the fused layer
is the module's one nn.Linear of (3 d_model, d_model) (harness.layers.load_linear)."""

import torch

from autograder.assignments.mha.observers._projections import QKV, find_qkv, load_projections
from autograder.harness.contract import ContractError, describe
from autograder.harness.layers import load_linear


def three(result, name):
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        raise ContractError("wrong_type", name=name, expected="three tensors (q, k, v)", got=describe(result))
    return {"q": result[0], "k": result[1], "v": result[2]}


def separate(mha, states, x, bias=True):
    """{"q", "k", "v"} of QKVProjection(d_model, bias) holding `states` in the projections that
    give q, k and v."""
    d_model = x.shape[-1]
    module = mha.projection.QKVProjection(d_model, bias=bias).double()
    load_projections(module, find_qkv(module, d_model, key=(bias,)), states)
    return three(module(x), "QKVProjection.forward(x)")


def fused(mha, state, x, bias=True):
    """{"q", "k", "v"} of FusedQKVProjection(d_model, bias) holding `state` in its layer."""
    module = mha.projection.FusedQKVProjection(x.shape[-1], bias=bias).double()
    load_linear(module, "c_attn", state)
    return three(module(x), "FusedQKVProjection.forward(x)")


def separate_layers(mha, d_model):
    """{} when QKVProjection(d_model, bias) takes (d_model, d_model) weights, with and without bias."""
    for bias in (True, False):
        module = mha.projection.QKVProjection(d_model, bias=bias)
        load_projections(
            module, find_qkv(module, d_model, key=(bias,)), {role: _zeros(d_model, d_model, bias) for role in QKV}
        )
    return {}


def fused_layer(mha, d_model):
    """{} when FusedQKVProjection(d_model, bias) takes (3 d_model, d_model) weights, with and without bias."""
    for bias in (True, False):
        module = mha.projection.FusedQKVProjection(d_model, bias=bias)
        load_linear(module, "c_attn", _zeros(d_model, 3 * d_model, bias))
    return {}


def _zeros(d_in, d_out, bias):
    state = {"weight": torch.zeros(d_out, d_in)}
    if bias:
        state["bias"] = torch.zeros(d_out)
    return state
