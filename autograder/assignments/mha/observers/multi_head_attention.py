"""Observers of step `multi_head_attention`: the student's whole MultiHeadAttention module, with
the grader's weights loaded into its projections wherever and however it keeps them."""

import weakref
from contextlib import contextmanager

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from autograder.assignments.mha.observers._projections import PROJECTIONS, find_projections, load_projections
from autograder.harness import earlier
from autograder.harness.earlier import WRITTEN_OUT, Earlier  # noqa: F401 - WRITTEN_OUT: the checks read it here
from autograder.harness.kept import kept
from autograder.harness.trace import tracing

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
    "shared": [(role, role that uses the same weights, where)], "where": {role: its place} and
    "parameters": {role: its weight parameter}."""
    module(*inputs).pow(2).sum().backward()
    roles = _roles[module]
    d_model = roles["w_o"].parameter(module).shape[1]
    sizes = {}
    for role in LAYERS:
        sizes[role] = roles[role].gradient_size(module, d_model)
    sizes["shared"] = [
        (role, other, roles[role].describe())
        for i, role in enumerate(LAYERS)
        for other in LAYERS[:i]
        if roles[other].places() & roles[role].places()
    ]
    sizes["where"] = {role: roles[role].describe() for role in LAYERS}
    sizes["parameters"] = {role: roles[role].weight_name() for role in LAYERS}
    return sizes


# ---------------------------------------------------------------------------- dropout, by what it does


class _Dropouts(TorchFunctionMode):
    """Records every dropout forward applies (F.dropout, torch.dropout, an nn.Dropout of any
    name): where (the nn.Dropout's path, or the function), its p, whether it was on, and how many
    numbers it was applied to."""

    def __init__(self, inside):
        super().__init__()
        self.calls, self.inside = [], inside

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        output = func(*args, **kwargs)
        arguments = DROPOUT_ARGUMENTS.get(func)
        if arguments is not None:
            named = dict(zip(arguments, args, strict=False))
            named.update(kwargs)
            x, p, on = named.get("input"), named.get("p", 0.5), named.get(arguments[2], True)
            where = self.inside[-1] if self.inside else DROPOUT_NAMES[func]
            if isinstance(x, torch.Tensor) and isinstance(p, (int, float)) and isinstance(on, (bool, int)):
                self.calls.append({"where": where, "p": float(p), "on": bool(on), "size": x.numel()})
        return output


DROPOUT_ARGUMENTS = {  # function -> the names of its first three arguments
    F.dropout: ("input", "p", "training"),
    torch.dropout: ("input", "p", "train"),
    torch.dropout_: ("input", "p", "train"),
}
DROPOUT_NAMES = {F.dropout: "F.dropout()", torch.dropout: "torch.dropout()", torch.dropout_: "torch.dropout_()"}


@contextmanager
def dropouts(module):
    """Yields the list of dropout calls (_Dropouts) that forward makes inside the block."""
    inside, handles = [], []

    def enter(path):
        return lambda layer, args: inside.append(path or type(layer).__name__)

    def leave(layer, args, output):
        inside.pop()

    try:
        for path, layer in module.named_modules():
            if isinstance(layer, nn.modules.dropout._DropoutNd):
                handles.append(layer.register_forward_pre_hook(enter(path)))
                handles.append(layer.register_forward_hook(leave))
        mode = _Dropouts(inside)
        with mode:
            yield mode.calls
    finally:
        for handle in handles:
            handle.remove()


def attention_dropout(calls, size):
    """{"p", "where"} of the dropout that acted on `size` numbers (the attention weights), else of
    the first that acted at all; {"p": None} where none did."""
    on = [call for call in calls if call["on"]]
    chosen = next((call for call in on if call["size"] == size), on[0] if on else None)
    return {"p": None, "where": None} if chosen is None else {"p": chosen["p"], "where": chosen["where"]}


# ---------------------------------------------------------------------------- earlier steps' functions
#
# The module may call functions graded in earlier steps. When one of them is wrong, the module's
# output is wrong too, but the mistake is that step's (harness/earlier.py): each is tried on a
# probe below, and where it is wrong the instructor's kit runs the module once more with it
# written out (autograder/assignments/mha/written_out.py, never in a student release), and the
# judge decides what the two runs mean (engine/checks/earlier.py).


def _probe_tokens():
    return torch.arange(2 * 3 * 6, dtype=torch.float64).reshape(2, 3, 6)  # (B, L, D), H = 2


def _probe_heads():
    """(B, H, L, d_k) heads laid out as attention gives them (weights @ v is contiguous), and as a
    transposed view of (B, L, H, d_k)."""
    heads = torch.arange(2 * 3 * 6, dtype=torch.float64).reshape(2, 3, 2, 3).transpose(1, 2)  # (B, H, L, d_k)
    return [heads.contiguous(), heads]


def _probe_attention():
    """(q, k, v) of all different sizes, and a mask with padding (one sequence all padding) and
    the causal future blocked: B=3, H=2, Lq=5, Lk=7, d_k=5, d_v=6 (d_k no square: no scale made
    of other sizes, d_k / 2 or the head count, equals sqrt(d_k) on the probe)."""
    rng = torch.Generator().manual_seed(2026)
    q, k, v = (torch.randn(3, 2, n, d, generator=rng, dtype=torch.float64) for n, d in ((5, 5), (7, 5), (7, 6)))
    padding = torch.arange(7)[None, :] >= torch.tensor([7, 4, 0])[:, None]  # (B, Lk)
    mask = padding[:, None, None, :] | torch.ones(5, 7, dtype=torch.bool).triu(1)  # (B, 1, Lq, Lk)
    return (q, k, v, mask)  # (B, H, Lq, d_k), (B, H, Lk, d_k), (B, H, Lk, d_v), (B, 1, Lq, Lk)


def _attention_calls():
    q, k, v, mask = _probe_attention()
    return [((q, k, v), {}), ((q, k, v), {"mask": mask})]


def _attention_care(args, kwargs):
    """Rows with every key blocked: any finite result (the contract fixes only that)."""
    mask = kwargs.get("mask")
    return None if mask is None else ~mask.all(-1, keepdim=True)  # (B, 1, Lq, 1)


EARLIER = earlier.Table(
    "mha",
    ("mha.py",),
    [
        Earlier("split_heads", "heads", "split_heads", lambda: [((_probe_tokens(), 2), {})]),
        Earlier("split_heads", "heads", "merge_heads", lambda: [((heads,), {}) for heads in _probe_heads()]),
        Earlier("attention", "attention", "scaled_dot_product_attention", _attention_calls, _attention_care),
        Earlier("masking", "masking", "causal_mask", lambda: [((5,), {}), ((1,), {})]),
        Earlier(
            "masking", "masking", "padding_mask", lambda: [((torch.tensor([[5, 7, 9, 0, 0], [4, 0, 0, 0, 0]]),), {})]
        ),
    ],
)


def with_earlier_steps(mha, run):
    """run() (the module's observations), and, where an earlier step's function is wrong, what
    the judge needs to charge it once (harness.earlier.with_earlier_steps)."""
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
    """{"p", "where": the attention dropout found by what forward does (_Dropouts; p None where
    no dropout acted), "eval": two outputs after eval(), "train": three after train() (seeded)},
    with earlier steps written out too."""
    size = query.shape[0] * num_heads * query.shape[1] * key.shape[1]  # the weights (B, H, Lq, Lk)

    def run():
        module = build(mha, states, num_heads=num_heads, dropout=p)
        eval_out = [kept(module(query, key, value)) for _ in range(2)]
        module.train()
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(0)  # the same masks every run (the CPU's: fork_rng's devices)
            with dropouts(module) as calls:
                train_out = [kept(module(query, key, value))]
            train_out += [kept(module(query, key, value)) for _ in range(2)]
        return {**attention_dropout(calls, size), "eval": eval_out, "train": train_out}

    return with_earlier_steps(mha, run)


def gradients(mha, states, query, key=None):
    """gradient_sizes of the module after a backward (self- or cross-attention), with earlier
    steps written out too."""
    return with_earlier_steps(
        mha, lambda: gradient_sizes(build(mha, states), query, *(() if key is None else (key, key)))
    )


def one_query_changed(mha, states, query, changed, key):
    """{"before", "after"}: cross-attention before and after one query token changed."""
    module = build(mha, states)
    before = kept(module(query, key, key))  # a copy: the next call may write where it points
    return {"before": before, "after": kept(module(changed, key, key))}


def repeated_in_eval(mha, states, query, p):
    """{"outputs"}: three calls of a module made with dropout p, after eval()."""
    module = build(mha, states, dropout=p)
    return {"outputs": [kept(module(query)) for _ in range(3)]}


# ---------------------------------------------------------------------------- localisation


def traced(mha, states, query, key, value, pad_mask, causal, p=0.0, num_heads=3):
    """{"calls": [what the recorder saw in one forward], "outputs": [its output]}: the module on a
    localisation probe's inputs (in train() where p > 0, seeded), every value it computes
    recorded (harness/trace.py), with earlier steps written out too."""

    def run():
        module = build(mha, states, num_heads=num_heads, dropout=p, causal=causal)
        if p:
            module.train()
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.default_generator.manual_seed(0)  # the CPU's alone: fork_rng keeps no other
            with tracing(mha) as trace:
                out = module(query, key, value, pad_mask=pad_mask)
        outputs = [out.detach()] if trace.raised is None and isinstance(out, torch.Tensor) else []
        return {"calls": [trace.report()], "outputs": outputs}

    return with_earlier_steps(mha, run)


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
