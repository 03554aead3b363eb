"""Checks for step `cuda`: everything runs with its inputs on a CUDA device.

`.to(device)` must move all of a module's state, nothing may be created on the CPU inside
forward, and outputs stay on the input's device. Each check is a scenario run twice with the
student's own code and the student's own initial weights (the same seed; nothing of the grader's
is loaded): on the CPU, and on the device of the grading mode (grading.yml
`options: {mode: auto | real | simulated | off}`, auto = real if a GPU is present, else
simulated):

* real: a CUDA GPU; outputs (and, after backward, gradients) must be on it and agree with the CPU
  run (a random output, dropout in train(), is compared in shape only: a GPU draws other numbers).
* simulated: tensors on a simulated cuda:0 that compute on the CPU (autograder/harness/fake_cuda.py);
  a CPU tensor meeting a cuda one raises PyTorch's own device-mismatch error. Outputs must be on
  the device and agree with the CPU run, dropout included (both draw from the same generator).
  Backward does not run there (the autograd engine needs a real accelerator). Where the simulated
  device cannot be built (no C++ compiler), fake tensors on 'meta' check devices and shapes only.

Only device handling is judged here: a wrong value that the CPU run shares is another step's
mistake. The step agrees only on values: a scenario that raises on both devices (the same
exception at the same place) shows nothing of the device and fails, with the exception named,
unless an earlier step's function that the judge finds wrong raised it: then the module's scenario
runs again with the wrong earlier functions written out (harness/earlier.py, as the module step
does) and is judged on that run. Nothing else excuses it: where the code raises is the student's
to choose, so a place that another step charges proves nothing (a scenario of an earlier step's
own code is never written out: it would judge the reference).
"""

import torch

from autograder.assignments.mha.observers import cuda as observers
from autograder.assignments.mha.observers.multi_head_attention import EARLIER
from autograder.engine.checks import earlier
from autograder.engine.checks.check import Check, Fail, compare_tensor, randint, randn
from autograder.harness.earlier import WRITTEN_OUT

from ._shared import causal_by_hand

OPTIONS = {"mode": ("auto", "real", "simulated", "off")}
FILES = []
INTEGRATES = True  # runs the whole module: a mistake of an earlier step may cost points here too


def seed(rng):
    """The seed both runs draw the student's initial weights (and dropout) from."""
    return int(torch.randint(0, 2**31 - 1, (), generator=rng))


class OnCuda(Check):
    """Helper: a scenario run on the CPU and on the graded device, then compared."""

    requires = "cuda"
    observer = observers.on_device
    random_outputs = ()  # outputs drawn at random (dropout): a real GPU draws other numbers than the CPU

    @property
    def arguments(self):
        return {"scenario": self.id}  # observers.SCENARIOS

    def judge(self, inputs, got, expected, tol):
        def judge_own(own):
            return self.judge_own(own, tol)

        written_out = got.get(WRITTEN_OUT) if isinstance(got, dict) else None
        fail = earlier.judge_with_earlier_steps(earlier.own_run(got), judge_own, EARLIER, tol)
        if fail is None or fail.message_id != "failed_on_both_devices" or not isinstance(written_out, dict):
            return fail  # a device mistake, or an exception on the device alone: never another step's
        if not inside_written_out(fail.params.get("where", ""), written_out):
            return fail  # raised outside every function the judge writes out: nothing shows the device
        return earlier.judge_with_earlier_steps(got, judge_own, EARLIER, tol)

    def judge_own(self, got, tol):
        """The verdict on one run of the scenario on both devices (the student's own, or the one
        with the earlier steps' wrong functions written out)."""
        if got.get("stopped_at_data_dependent_op"):  # the 'meta' fallback could not finish: no verdict, no points
            return Fail("simulation_stopped", {"mode": got["mode"]})
        if got.get("failed_on_both"):  # no run to compare: nothing shows that it runs on the device
            said = {"name": self.id, "error": got["failed_on_both"], "type": got["type"], "where": got["where"]}
            return Fail("failed_on_both_devices", said)
        if got.get("failed_on_cpu_only"):
            return Fail("failed_on_cpu_only", {"name": self.id, "error": got["failed_on_cpu_only"]})
        for name, seen in got["outputs"].items():
            if seen["device"] is None:  # not a tensor on one side or both: the same on both is no device matter
                if seen["type"] != seen["cpu_type"]:
                    return Fail("device_run_differs", {"name": name, "cpu": seen["cpu_type"], "got": seen["type"]})
                continue
            if not seen["device"].startswith(("cuda", "meta")):
                return Fail("device", {"name": name, "expected": "cuda", "got": seen["device"]})
            if seen["shape"] != seen["cpu_shape"]:
                return Fail("shape", {"name": f"{name} on cuda", "expected": seen["cpu_shape"], "got": seen["shape"]})
            if seen["device_values"] is None or (got["mode"] == "real" and name in self.random_outputs):
                continue
            fail = compare_tensor(seen["device_values"], seen["cpu_values"], tol, name=name)
            if fail is None:
                continue
            found = fail.params
            if "index" in found and "expected" in found:  # values, exact_values, not_finite
                return Fail(
                    "device_values_differ",
                    {"name": name, "index": found["index"], "expected": found["expected"], "got": found["got"]},
                )
            return Fail(
                "device_run_differs", {"name": name, "cpu": str(found.get("expected")), "got": str(found.get("got"))}
            )
        return None


