"""Checks for step `cuda`: everything runs with its inputs on a CUDA device.

`.to(device)` must move all of a module's state, nothing may be created on the CPU inside
forward, and outputs stay on the input's device. Each check is a scenario run twice with the
student's own code: on the CPU, and on the device of the grading mode (grading.yml
`options: {mode: auto | real | simulated | off}`, auto = real if a GPU is present, else
simulated):

* real: a CUDA GPU; outputs (and, after backward, gradients) must be on it and match the CPU run.
* simulated: fake tensors on a fake cuda:0 (autograder/fake_cuda.py); a CPU tensor meeting a cuda
  one raises PyTorch's own device-mismatch error. Devices and shapes are checked, values are not,
  and backward does not run (the autograd engine needs a real device).

Only device handling is judged here; the values are judged in their own steps.
"""

import torch

from autograder.engine import messages
from autograder.engine.check import (
    Check,
    ContractError,
    Fail,
    compare_tensor,
    linear_state,
    load_linear,
    randint,
    randn,
)
from autograder.engine.fake_cuda import Simulation, is_data_dependent, is_device_mismatch
from .masking import causal_by_hand
from .multi_head_attention import _roles, build, weights

OPTIONS = {"mode": ("auto", "real", "simulated", "off")}
FILES = []


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


def run_scenario(check, mha, kind, inputs, move_plain_tensors=False):
    """check.scenario on `kind`: modules built on the CPU and moved, tensor inputs placed, then
    the scenario runs on the device. Device mismatches become a clear ContractError."""
    from autograder.engine.runner import where  # the runner imports the checks: import it late

    place = Place(kind)
    try:
        modules = {
            name: place.module(module, move_plain_tensors) for name, module in check.build(mha, **inputs).items()
        }
        placed = {
            name: place.tensor(value) if isinstance(value, torch.Tensor) else value for name, value in inputs.items()
        }
        with place:
            return check.scenario(mha, place, modules, **placed)
    except Exception as error:  # noqa: BLE001 - sorted into the cases below
        if is_data_dependent(error):
            return None  # .item() and friends are legal on CUDA; the simulation stops there
        if is_device_mismatch(error):
            raise ContractError(
                "device_mismatch", device=place.device, where=where(error, mha), detail=str(error).splitlines()[0][:160]
            ) from None
        raise


class OnCuda(Check):
    """Helper: a scenario run on the CPU and on the graded device, then compared."""

    requires = "cuda"
    backward = False  # real mode only: run backward too and check the gradients' device

    def build(self, mha, **inputs):
        """The student's modules the scenario needs, built on the CPU: {name: module}."""
        return {}

    def scenario(self, mha, place, modules, **inputs):
        """Run student code on `place` (tensor inputs and `modules` are already there);
        return {name: tensor}."""
        raise NotImplementedError

    def observe(self, mha, mode, **inputs):
        cpu = run_scenario(self, mha, "cpu", inputs)
        seen = run_scenario(self, mha, mode, inputs)
        if seen is None:
            return {"mode": mode, "stopped_at_data_dependent_op": True, "outputs": {}}
        outputs = {}
        for name, value in seen.items():
            outputs[name] = {
                "device": str(value.device),
                "shape": tuple(value.shape),
                "cpu_shape": tuple(cpu[name].shape),
            }
            if mode == "real":
                outputs[name].update(cpu=cpu[name].detach(), gpu=value.detach().cpu())
        return {"mode": mode, "outputs": outputs}

    def judge(self, inputs, got, expected, tol):
        if got.get("stopped_at_data_dependent_op"):  # the simulation could not finish: no verdict
            return Fail("not_checked", {"reason": messages.render("data_dependent", mode=got["mode"])})
        for name, seen in got["outputs"].items():
            if not seen["device"].startswith(("cuda", "meta")):
                return Fail("device", {"name": name, "expected": "cuda", "got": seen["device"]})
            if seen["shape"] != seen["cpu_shape"]:
                return Fail("shape", {"name": f"{name} on cuda", "expected": seen["cpu_shape"], "got": seen["shape"]})
            if "gpu" in seen:
                fail = compare_tensor(seen["gpu"], seen["cpu"], tol, name=f"{name} on cuda vs cpu")
                if fail:
                    return fail
        return None


class MultiHeadAttentionOnCuda(OnCuda):
    """MultiHeadAttention(causal=True) with a pad_mask, moved with .to('cuda'), in eval() and in
    train() with dropout; on a real GPU also backward, with gradients on the GPU."""

    id = "multi_head_attention"
    files = ("mha.py",)  # what it runs (runner.HangGuard)
    weight = 3

    def inputs(self, rng):
        return {
            "states": weights(rng),
            "query": randn(rng, 2, 5, 12),
            "pad_mask": torch.tensor([[False] * 5, [False, False, False, True, True]]),
        }

    def build(self, mha, states, **inputs):
        return {"mha": build(mha, states, dropout=0.1, causal=True)}

    def scenario(self, mha, place, modules, states, query, pad_mask):
        module = modules["mha"]
        outputs = {"eval": module(query, pad_mask=pad_mask)}
        module.train()
        outputs["train"] = trained = module(query, pad_mask=pad_mask)
        if place.kind == "real":
            trained.sum().backward()
            outputs["w_q.grad"] = _roles[module]["w_q"].layer(module).weight.grad
        return outputs


