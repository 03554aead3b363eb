"""Warm-up of the multi-head attention assignment: the ops its checks and typical solutions use,
run once in the worker server so that each worker (a fork of it) pays no first-call costs."""

import math

import torch


def _exercise(x, mask, ids, table, linear):
    """Run the ops attention code typically uses, so that their first-call costs are paid once
    in the fork server (this is op coverage, not a solution)."""
    q = linear(x).view(2, 4, 2, 4).transpose(1, 2)  # (B, H, L, d_k)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, q) / 2.0 + q @ q.transpose(-2, -1)
    scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min).softmax(dim=-1)
    out = torch.nn.functional.dropout(scores, 0.1, training=True) @ q
    out = out.transpose(1, 2).contiguous().view(2, 4, 8).reshape(2, 4, 8)
    parts = torch.cat(out.split(4, dim=-1), dim=-1).chunk(2, dim=-1)
    torch.stack(parts, dim=1).sum()
    torch.nn.functional.embedding(ids, table, padding_idx=0)
    (
        torch.ones(4, 4, dtype=torch.bool, device=x.device).triu(1)
        | torch.zeros(4, 4, dtype=torch.bool, device=x.device).tril()
    )
    (ids == 0)[:, None, None, :]
    torch.where(mask, torch.full_like(scores, -1e9), scores).amax(-1, keepdim=True).exp()


def warm_up(simulation=None, real_gpu=False):
    """Run in the worker server once (autograder/harness/serve.py), so every worker starts warm:
    the ops of this assignment on the CPU and, given the simulated CUDA device, on it."""
    linear = torch.nn.Linear(8, 8).double()
    args = (
        torch.randn(2, 4, 8, dtype=torch.float64),
        torch.ones(4, 4, dtype=torch.bool).triu(1),
        torch.tensor([[1, 2, 0, 0]]),
        torch.randn(5, 3, dtype=torch.float64),
    )
    _exercise(*args, linear)
    # masks made on the 'meta' device (the causal_mask_device check): its first triu imports
    # torch._dynamo, seconds, and that import makes a cache folder, which a worker may not
    torch.ones(4, 4, dtype=torch.bool, device="meta").triu(1)
    if not real_gpu:  # a backward starts the autograd engine's device threads: no CUDA before a fork
        linear(args[0]).sum().backward()
    if simulation is not None:
        fake_linear = simulation.module(torch.nn.Linear(8, 8).double())
        fake_args = [simulation.tensor(a) for a in args]
        with simulation:
            _exercise(*fake_args, fake_linear)
        _warm_fake_shapes(simulation)


def _warm_fake_shapes(simulation):
    """Fake-tensor dispatch results are cached per op and argument shapes, for the whole process
    (and so for its forks): run common ops once on the shapes the cuda checks use."""
    query = simulation.tensor(torch.randn(2, 5, 12, dtype=torch.float64))
    pad = simulation.tensor(torch.tensor([[False] * 5, [False, False, False, True, True]]))
    layer = simulation.module(torch.nn.Linear(12, 12).double())
    heads = simulation.tensor(torch.randn(2, 3, 5, 4, dtype=torch.float64))
    q4 = simulation.tensor(torch.randn(2, 3, 4, 8, dtype=torch.float64))
    v4 = simulation.tensor(torch.randn(2, 3, 4, 5, dtype=torch.float64))
    ids = simulation.tensor(torch.tensor([[3, 1, 4, 0], [5, 0, 0, 0]]))
    table = simulation.module(torch.nn.Embedding(11, 6, padding_idx=0).double())
    with simulation:
        for x, lq in ((query, 5),):
            h = layer(x).view(2, lq, 3, 4).transpose(1, 2)  # (B, H, L, d_k)
            blocked = torch.zeros(lq, lq, dtype=torch.bool, device=x.device)
            blocked = torch.ones_like(blocked).triu(diagonal=1) | pad[:, None, None, :]
            scores = (h @ h.transpose(-2, -1) / 2.0).masked_fill(blocked, -1e9)
            weights = torch.nn.functional.dropout(torch.softmax(scores, dim=-1), 0.1, training=True)
            layer((weights @ h).transpose(1, 2).contiguous().view(2, lq, 12))
        layer(heads.transpose(1, 2).contiguous().view(2, 5, 12))
        mask = (ids == 0)[:, None, None, :] | torch.ones(4, 4, dtype=torch.bool, device=ids.device).triu(1)
        scores = (q4 @ q4.transpose(-2, -1) / 2.0).masked_fill(mask, -1e9).softmax(-1) @ v4
        table(simulation.tensor(torch.tensor([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 1, 2]])))
        # Scalar arguments are part of the cache key: the usual fill values and 1/sqrt(d_k) scales.
        causal = torch.ones(4, 4, dtype=torch.bool, device=simulation.device).triu(1)  # device as a student passes it
        for scores, masks, d_k in (
            (h @ h.transpose(-2, -1), (blocked,), 4),
            (q4 @ q4.transpose(-2, -1), (mask, causal), 8),
        ):
            for fill in (float("-inf"), -1e9, torch.finfo(torch.float64).min):
                for blocked_keys in masks:
                    scores.masked_fill(blocked_keys, fill)
            scores / math.sqrt(d_k), scores * (1 / math.sqrt(d_k)), scores * d_k**-0.5
