"""Checks for step `cuda`: everything runs with its inputs on a CUDA device.

`.to(device)` must move all of a module's state, nothing may be created on the CPU inside
forward, outputs stay on the input's device and match the CPU result of the same code. Each
check runs the student's code twice, on the CPU and on the GPU, and compares the two, so only
device handling is judged here (the values are judged in their own steps).

Without a CUDA device these checks are reported as not checked.
"""
import torch

from ..check import Check, Fail, compare_tensor, linear_state, load_linear, randint, randn
from .multi_head_attention import build, weights

OPTIONS = {"mode": ("auto", "real", "off")}


def on_both(run, *tensors):
    """run(*tensors) on the CPU and with every tensor on cuda; both results, on the CPU for judging."""
    cpu = run(*tensors, device="cpu")
    gpu = run(*(t.to("cuda") for t in tensors), device="cuda")
    return {name: {"cpu": cpu[name].detach(), "gpu": gpu[name].detach().cpu(),
                   "device": str(gpu[name].device)} for name in cpu}


class OnCuda(Check):
    """Helper: every observed output is on cuda and equals the CPU result."""

    requires = "cuda"

    def judge(self, inputs, got, expected, tol):
        for name, seen in got.items():
            if not seen["device"].startswith("cuda"):
                return Fail("device", {"name": name, "expected": "cuda", "got": seen["device"]})
            fail = compare_tensor(seen["gpu"], seen["cpu"], tol, name=f"{name} on cuda vs cpu")
            if fail:
                return fail
        return None


class MultiHeadAttentionOnCuda(OnCuda):
    """MultiHeadAttention(causal=True) with a pad_mask, moved with .to('cuda'), in eval and train."""

    id = "multi_head_attention"
    weight = 3

    def inputs(self, rng):
        return {"states": weights(rng), "query": randn(rng, 2, 5, 12),
                "pad_mask": torch.tensor([[False] * 5, [False, False, False, True, True]])}

    def observe(self, mha, states, query, pad_mask):
        def run(query, pad_mask, device):
            module = build(mha, states, dropout=0.1, causal=True).to(device)
            out = module(query, pad_mask=pad_mask)
            module.train()
            trained = module(query, pad_mask=pad_mask)
            trained.sum().backward()
            grad = module.w_q.weight.grad
            return {"eval": out, "train_device": torch.zeros(1, device=trained.device),
                    "grad_device": torch.zeros(1, device=grad.device)}
        return on_both(run, query, pad_mask)


class ModulesOnCuda(OnCuda):
    """TokenEmbedding and OutputProjection on cuda."""

    id = "modules"

    def inputs(self, rng):
        return {"ids": randint(rng, 1, 11, 2, 6), "heads": randn(rng, 2, 3, 5, 4),
                "state": linear_state(rng, 12, 12)}

    def observe(self, mha, ids, heads, state):
        torch.manual_seed(0)
        embedding = mha.embedding.TokenEmbedding(11, 6).double()
        projection = mha.output.OutputProjection(12).double()
        load_linear(projection, "w_o", state)

        def run(ids, heads, device):
            return {"embedding": embedding.to(device)(ids), "output_projection": projection.to(device)(heads)}
        return on_both(run, ids, heads)


class MasksOnCuda(OnCuda):
    """causal_mask(L, device='cuda'), padding_mask of cuda ids, attention with a cuda mask."""

    id = "masks_and_attention"

    def inputs(self, rng):
        return {"ids": torch.tensor([[3, 1, 4, 0], [5, 0, 0, 0]]), "q": randn(rng, 2, 3, 4, 8),
                "k": randn(rng, 2, 3, 4, 8), "v": randn(rng, 2, 3, 4, 5)}

    def observe(self, mha, ids, q, k, v):
        def run(ids, q, k, v, device):
            mask = mha.masking.padding_mask(ids) | mha.masking.causal_mask(4, device=device)
            out, weights = mha.attention.scaled_dot_product_attention(q, k, v, mask=mask)
            return {"mask": mask, "out": out, "weights": weights}
        return on_both(run, ids, q, k, v)
