"""Helpers for observers: load the grader's weights into a student's layers, whatever the layers
are called, with a readable ContractError where a layer is missing or of the wrong size.

    load_linear(module, "w_o", {"weight": w, "bias": b})   # module.w_o, or its only nn.Linear
"""

import torch

from autograder.harness.contract import ContractError


def load_linear(module, name, state):
    """Copy `state` into the nn.Linear `module.<name>` (or the module's only nn.Linear, whatever
    its name), checking it is one of the right size.

    Raises ContractError with a readable message when the attribute is missing or wrong, so a
    mis-named layer reads as such and not as a tensor-size traceback. An nn.LazyLinear is
    materialised first (one call on zeros: that is all a dry run would do to it)."""
    owner = type(module).__name__
    layer = getattr(module, name, None)
    linears = [(path, sub) for path, sub in module.named_modules() if isinstance(sub, torch.nn.Linear)]
    if layer is None and len(linears) == 1:  # the only layer there is: its name does not matter
        name, layer = linears[0]
    if layer is None:
        raise ContractError("missing_attribute", owner=owner, name=name, expected="an nn.Linear")
    if not isinstance(layer, torch.nn.Linear):
        raise ContractError("bad_attribute", owner=owner, name=name, expected="an nn.Linear", got=type(layer).__name__)
    load_rows(layer, state, f"{owner}.{name}", 0, d_in=state["weight"].shape[1], whole=True)


def materialise(layer, d_in):
    """An nn.LazyLinear that has not seen an input yet gets its size from one of d_in features."""
    if isinstance(layer.weight, torch.nn.parameter.UninitializedParameter):
        with torch.no_grad():
            layer(torch.zeros(1, d_in, dtype=layer.weight.dtype, device=layer.weight.device))


def load_rows(layer, state, path, block, d_in, whole=False):
    """Copy `state` (weight (d_out, d_in), maybe bias) into block `block` of d_out output rows of
    `layer` (the whole layer if `whole`); ContractError when the sizes or the bias do not fit."""
    materialise(layer, d_in)
    owner, _, name = path.rpartition(".")
    owner = owner or path
    d_out = state["weight"].shape[0]
    rows = slice(block * d_out, (block + 1) * d_out)
    want = tuple(state["weight"].shape) if whole else (f"a multiple of {d_out}", d_in)
    shape = tuple(layer.weight.shape)
    if shape[1] != d_in or (shape[0] != d_out if whole else shape[0] < rows.stop):
        raise ContractError(
            "bad_attribute", owner=owner, name=f"{name}.weight", expected=f"shape {want}", got=f"shape {shape}"
        )
    if ("bias" in state) != (layer.bias is not None):
        expected = "a bias" if "bias" in state else "no bias (bias=False)"
        got = "a bias" if layer.bias is not None else "no bias"
        raise ContractError("bad_attribute", owner=owner, name=f"{name}.bias", expected=expected, got=got)
    with torch.no_grad():
        layer.weight[rows].copy_(state["weight"])
        if layer.bias is not None:
            layer.bias[rows].copy_(state["bias"])
