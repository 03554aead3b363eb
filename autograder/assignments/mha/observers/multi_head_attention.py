"""Observers of step `multi_head_attention`: the student's whole MultiHeadAttention module, with
the grader's weights loaded into its projections wherever and however it keeps them."""

import weakref

import torch
import torch.nn as nn

from autograder.assignments.mha.observers._projections import PROJECTIONS, find_projections, load_projections
from autograder.harness import earlier
from autograder.harness.contract import ContractError
from autograder.harness.earlier import WRITTEN_OUT, Earlier  # noqa: F401 - WRITTEN_OUT: the checks read it here

LAYERS = PROJECTIONS  # the four projections, by role
_roles = weakref.WeakKeyDictionary()  # module -> {role: Slot}, for the gradient observers


def build(mha, states, num_heads=3, dropout=0.0, bias=True, causal=False):
    """The student's MultiHeadAttention in float64 and eval(), with the grader's weights loaded
    into its projections (found by what they do: _projections.find_projections)."""
    d_model = states["w_q"]["weight"].shape[0]
    module = mha.mha.MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias, causal=causal)
    module = module.double().eval()
    roles = find_projections(module, d_model, key=(num_heads, dropout, bias, causal))
    load_projections(module, roles, states)
    _roles[module] = roles
    return module


def gradient_sizes(module, *inputs):
    """{role: total |gradient| of its weight rows (None: no gradient)} after one backward,
    "shared": [(role, role that uses the same weights, where)] and "where": {role: its layer}."""
    module(*inputs).pow(2).sum().backward()
    roles = _roles[module]
    d_model = roles["w_o"].layer(module).weight.shape[1]
    sizes = {}
    for role in LAYERS:
        grad = roles[role].layer(module).weight.grad
        sizes[role] = None if grad is None else grad[roles[role].block * d_model :][:d_model].abs().sum().item()
    sizes["shared"] = [
        (role, other, describe_slot(roles[role]))
        for i, role in enumerate(LAYERS)
        for other in LAYERS[:i]
        if roles[other] == roles[role]
    ]
    sizes["where"] = {role: describe_slot(roles[role]) for role in LAYERS}
    return sizes


def describe_slot(slot):
    """'w_q', or 'qkv.c_attn block 2' for the second d_model rows of a fused layer."""
    return f"{slot.path} block {slot.block + 1}" if slot.block else slot.path


# ---------------------------------------------------------------------------- earlier steps' functions
#
# The module may call functions graded in earlier steps. When one of them is wrong, the module's
# output is wrong too, but the mistake is that step's: a run whose values may be wrong is made
# once more with those functions written out (below) in place of the student's
# (harness/earlier.py), and the judge decides what the two runs mean (engine/earlier.py).
# Each written-out function is self-contained (its imports inside): its code stands in for the
# student's function, in the student's module.


def split_by_hand(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, L, num_heads, D // num_heads).transpose(1, 2)


def merge_by_hand(x):
    B, H, L, d_k = x.shape
    return x.transpose(1, 2).reshape(B, L, H * d_k)


def attention_by_hand(q, k, v, mask=None):
    import torch

    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def causal_mask_by_hand(seq_len, device=None):
    import torch

    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)


def padding_mask_by_hand(ids, pad_id=0):
    return (ids == pad_id)[:, None, None, :]


def _probe_tokens():
    return torch.arange(2 * 3 * 6, dtype=torch.float64).reshape(2, 3, 6)  # (B, L, D), H = 2


def _probe_heads():
    """(B, H, L, d_k) heads laid out as attention gives them (weights @ v is contiguous), and as
    split_by_hand gives them (a transposed view)."""
    heads = split_by_hand(_probe_tokens(), 2)
    return [heads.contiguous(), heads]


def _probe_attention():
    """(q, k, v) of all different sizes, and a mask with padding (one sequence all padding) and
    the causal future blocked: B=3, H=2, Lq=5, Lk=7, d_k=4, d_v=6."""
    rng = torch.Generator().manual_seed(2026)
    q, k, v = (torch.randn(3, 2, n, d, generator=rng, dtype=torch.float64) for n, d in ((5, 4), (7, 4), (7, 6)))
    padding = torch.arange(7)[None, :] >= torch.tensor([7, 4, 0])[:, None]  # (B, Lk)
    mask = padding[:, None, None, :] | torch.ones(5, 7, dtype=torch.bool).triu(1)  # (B, 1, Lq, Lk)
    return q, k, v, mask