class EmbeddingOnCuda(OnCuda):
    """TokenEmbedding moved to cuda, looking up cuda ids."""

    id = "embedding"
    files = ("embedding.py",)  # what it runs (runner.HangGuard)

    def inputs(self, rng):
        return {"table": randn(rng, 11, 6), "ids": randint(rng, 1, 11, 2, 6)}

    def build(self, mha, table, ids):
        module = mha.embedding.TokenEmbedding(11, 6, pad_id=0).double()
        with torch.no_grad():
            module.embedding.weight.copy_(table)
        return {"embedding": module}

    def scenario(self, mha, place, modules, table, ids):
        return {"vectors": modules["embedding"](ids)}


class OutputProjectionOnCuda(OnCuda):
    """OutputProjection moved to cuda, on cuda heads."""

    id = "output_projection"
    files = ("output.py",)  # what it runs (runner.HangGuard)

    def inputs(self, rng):
        return {"state": linear_state(rng, 12, 12), "heads": randn(rng, 2, 3, 5, 4)}

    def build(self, mha, state, heads):
        module = mha.output.OutputProjection(12).double()
        load_linear(module, "w_o", state)
        return {"projection": module}

    def scenario(self, mha, place, modules, state, heads):
        return {"out": modules["projection"](heads)}


class MasksOnCuda(OnCuda):
    """causal_mask(L, device=...) on the device; padding_mask of cuda ids stays on cuda."""

    id = "masks"
    files = ("masking.py",)  # what it runs (runner.HangGuard)

    def inputs(self, rng):
        return {"ids": torch.tensor([[3, 1, 4, 0], [5, 0, 0, 0]])}

    def scenario(self, mha, place, modules, ids):
        return {
            "causal_mask": mha.masking.causal_mask(4, device=place.device),
            "padding_mask": mha.masking.padding_mask(ids),
        }


class AttentionOnCuda(OnCuda):
    """scaled_dot_product_attention with q, k, v and a mask on cuda."""

    id = "attention"
    files = ("attention.py",)  # what it runs (runner.HangGuard)

    def inputs(self, rng):
        mask = causal_by_hand(4, 4) | torch.tensor([False, False, True, True])
        return {"q": randn(rng, 2, 3, 4, 8), "k": randn(rng, 2, 3, 4, 8), "v": randn(rng, 2, 3, 4, 5), "mask": mask}

    def scenario(self, mha, place, modules, q, k, v, mask):
        out, weights_ = mha.attention.scaled_dot_product_attention(q, k, v, mask=mask)
        return {"out": out, "weights": weights_}


# ### PROBES (unscored: run when the step fails, to explain why)


def plain_tensor_attributes(module):
    """'name' of every tensor a module keeps outside _parameters/_buffers (.to() leaves those)."""
    return [
        f"{prefix + '.' if prefix else ''}{name}"
        for prefix, sub in module.named_modules()
        for name, value in vars(sub).items()
        if isinstance(value, torch.Tensor)
    ]


class MaskNotBuffer(Check):
    """A module keeps no tensor as a plain attribute: .to() would leave it on the CPU."""

    diagnosis = "mask_not_buffer"
    files = ("mha.py", "embedding.py", "output.py")  # what it runs (runner.HangGuard)

    def observe(self, mha):
        found = []
        for module in (
            mha.mha.MultiHeadAttention(12, 3, causal=True),
            mha.embedding.TokenEmbedding(11, 6),
            mha.output.OutputProjection(12),
        ):
            found += [f"{type(module).__name__}.{name}" for name in plain_tensor_attributes(module)]
        return {"attributes": found}

    def judge(self, inputs, got, expected, tol):
        if got["attributes"]:
            return Fail("mask_not_buffer", {})
        return None


class CpuTensorInForward(Check):
    """With every tensor attribute moved too, forward still mixes devices: forward itself
    creates a tensor on the CPU."""

    diagnosis = "cpu_tensor_in_forward"
    files = ("mha.py",)  # what it runs (runner.HangGuard)

    def inputs(self, rng):
        return MultiHeadAttentionOnCuda().inputs(rng)

    def observe(self, mha, **inputs):
        from autograder.engine.runner import cuda_available

        kind = "real" if cuda_available() else "simulated"
        try:
            run_scenario(MultiHeadAttentionOnCuda(), mha, kind, inputs, move_plain_tensors=True)
        except ContractError as error:
            if error.fail.message_id == "device_mismatch":
                return {"mismatch": error.fail.params["where"]}
            raise
        return {"mismatch": None}

    def judge(self, inputs, got, expected, tol):
        if got["mismatch"]:
            return Fail("cpu_tensor_in_forward", {})
        return None
