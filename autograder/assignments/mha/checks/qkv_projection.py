"""Checks for step `qkv_projection`: mha/projection.py, QKVProjection and FusedQKVProjection."""

import torch.nn.functional as F

from autograder.assignments.mha.observers import qkv_projection as observers
from autograder.engine.checks.check import Check, linear_state, randn, randsize

FILES = ["projection.py"]  # what the step grades (scanned for forbidden calls)

D = 10  # d_model: not a square, not a multiple of the batch or sequence sizes


def separate_inputs(rng, d_model, bias, shape):
    states = {name: linear_state(rng, d_model, d_model, bias) for name in ("w_q", "w_k", "w_v")}
    return {"states": states, "x": randn(rng, *shape, d_model), "bias": bias}


class SeparateLayers(Check):
    """QKVProjection has w_q, w_k, w_v: nn.Linear(d_model, d_model), with and without bias."""

    id = "separate_layers"
    observer = observers.separate_layers
    arguments = {"d_model": D}

    def expected(self):
        return {}


class SeparateValues(Check):
    """q, k, v each come from their own projection: q = x W_q^T + b_q, and so on."""

    id = "separate_values"
    weight = 3
    observer = observers.separate

    def inputs(self, rng):
        return separate_inputs(rng, D, True, (2, 5))

    def expected(self, states, x, bias):
        return {name[-1]: F.linear(x, state["weight"], state.get("bias")) for name, state in states.items()}


class SeparateNoBias(Check):
    """With bias=False the projections have no bias and still give the right q, k, v."""

    id = "separate_no_bias"
    observer = observers.separate

    def inputs(self, rng):
        return separate_inputs(rng, D, False, (3, 4))

    def expected(self, states, x, bias):
        return {name[-1]: F.linear(x, state["weight"]) for name, state in states.items()}


class FusedLayer(Check):
    """FusedQKVProjection has c_attn: nn.Linear(d_model, 3 * d_model), with and without bias."""

    id = "fused_layer"
    observer = observers.fused_layer
    arguments = {"d_model": D}

    def expected(self):
        return {}


class FusedValues(Check):
    """The fused output (B, L, 3D) is cut into q, k, v: consecutive blocks of D, in that order."""

    id = "fused_values"
    weight = 3
    observer = observers.fused

    def inputs(self, rng):
        return {"state": linear_state(rng, D, 3 * D), "x": randn(rng, 2, 5, D)}

    def expected(self, state, x):
        qkv = F.linear(x, state["weight"], state["bias"])  # (B, L, 3D)
        return {"q": qkv[..., :D], "k": qkv[..., D : 2 * D], "v": qkv[..., 2 * D :]}


# ### BEGIN HIDDEN CHECKS


class RandomSeparate(Check):
    """Random sizes, with and without bias, against the reference."""

    id = "random_separate"
    visibility = "hidden"
    weight = 2
    observer = observers.separate

    def inputs(self, rng):
        d_model = randsize(rng, 2, 20)
        bias = True  # bias=False is a fixed check; a random coin would hide a missing bias
        return separate_inputs(rng, d_model, bias, (randsize(rng, 2, 4), 6))


class RandomFused(Check):
    """Random sizes of the fused projection, against the reference."""

    id = "random_fused"
    visibility = "hidden"
    weight = 2
    observer = observers.fused

    def inputs(self, rng):
        d_model = randsize(rng, 2, 20)
        bias = True  # as above
        return {
            "state": linear_state(rng, d_model, 3 * d_model, bias),
            "x": randn(rng, 2, randsize(rng, 2, 8), d_model),
            "bias": bias,
        }