def _attention_calls():
    q, k, v, mask = _probe_attention()
    return [((q, k, v), {}), ((q, k, v), {"mask": mask})]


def _attention_care(args, kwargs):
    """Rows with every key blocked: any finite result (the contract fixes only that)."""
    mask = kwargs.get("mask")
    return None if mask is None else ~mask.all(-1, keepdim=True)  # (B, 1, Lq, 1)


EARLIER = [
    Earlier("split_heads", "heads", "split_heads", split_by_hand, lambda: [((_probe_tokens(), 2), {})]),
    Earlier("split_heads", "heads", "merge_heads", merge_by_hand, lambda: [((heads,), {}) for heads in _probe_heads()]),
    Earlier(
        "attention", "attention", "scaled_dot_product_attention", attention_by_hand, _attention_calls, _attention_care
    ),
    Earlier("masking", "masking", "causal_mask", causal_mask_by_hand, lambda: [((5,), {}), ((1,), {})]),
    Earlier(
        "masking",
        "masking",
        "padding_mask",
        padding_mask_by_hand,
        lambda: [((torch.tensor([[5, 7, 9, 0, 0], [4, 0, 0, 0, 0]]),), {})],
    ),
]


def with_earlier_steps(mha, run):
    """run() (the module's observations), and, where an earlier step's function is wrong, the run
    with them written out (harness.earlier.with_earlier_steps)."""
    return earlier.with_earlier_steps(mha, EARLIER, run)


# ---------------------------------------------------------------------------- observers


def outputs(mha, states, query, key=None, value=None, pad_mask=None, bias=True, causal=False):
    """{"out"}: the module on (query, key, value, pad_mask), with earlier steps written out too."""

    def run():
        module = build(mha, states, bias=bias, causal=causal)
        return {"out": module(query, key, value, pad_mask=pad_mask)}

    return with_earlier_steps(mha, run)


def padded_outputs(mha, states, query, pad_mask):
    """{"out"}: self-attention with a pad_mask, with earlier steps written out too."""
    return with_earlier_steps(mha, lambda: {"out": build(mha, states)(query, pad_mask=pad_mask)})


def dropout(mha, states, query, key, value, num_heads, p):
    """{"p", "eval": two outputs after eval(), "train": three after train() (seeded)}, with earlier
    steps written out too."""

    def run():
        module = build(mha, states, num_heads=num_heads, dropout=p)
        layer = getattr(module, "dropout", None)
        if not isinstance(layer, nn.Dropout):
            raise ContractError(
                "missing_attribute", owner="MultiHeadAttention", name="dropout", expected="an nn.Dropout"
            )
        eval_out = [module(query, key, value).detach() for _ in range(2)]
        module.train()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # the same masks every run: a diagnosis sees what the grade saw
            train_out = [module(query, key, value).detach() for _ in range(3)]
        return {"p": layer.p, "eval": eval_out, "train": train_out}

    return with_earlier_steps(mha, run)


def gradients(mha, states, query, key=None):
    """gradient_sizes of the module after a backward (self- or cross-attention)."""
    return gradient_sizes(build(mha, states), query, *(() if key is None else (key, key)))


def one_query_changed(mha, states, query, changed, key):
    """{"before", "after"}: cross-attention before and after one query token changed."""
    module = build(mha, states)
    return {"before": module(query, key, key).detach(), "after": module(changed, key, key).detach()}


def repeated_in_eval(mha, states, query, p):
    """{"outputs"}: three calls of a module made with dropout p, after eval()."""
    module = build(mha, states, dropout=p)
    return {"outputs": [module(query).detach() for _ in range(3)]}


# ### BEGIN HIDDEN CHECKS (observers only hidden checks use: left out of a student release)


def configurations(mha, states, num_heads, query, key, pad_mask):
    """{"self", "cross", "causal_cross"} at random sizes, with earlier steps written out too."""

    def run():
        full = build(mha, states, num_heads=num_heads)
        causal = build(mha, states, num_heads=num_heads, causal=True)
        return {
            "self": full(query),
            "cross": full(query, key, key, pad_mask=pad_mask),
            "causal_cross": causal(query, key, key, pad_mask=pad_mask),
        }

    return with_earlier_steps(mha, run)