def inside_written_out(where: str, written_out: dict) -> bool:
    """Whether `where` ('mha/heads.py, line 9, in merge_heads') is in an earlier function that the
    judge writes out: the exception is then that function's, and the scenario is judged with it
    written out."""
    functions = written_out.get("functions")
    if not isinstance(functions, (list, tuple)):
        return False
    return any(
        entry.name in functions
        and where.startswith(f"{EARLIER.assignment}/{entry.file}.py, line ")
        and where.endswith(f" in {entry.name}")
        for entry in EARLIER
    )


class MultiHeadAttentionOnCuda(OnCuda):
    """MultiHeadAttention(causal=True) with a pad_mask, moved with .to('cuda'), in eval() and in
    train() with dropout; on a real GPU also backward, with gradients on the GPU."""

    id = "multi_head_attention"
    observer = observers.on_device_with_earlier_steps  # the module: a function written out is not its code
    weight = 3
    random_outputs = ("train",)

    def inputs(self, rng):
        return {
            "seed": seed(rng),
            "query": randn(rng, 2, 5, 12),
            "pad_mask": torch.tensor([[False] * 5, [False, False, False, True, True]]),
        }


class EmbeddingOnCuda(OnCuda):
    """TokenEmbedding moved to cuda, looking up cuda ids."""

    id = "embedding"

    def inputs(self, rng):
        return {"seed": seed(rng), "ids": randint(rng, 1, 11, 2, 6)}


class OutputProjectionOnCuda(OnCuda):
    """OutputProjection moved to cuda, on cuda heads."""

    id = "output_projection"

    def inputs(self, rng):
        return {"seed": seed(rng), "heads": randn(rng, 2, 3, 5, 4)}


class MasksOnCuda(OnCuda):
    """causal_mask(L, device=...) on the device; padding_mask of cuda ids stays on cuda."""

    id = "masks"

    def inputs(self, rng):
        return {"ids": torch.tensor([[3, 1, 4, 0], [5, 0, 0, 0]])}


class AttentionOnCuda(OnCuda):
    """scaled_dot_product_attention with q, k, v and a mask on cuda."""

    id = "attention"

    def inputs(self, rng):
        mask = causal_by_hand(4, 4) | torch.tensor([False, False, True, True])
        return {"q": randn(rng, 2, 3, 4, 8), "k": randn(rng, 2, 3, 4, 8), "v": randn(rng, 2, 3, 4, 5), "mask": mask}


# ### PROBES (unscored: run when the step fails, to explain why)


class MaskNotBuffer(Check):
    """A module keeps no tensor as a plain attribute: .to() would leave it on the CPU."""

    diagnosis = "mask_not_buffer"
    observer = observers.plain_tensors

    def judge(self, inputs, got, expected, tol):
        if got["attributes"]:
            return Fail("mask_not_buffer", {})
        return None


class CpuTensorInForward(Check):
    """With every tensor attribute moved too, forward still mixes devices: forward itself
    creates a tensor on the CPU."""

    diagnosis = "cpu_tensor_in_forward"
    observer = observers.mismatch_with_tensors_moved

    def inputs(self, rng):
        return MultiHeadAttentionOnCuda().inputs(rng)

    def judge(self, inputs, got, expected, tol):
        if got["mismatch"]:
            return Fail("cpu_tensor_in_forward", {})
        return None
