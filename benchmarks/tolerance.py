"""How far float32-style correct code and the smallest real mistakes land from the float64 truth.

Prints, for each implementation, the largest ratio  |got - expected| / (eps32 * (|expected| + max|expected|))
over the inputs of the attention and multi-head checks (the public sizes and hidden random sizes, many
seeds): the quantity the float32 tier of the tolerance bounds (docs/how-grading-works.md, "Tolerance"). Correct code must
stay far below the bound, mistakes far above it.

    python benchmarks/tolerance.py [seeds]
"""

import math
import sys

import torch
import torch.nn.functional as F

EPS32 = torch.finfo(torch.float32).eps


def ratio(got, expected):
    scale = expected.abs().max()
    return ((got - expected).abs() / (EPS32 * (expected.abs() + scale))).max().item()


def attention(q, k, v, mask=None, scale=None, softmax_dtype=None, work_dtype=None, causal_shift=0, fill=None):
    dtype = q.dtype
    if work_dtype is not None:
        q, k, v = q.to(work_dtype), k.to(work_dtype), v.to(work_dtype)
    d_k = q.size(-1)
    scale = math.sqrt(d_k) if scale is None else scale(d_k, q)
    scores = q @ k.transpose(-2, -1) / scale
    if mask is not None:
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min if fill is None else fill)
    if softmax_dtype is not None:
        weights = torch.softmax(scores, dim=-1, dtype=softmax_dtype).to(scores.dtype)
    else:
        weights = torch.softmax(scores, dim=-1)
    return (weights @ v).to(dtype), weights.to(dtype)


CORRECT = {
    "float32 softmax": {"softmax_dtype": torch.float32},
    "float32 scale tensor": {"scale": lambda d, q: torch.sqrt(torch.tensor([float(d)], dtype=torch.float32))},
    "float32 everywhere, cast back": {"work_dtype": torch.float32},
    "float32 everywhere, fill -1e4": {"work_dtype": torch.float32, "fill": -1e4},
}
MISTAKES = {
    "scale sqrt(d_k + 1)": {"scale": lambda d, q: math.sqrt(d + 1)},
    "scale sqrt(d_k - 1) (d_k + 2 when d_k = 2)": {"scale": lambda d, q: math.sqrt(d - 1 if d > 2 else d + 2)},
    "scale d_k ** 0.49": {"scale": lambda d, q: d**0.49},
}


def shapes(rng, hidden):
    if not hidden:
        return (2, 3), 5, 7, 4, 6

    def r(lo, hi):
        return int(torch.randint(lo, hi, (), generator=rng))

    return (r(2, 4), r(2, 5)), r(2, 9), r(2, 9), r(2, 17), r(2, 9)


def causal(lq, lk, shift=0):
    return torch.tensor([[j > i + shift for j in range(lk)] for i in range(lq)])


def main(seeds=300):
    worst = {}
    for seed in range(seeds):
        rng = torch.Generator().manual_seed(seed)
        for hidden in (False, True):
            lead, lq, lk, d_k, d_v = shapes(rng, hidden)
            q = torch.randn(*lead, lq, d_k, generator=rng, dtype=torch.float64)
            k = torch.randn(*lead, lk, d_k, generator=rng, dtype=torch.float64)
            v = torch.randn(*lead, lk, d_v, generator=rng, dtype=torch.float64)
            mask = causal(lq, lk)
            truth = attention(q, k, v, mask)
            cases = {
                **{f"ok: {n}": dict(c) for n, c in CORRECT.items()},
                **{f"WRONG: {n}": dict(c) for n, c in MISTAKES.items()},
            }
            cases["WRONG: causal mask off by one (diagonal blocked)"] = {"causal_shift": -1}
            cases["WRONG: causal mask off by one (one future key seen)"] = {"causal_shift": 1}
            for name, kwargs in cases.items():
                shift = kwargs.pop("causal_shift", 0)
                got = attention(q, k, v, causal(lq, lk, shift), **kwargs)
                r = max(ratio(g, t) for g, t in zip(got, truth, strict=True))
                low, high = worst.get(name, (math.inf, 0.0))
                worst[name] = (min(low, r), max(high, r))
            free = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask)
            low, high = worst.get("ok: F.sdpa (float64)", (math.inf, 0.0))
            r = ratio(free, truth[0])
            worst["ok: F.sdpa (float64)"] = (min(low, r), max(high, r))
    print(f"{'implementation':55s} {'smallest':>12s} {'largest':>12s}   ratio = |diff| / (eps32 (|e| + max|e|))")
    for name, (low, high) in worst.items():
        print(f"{name:55s} {low:12.3g} {high:12.3g}")


def mha_case(seeds=100):
    """The whole module computed in float32 (weights and activations), cast back, vs float64."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "solutions"))
    from mha.mha import MultiHeadAttention  # the reference

    high, low_mistake = 0.0, math.inf
    for seed in range(seeds):
        rng = torch.Generator().manual_seed(seed)
        heads, d_k, B, lq = (
            int(torch.randint(lo, hi, (), generator=rng)) for lo, hi in ((2, 5), (2, 6), (2, 4), (2, 7))
        )  # the hidden check's ranges
        D = heads * d_k
        module = MultiHeadAttention(D, heads, causal=True).double().eval()
        for p in module.parameters():
            p.data = torch.randn(p.shape, generator=rng, dtype=torch.float64) / math.sqrt(D)
        x = torch.randn(B, lq, D, generator=rng, dtype=torch.float64)
        truth = module(x)
        low = MultiHeadAttention(D, heads, causal=True).eval()
        low.load_state_dict({k: v.float() for k, v in module.state_dict().items()})
        high = max(high, ratio(low(x.float()).double(), truth))
        module.causal = False  # a real mistake: the causal flag ignored
        low_mistake = min(low_mistake, ratio(module(x), truth))
    print(f"{'ok: MultiHeadAttention all float32 (hidden sizes)':55s} {'':12s} {high:12.3g}")
    print(f"{'WRONG: MultiHeadAttention causal ignored':55s} {low_mistake:12.3g}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
    mha_case()
