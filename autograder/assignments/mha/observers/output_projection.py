"""Observers of step `output_projection`: the student's OutputProjection(d_model, bias=True)."""

import torch

from autograder.harness.layers import load_linear
from autograder.harness.trace import traced_calls


def project(mha, state, heads, bias=True):
    """{"out"}: OutputProjection holding `state` on `heads` (B, H, L, d_k)."""
    d_model = heads.shape[1] * heads.shape[3]
    module = mha.output.OutputProjection(d_model, bias=bias).double()
    load_linear(module, "w_o", state)
    return {"out": module(heads)}


def layer(mha, d_model):
    """{} when OutputProjection(d_model, bias) takes (d_model, d_model) weights, with and without bias."""
    for bias in (True, False):
        module = mha.output.OutputProjection(d_model, bias=bias)
        state = {"weight": torch.zeros(d_model, d_model)}
        if bias:
            state["bias"] = torch.zeros(d_model)
        load_linear(module, "w_o", state)
    return {}


def traced(mha, state, heads):
    """Localisation: OutputProjection holding `state` on `heads`, recorded (harness/trace.py)."""
    module = mha.output.OutputProjection(heads.shape[1] * heads.shape[3], bias="bias" in state).double()
    load_linear(module, "w_o", state)
    with torch.no_grad():
        return traced_calls(mha, [lambda: module(heads)])
