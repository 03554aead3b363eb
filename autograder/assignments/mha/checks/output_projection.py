"""Checks for step `output_projection`: mha/output.py, OutputProjection(d_model, bias=True)."""

import torch.nn.functional as F

from autograder.assignments.mha.observers import output_projection as observers
from autograder.engine.checks.check import Check, linear_state, randn, randsize

from ._shared import concat_heads

FILES = ["output.py"]  # what the step grades (scanned for forbidden calls)


def by_definition(state, heads):
    return {"out": F.linear(concat_heads(heads), state["weight"], state.get("bias"))}


class Layer(Check):
    """Has w_o: nn.Linear(d_model, d_model), with and without bias."""

    id = "layer"
    observer = observers.layer
    arguments = {"d_model": 12}

    def expected(self):
        return {}


class Values(Check):
    """(B, H, L, d_k) -> heads side by side (B, L, D) -> w_o: (B, L, D)."""

    id = "values"
    weight = 3
    observer = observers.project

    def inputs(self, rng):
        return {"state": linear_state(rng, 12, 12), "heads": randn(rng, 2, 3, 5, 4)}

    def expected(self, state, heads):
        return by_definition(state, heads)


class NoBias(Check):
    """With bias=False: the same without a bias, other sizes (4 heads of 5)."""

    id = "no_bias"
    observer = observers.project
    arguments = {"bias": False}

    def inputs(self, rng):
        return {"state": linear_state(rng, 20, 20, bias=False), "heads": randn(rng, 3, 4, 2, 5)}

    def expected(self, state, heads):
        return by_definition(state, heads)


# ### BEGIN HIDDEN CHECKS


class RandomSizes(Check):
    """Random sizes, against the reference."""

    id = "random_sizes"
    visibility = "hidden"
    weight = 3
    observer = observers.project

    def inputs(self, rng):
        num_heads, d_k = randsize(rng, 2, 6), randsize(rng, 2, 7)
        bias = True  # bias=False is a fixed check; a random coin would hide a missing bias
        return {
            "state": linear_state(rng, num_heads * d_k, num_heads * d_k, bias),
            "heads": randn(rng, randsize(rng, 2, 4), num_heads, randsize(rng, 2, 8), d_k),
            "bias": bias,
        }


# ### PROBES (unscored: run when the step fails, to explain why)


class LocaliseOutput(Check):
    """Localisation (engine/mistakes/localise.py): OutputProjection of (B=2, H=3, L=4, d_k=5)
    heads, the merged heads and the output against the reference's."""

    diagnosis = "localised"
    localise = True
    observer = observers.traced

    def inputs(self, rng):
        return {"state": linear_state(rng, 15, 15), "heads": randn(rng, 2, 3, 4, 5)}
