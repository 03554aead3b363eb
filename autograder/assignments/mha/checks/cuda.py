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

from autograder.assignments.mha.observers import cuda as observers
from autograder.engine.check import Check, Fail, compare_tensor, linear_state, randint, randn
from .masking import causal_by_hand
from .multi_head_attention import weights

OPTIONS = {"mode": ("auto", "real", "simulated", "off")}
FILES = []


class OnCuda(Check):
    """Helper: a scenario run on the CPU and on the graded device, then compared."""

    requires = "cuda"
    observer = observers.on_device

    @property
    def arguments(self):
        return {"scenario": self.id}  # observers.SCENARIOS

    def judge(self, inputs, got, expected, tol):
        if got.get("stopped_at_data_dependent_op"):  # the simulation could not finish: no verdict, no points
            return Fail("simulation_stopped", {"mode": got["mode"]})
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


class EmbeddingOnCuda(OnCuda):
    """TokenEmbedding moved to cuda, looking up cuda ids."""

    id = "embedding"
    files = ("embedding.py",)  # what it runs (runner.HangGuard)

    def inputs(self, rng):
        return {"table": randn(rng, 11, 6), "ids": randint(rng, 1, 11, 2, 6)}


class OutputProjectionOnCuda(OnCuda):
    """OutputProjection moved to cuda, on cuda heads."""

    id = "output_projection"
    files = ("output.py",)  # what it runs (runner.HangGuard)

    def inputs(self, rng):
        return {"state": linear_state(rng, 12, 12), "heads": randn(rng, 2, 3, 5, 4)}


class MasksOnCuda(OnCuda):
    """causal_mask(L, device=...) on the device; padding_mask of cuda ids stays on cuda."""

    id = "masks"
    files = ("masking.py",)  # what it runs (runner.HangGuard)

    def inputs(self, rng):
        return {"ids": torch.tensor([[3, 1, 4, 0], [5, 0, 0, 0]])}


class AttentionOnCuda(OnCuda):
    """scaled_dot_product_attention with q, k, v and a mask on cuda."""

    id = "attention"
    files = ("attention.py",)  # what it runs (runner.HangGuard)

    def inputs(self, rng):
        mask = causal_by_hand(4, 4) | torch.tensor([False, False, True, True])
        return {"q": randn(rng, 2, 3, 4, 8), "k": randn(rng, 2, 3, 4, 8), "v": randn(rng, 2, 3, 4, 5), "mask": mask}


# ### PROBES (unscored: run when the step fails, to explain why)


class MaskNotBuffer(Check):
    """A module keeps no tensor as a plain attribute: .to() would leave it on the CPU."""

    diagnosis = "mask_not_buffer"
    files = ("mha.py", "embedding.py", "output.py")  # what it runs (runner.HangGuard)
    observer = observers.plain_tensors

    def judge(self, inputs, got, expected, tol):
        if got["attributes"]:
            return Fail("mask_not_buffer", {})
        return None


class CpuTensorInForward(Check):
    """With every tensor attribute moved too, forward still mixes devices: forward itself
    creates a tensor on the CPU."""

    diagnosis = "cpu_tensor_in_forward"
    files = ("mha.py",)  # what it runs (runner.HangGuard)
    observer = observers.mismatch_with_tensors_moved

    def inputs(self, rng):
        return MultiHeadAttentionOnCuda().inputs(rng)

    def judge(self, inputs, got, expected, tol):
        if got["mismatch"]:
            return Fail("cpu_tensor_in_forward", {})
        return None
