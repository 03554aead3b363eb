"""Observers of step `cuda`: the student's code run on the CPU and on a CUDA device ('real', a GPU,
or 'simulated', fake tensors on a fake cuda:0: autograder/harness/fake_cuda.py), the same
scenario both times, and what came out where."""

import torch

from autograder.assignments.mha.observers.embedding import embedding_table
from autograder.assignments.mha.observers.multi_head_attention import _roles, build
from autograder.harness.contract import ContractError
from autograder.harness.fake_cuda import Simulation, is_data_dependent, is_device_mismatch
from autograder.harness.layers import load_linear
from autograder.harness.observe import where_text


class Place:
    """Where a scenario runs: 'cpu', 'real' (a CUDA GPU) or 'simulated' (fake cuda:0)."""

    def __init__(self, kind):
        self.kind = kind
        self.simulation = Simulation.shared() if kind == "simulated" else None
        self.device = {"cpu": "cpu", "real": "cuda"}.get(kind) or self.simulation.device

    def tensor(self, value):
        return self.simulation.tensor(value) if self.simulation else value.to(self.device)

    def module(self, module, move_plain_tensors=False):
        if self.simulation:
            return self.simulation.module(module, move_plain_tensors)
        return module.to(self.device)

    def __enter__(self):
        if self.simulation:
            self.simulation.__enter__()
        return self

    def __exit__(self, *exc):
        if self.simulation:
            return self.simulation.__exit__(*exc)
        return False


# ---------------------------------------------------------------------------- scenarios
# Each: build(mha, **inputs) -> {name: module} (on the CPU), then run(mha, place, modules, **inputs)
# with the modules and tensor inputs already on the place -> {name: tensor}.


def _build_module(mha, states, **inputs):
    return {"mha": build(mha, states, dropout=0.1, causal=True)}


def _run_module(mha, place, modules, states, query, pad_mask):
    module = modules["mha"]
    outputs = {"eval": module(query, pad_mask=pad_mask)}
    module.train()
    outputs["train"] = trained = module(query, pad_mask=pad_mask)
    if place.kind == "real":
        trained.sum().backward()
        outputs["w_q.grad"] = _roles[module]["w_q"].parameter(module).grad
    return outputs


def _build_embedding(mha, table, ids):
    module = mha.embedding.TokenEmbedding(11, 6, pad_id=0).double()
    with torch.no_grad():
        embedding_table(module, 11).weight.copy_(table)  # found by what forward looks up, any name
    return {"embedding": module}


def _run_embedding(mha, place, modules, table, ids):
    return {"vectors": modules["embedding"](ids)}


def _build_output(mha, state, heads):
    module = mha.output.OutputProjection(12).double()
    load_linear(module, "w_o", state)
    return {"projection": module}


def _run_output(mha, place, modules, state, heads):
    return {"out": modules["projection"](heads)}


def _run_masks(mha, place, modules, ids):
    return {
        "causal_mask": mha.masking.causal_mask(4, device=place.device),
        "padding_mask": mha.masking.padding_mask(ids),
    }


def _run_attention(mha, place, modules, q, k, v, mask):
    out, weights = mha.attention.scaled_dot_product_attention(q, k, v, mask=mask)
    return {"out": out, "weights": weights}


SCENARIOS = {
    "multi_head_attention": (_build_module, _run_module),
    "embedding": (_build_embedding, _run_embedding),
    "output_projection": (_build_output, _run_output),
    "masks": (None, _run_masks),
    "attention": (None, _run_attention),
}


def run_scenario(scenario, mha, kind, inputs, move_plain_tensors=False):
    """The scenario on `kind`: modules built on the CPU and moved, tensor inputs placed, then run
    on the device. Device mismatches become a clear ContractError; a simulation that stops at
    an op needing tensor values gives None."""
    make, run = SCENARIOS[scenario]
    place = Place(kind)
    try:
        built = make(mha, **inputs) if make else {}
        modules = {name: place.module(module, move_plain_tensors) for name, module in built.items()}
        placed = {
            name: place.tensor(value) if isinstance(value, torch.Tensor) else value for name, value in inputs.items()
        }
        with place:
            return run(mha, place, modules, **placed)
    except Exception as error:  # noqa: BLE001 - sorted into the cases below
        if is_data_dependent(error):
            return None  # .item() and friends are legal on CUDA; the simulation stops there
        if is_device_mismatch(error):
            raise ContractError(
                "device_mismatch",
                device=place.device,
                where=where_text(error, mha),
                detail=str(error).splitlines()[0][:160],
            ) from None
        raise


def on_device(mha, mode, scenario, **inputs):
    """The scenario on the CPU and on the graded device: {"mode", "outputs": {name: {"device",
    "shape", "cpu_shape"(, "cpu", "gpu" on a real GPU)}}}, or "stopped_at_data_dependent_op"."""
    cpu = run_scenario(scenario, mha, "cpu", inputs)
    seen = run_scenario(scenario, mha, mode, inputs)
    if seen is None:
        return {"mode": mode, "stopped_at_data_dependent_op": True, "outputs": {}}
    outputs = {}
    for name, value in seen.items():
        outputs[name] = {"device": str(value.device), "shape": tuple(value.shape), "cpu_shape": tuple(cpu[name].shape)}
        if mode == "real":
            outputs[name].update(cpu=cpu[name].detach(), gpu=value.detach().cpu())
    return {"mode": mode, "outputs": outputs}


def plain_tensor_attributes(module):
    """'name' of every tensor a module keeps outside _parameters/_buffers (.to() leaves those)."""
    return [
        f"{prefix + '.' if prefix else ''}{name}"
        for prefix, sub in module.named_modules()
        for name, value in vars(sub).items()
        if isinstance(value, torch.Tensor)
    ]


def plain_tensors(mha):
    """{"attributes"}: tensors the modules keep as plain attributes."""
    found = []
    for module in (
        mha.mha.MultiHeadAttention(12, 3, causal=True),
        mha.embedding.TokenEmbedding(11, 6),
        mha.output.OutputProjection(12),
    ):
        found += [f"{type(module).__name__}.{name}" for name in plain_tensor_attributes(module)]
    return {"attributes": found}


def mismatch_with_tensors_moved(mha, **inputs):
    """{"mismatch": where a device mismatch still happens with every tensor attribute moved, or None}."""
    kind = "real" if torch.cuda.is_available() else "simulated"
    try:
        run_scenario("multi_head_attention", mha, kind, inputs, move_plain_tensors=True)
    except ContractError as error:
        if error.what == "device_mismatch":
            return {"mismatch": error.params["where"] or "?"}
        raise
    return {"mismatch": None}
