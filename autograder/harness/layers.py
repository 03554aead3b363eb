"""Helpers for observers: load the grader's weights into a student's layers, whatever the layers
are called, with a readable ContractError where a layer is missing or of the wrong size.

    load_linear(module, "w_o", {"weight": w, "bias": b})   # module.w_o, or its one (D, D) nn.Linear
"""

import torch

from autograder.harness.contract import ContractError


def load_linear(module, name, state):
    """Copy `state` into the nn.Linear `module.<name>` or, where the module has no such
    attribute, into its one nn.Linear (any subclass, anywhere in it) whose weight has the state's
    shape, or its only nn.Linear, whatever the name; checking it is one of the right size.

    Raises ContractError with a readable message when no layer is there or the one there is
    wrong, so a mis-sized layer reads as such and not as a tensor-size traceback. An
    nn.LazyLinear is materialised first (one call on zeros: that is all a dry run would do to it)."""
    owner = type(module).__name__
    named = getattr(module, name, None)
    linears = [(path, sub) for path, sub in module.named_modules() if isinstance(sub, torch.nn.Linear)]
    fitting = [(path, sub) for path, sub in linears if fits(sub, state["weight"].shape)]
    if named is not None:  # the contract's name, where the student used it
        layer = named
    elif len(fitting) == 1:  # the one layer of this size: its name does not matter
        name, layer = fitting[0]
    elif len(linears) == 1:
        name, layer = linears[0]
    else:
        raise ContractError("missing_attribute", owner=owner, name=name, expected="an nn.Linear")
    if not isinstance(layer, torch.nn.Linear):
        raise ContractError("bad_attribute", owner=owner, name=name, expected="an nn.Linear", got=type(layer).__name__)
    load_rows(layer, state, f"{owner}.{name}", 0, d_in=state["weight"].shape[1], whole=True)


def fits(layer, shape) -> bool:
    """Whether an nn.Linear takes a weight of `shape` (an nn.LazyLinear's output size decides)."""
    if isinstance(layer.weight, torch.nn.parameter.UninitializedParameter):
        return layer.out_features == shape[0]
    return tuple(layer.weight.shape) == tuple(shape)


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
    prefix = f"{name}." if name else ""  # "" for the module itself (an nn.Linear subclass)
    load_parameter_rows(
        layer.weight, layer.bias, state, owner or path, f"{prefix}weight", f"{prefix}bias", block, d_in, whole
    )


def load_parameter_rows(weight, bias, state, owner, weight_name, bias_name, block, d_in, whole=False):
    """load_rows for a weight parameter (d_out rows or a multiple, d_in columns; a parameter of
    more axes counts its leading ones as rows: (3, D, d_in) holds 3 D rows) and its bias
    parameter (None: no bias, else as many numbers as rows) wherever they are kept: an
    nn.Linear's, or parameters that forward applies with F.linear. `owner`, `weight_name`,
    `bias_name`: how messages name them."""
    d_out = state["weight"].shape[0]
    rows = slice(block * d_out, (block + 1) * d_out)
    want = tuple(state["weight"].shape) if whole else (f"a multiple of {d_out}", d_in)
    shape = tuple(weight.shape)
    count = weight.shape[:-1].numel() if weight.dim() else 0
    if weight.dim() < 2 or shape[-1] != d_in or (shape != want if whole else count < rows.stop):
        raise ContractError(
            "bad_attribute", owner=owner, name=weight_name, expected=f"shape {want}", got=f"shape {shape}"
        )
    # A layer without the bias the state has is loaded without it, and its outputs decide: where
    # the bias matters they differ, and where it cannot (a key projection's bias adds the same
    # amount to every score of a query row, which the softmax cancels) they do not (issue 32). A
    # bias where the contract says none (bias=False) is the contract's structure, stated in the
    # skeleton: refused.
    if "bias" not in state and bias is not None:
        raise ContractError("bad_attribute", owner=owner, name=bias_name, expected="no bias (bias=False)", got="a bias")
    if bias is not None and bias.numel() != count:
        raise ContractError(
            "bad_attribute", owner=owner, name=bias_name, expected=f"{count} numbers", got=f"shape {tuple(bias.shape)}"
        )
    with torch.no_grad():
        (weight if weight.dim() == 2 else weight.view(-1, d_in))[rows].copy_(state["weight"])
        if bias is not None:
            (bias if bias.dim() == 1 else bias.view(-1))[rows].copy_(state["bias"])
