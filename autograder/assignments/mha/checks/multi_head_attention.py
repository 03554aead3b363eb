"""Checks for step `multi_head_attention`: mha/mha.py, MultiHeadAttention.

Oracle: torch.nn.MultiheadAttention with the same weights (its in_proj_weight is
cat([w_q, w_k, w_v]); out_proj is w_o). This is the integration step: it runs the student's
whole module, so a mistake in an earlier step may show here too, by design.

Over 400 lines: the integration step's checks each need the module built, loaded with the
grader's weights and run; they share those helpers here, in the step's one folder.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.assignments.mha.observers import multi_head_attention as observers
from autograder.assignments.mha.observers.multi_head_attention import LAYERS, WRITTEN_OUT
from autograder.engine.checks import earlier
from autograder.engine.checks.check import (
    Check,
    Fail,
    check_form,
    compare,
    compare_tensor,
    first_index,
    linear_state,
    randn,
    randsize,
)

from ._shared import causal_by_hand

FILES = ["mha.py"]  # what the step grades (scanned for forbidden calls)
INTEGRATES = True  # runs the whole module: a mistake of an earlier step may cost points here too

D, H = 12, 3  # d_k = 4; Lq = 5 and Lk = 7 below: all sizes different, d_model not a square


def weights(rng, d_model=D, bias=True):
    return {name: linear_state(rng, d_model, d_model, bias) for name in LAYERS}


def oracle(states, query, key, value, num_heads=H, bias=True, causal=False, pad_mask=None):
    """nn.MultiheadAttention with the same weights (rows whose keys are all blocked give NaN)."""
    d_model = query.shape[-1]
    reference = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True).double().eval()
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([states[n]["weight"] for n in LAYERS[:3]]))
        reference.out_proj.weight.copy_(states["w_o"]["weight"])
        if bias:
            reference.in_proj_bias.copy_(torch.cat([states[n]["bias"] for n in LAYERS[:3]]))
            reference.out_proj.bias.copy_(states["w_o"]["bias"])
        # Padding and causal masks go in as one (B*H, Lq, Lk) attn_mask: the same semantics as
        # key_padding_mask, without the 0.6 s of imports its input check costs on first use.
        B, lq, lk = query.shape[0], query.shape[1], key.shape[1]
        blocked = torch.zeros(B, 1, lq, lk, dtype=torch.bool)
        if causal:
            blocked = blocked | causal_by_hand(lq, lk)
        if pad_mask is not None:
            blocked = blocked | pad_mask[:, None, None, :]
        attn_mask = blocked.expand(B, num_heads, lq, lk).reshape(B * num_heads, lq, lk)
        out, _ = reference(query, key, value, attn_mask=attn_mask, need_weights=False)
    return {"out": out}


# ---------------------------------------------------------------------------- earlier steps' functions
#
# The module may call functions graded in earlier steps (heads, attention, masks). When one of them
# is wrong, the module's output is wrong too, but the mistake is that step's. A check whose values
# are wrong therefore also gets the module's run with those functions written out
# (observers.with_earlier_steps), and passes when that run is right and the judge itself finds
# one of those functions wrong on the probe (engine/checks/earlier.py).


def judge_with_earlier_steps(got, judge_own, tol=None):
    """judge_own(observations) on the module's own run; where it fails (or the run raised) and the
    run with the earlier steps' wrong functions written out passes, the module is right: the
    mistake is charged in that earlier step alone (issue 22: one mistake, one charge)."""
    return earlier.judge_with_earlier_steps(got, judge_own, observers.EARLIER, tol or DEFAULT_TOL)


DEFAULT_TOL = {torch.float64: (1e-7, 1e-9), torch.float32: (1e-4, 1e-5)}  # grading.yml's defaults


class AgainstTorch(Check):
    """Helper: the student's module and nn.MultiheadAttention on the same inputs."""

    causal = False
    bias = True
    cross = False
    pad_lengths = None
    weight = 2
    observer = observers.outputs

    @property
    def arguments(self):
        return {"bias": self.bias, "causal": self.causal}

    def inputs(self, rng):
        query = randn(rng, 2, 5, D)
        inputs = {"states": weights(rng, bias=self.bias), "query": query, "key": None, "value": None, "pad_mask": None}
        if self.cross:
            inputs["key"], inputs["value"] = randn(rng, 2, 7, D), randn(rng, 2, 7, D)
        if self.pad_lengths:
            length = 7 if self.cross else 5
            inputs["pad_mask"] = torch.tensor([[j >= n for j in range(length)] for n in self.pad_lengths])
        return inputs

    def judge(self, inputs, got, expected, tol):
        return judge_with_earlier_steps(got, lambda own: compare(own, expected, tol), tol)

    def expected(self, states, query, key, value, pad_mask):
        key = query if key is None else key
        value = query if value is None else value
        return oracle(states, query, key, value, bias=self.bias, causal=self.causal, pad_mask=pad_mask)


class SelfAttention(AgainstTorch):
    """Self-attention (key = value = query) matches nn.MultiheadAttention."""

    id = "self_attention"
    weight = 3


class CrossAttention(AgainstTorch):
    """Cross-attention, Lq = 5 queries over Lk = 7 keys, matches nn.MultiheadAttention."""

    id = "cross_attention"
    cross = True


class PadMask(AgainstTorch):
    """pad_mask (B, Lk), True at padding keys: padding keys are ignored."""

    id = "pad_mask"
    cross = True
    pad_lengths = (7, 4)


class Causal(AgainstTorch):
    """causal=True: query i sees keys 0..i only."""

    id = "causal"
    causal = True


class CausalCross(AgainstTorch):
    """causal=True with Lq != Lk: top-left aligned, query i sees keys 0..i."""

    id = "causal_cross"
    causal = True
    cross = True
    weight = 1


class CausalWithPadding(AgainstTorch):
    """causal=True together with a pad_mask."""

    id = "causal_with_padding"
    causal = True
    pad_lengths = (5, 3)


class NoBias(AgainstTorch):
    """bias=False: no bias anywhere, still matches nn.MultiheadAttention(bias=False)."""

    id = "no_bias"
    bias = False
    weight = 1


class AllPaddingRowFinite(Check):
    """A sequence that is all padding gives finite outputs (no NaN), the others stay right."""

    id = "all_padding_finite"
    observer = observers.padded_outputs

    def inputs(self, rng):
        return {
            "states": weights(rng),
            "query": randn(rng, 2, 5, D),
            "pad_mask": torch.tensor([[False, False, False, True, True], [True] * 5]),
        }

    def expected(self, states, query, pad_mask):
        return oracle(states, query, query, query, pad_mask=pad_mask)

    def judge(self, inputs, got, expected, tol):
        return judge_with_earlier_steps(got, lambda own: self.judge_own(inputs, own, expected, tol), tol)

    def judge_own(self, inputs, got, expected, tol):
        has_keys = ~inputs["pad_mask"].all(-1)[:, None, None]  # (B, 1, 1): all-padding rows are unspecified
        fail = compare_tensor(got["out"], expected["out"], tol, name="out", where=has_keys)
        if fail:
            return fail
        if not torch.isfinite(got["out"]).all():
            index = first_index(~torch.isfinite(got["out"]))
            return Fail("row_not_finite", {"name": "out", "got": got["out"][index].item(), "index": index})
        return None


class Dropout(Check):
    """Dropout with the module's p (an nn.Dropout of any name, or F.dropout(training=
    self.training): found by what forward does): off after eval() (= no dropout), active in
    train(), on the attention WEIGHTS: each output is then sum_j c_j v_j with every c_j either 0
    or weight_j / (1 - p). (w_v and w_o are the identity here and d_k > Lk, so the c_j can be
    read back from the output; dropout on the output instead zeroes entries that no such sum
    gives. Dropout written by hand, with no dropout call to see, is judged by that alone.)"""

    id = "dropout"
    D, H, LQ, LK = 16, 2, 4, 5  # d_k = 8 > Lk
    observer = observers.dropout
    arguments = {"num_heads": H, "p": 0.5}

    def inputs(self, rng):
        eye = {"weight": torch.eye(self.D, dtype=torch.float64), "bias": torch.zeros(self.D, dtype=torch.float64)}
        states = {
            "w_q": linear_state(rng, self.D, self.D),
            "w_k": linear_state(rng, self.D, self.D),
            "w_v": eye,
            "w_o": {name: value.clone() for name, value in eye.items()},
        }
        return {
            "states": states,
            "query": randn(rng, 2, self.LQ, self.D),
            "key": randn(rng, 2, self.LK, self.D),
            "value": randn(rng, 2, self.LK, self.D),
        }

    def expected(self, states, query, key, value):
        """The output in eval(), and the attention weights that dropout must act on in train()."""
        return {
            **oracle(states, query, key, value, num_heads=self.H),
            "weights": attention_weights(states, query, key, self.H),  # (B, H, Lq, Lk)
        }

    def judge(self, inputs, got, expected, tol):
        return judge_with_earlier_steps(got, lambda own: self.judge_own(inputs, own, expected, tol))

    def judge_own(self, inputs, got, expected, tol):
        if got["p"] is not None and got["p"] != 0.5:
            where = got.get("where") or "dropout"  # an nn.Dropout's path, or 'F.dropout()'
            name = f"{where[:-2]}(p)" if where.endswith("()") else f"{where}.p"
            return Fail(
                "bad_attribute", {"owner": "MultiHeadAttention", "name": name, "expected": 0.5, "got": got["p"]}
            )
        first, second = got["eval"]
        if (
            isinstance(first, torch.Tensor)
            and isinstance(second, torch.Tensor)
            and first.shape == second.shape
            and not torch.equal(first, second)
        ):
            return Fail("dropout_in_eval", {"diff": (first - second).abs().max().item()})
        fail = compare_tensor(first, expected["out"], tol, name="out in eval()")
        if fail:
            return fail
        if all(torch.equal(out, first) for out in got["train"]):
            return Fail("dropout_inactive", {"p": 0.5})
        weights = expected["weights"]  # (B, H, Lq, Lk)
        for out in got["train"]:
            fail = check_form(out, first.shape, first.dtype, first.device, name="out in train()") or judge_dropped(
                out, inputs["value"], weights, 0.5, tol
            )
            if fail:
                return fail
        return None


def attention_weights(states, query, key, num_heads):
    """softmax(q k^T / sqrt(d_k)) per head, written out: (B, H, Lq, Lk)."""
    q = F.linear(query, states["w_q"]["weight"], states["w_q"].get("bias"))
    k = F.linear(key, states["w_k"]["weight"], states["w_k"].get("bias"))
    B, lq, D = q.shape
    q = q.view(B, lq, num_heads, D // num_heads).transpose(1, 2)
    k = k.view(B, k.shape[1], num_heads, D // num_heads).transpose(1, 2)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D // num_heads), dim=-1)


def judge_dropped(out, value, weights, p, tol):
    """None if `out` (w_v = w_o = identity) is, per head, C @ v with every C_ij 0 or weights_ij / (1 - p)."""
    B, H, lq, lk = weights.shape
    v = value.view(B, lk, H, -1).transpose(1, 2)  # (B, H, Lk, d_k)
    z = out.view(B, lq, H, -1).transpose(1, 2)  # (B, H, Lq, d_k)
    c = z @ torch.linalg.pinv(v)  # (B, H, Lq, Lk): the coefficients, if z is in the span of v
    fail = compare_tensor(c @ v, z, tol, name="out in train()")
    if fail:
        return Fail("dropout_not_on_weights", {"detail": "the output is not a weighted sum of the values"})
    kept = weights / (1 - p)
    nearest = torch.where((c - kept).abs() < c.abs(), kept, torch.zeros_like(kept))
    fail = compare_tensor(c, nearest, tol, name="attention weights in train()")
    if fail:
        return Fail(
            "dropout_not_on_weights",
            {
                "detail": "its coefficients are not the attention weights, "
                f"each either dropped (0) or divided by 1 - p = {1 - p:g}"
            },
        )
    return None


class Gradients(Check):
    """backward() reaches all four projections."""

    id = "gradients"
    weight = 1
    observer = observers.gradients

    def inputs(self, rng):
        return {"states": weights(rng), "query": randn(rng, 2, 5, D)}

    def judge(self, inputs, got, expected, tol):
        return judge_with_earlier_steps(got, lambda own: self.judge_own(own))

    def judge_own(self, got):
        for name in LAYERS:
            if not got.get(name):
                return Fail("grad_missing", {"name": got.get("parameters", {}).get(name, name)})
        for role, other, where in got.get("shared", ()):
            return Fail("projection_shared", {"role": ROLE_WORDS[role], "other": ROLE_WORDS[other], "where": where})
        return None


ROLE_WORDS = {"w_q": "query", "w_k": "key", "w_v": "value", "w_o": "output"}


# ### BEGIN HIDDEN CHECKS


class RandomConfigurations(Check):
    """Random sizes and trailing padding of random lengths, against the reference: self-attention,
    padded cross-attention, and causal cross-attention with Lq < Lk (bias=False and dropout are
    fixed checks)."""

    id = "random_configurations"
    visibility = "hidden"
    weight = 3
    observer = observers.configurations

    def inputs(self, rng):
        num_heads = randsize(rng, 2, 5)
        d_k = randsize(rng, 2, 6, avoid=(4, num_heads))  # no scale made of other sizes equals sqrt(d_k) by chance
        B = randsize(rng, 2, 4)
        lq = randsize(rng, 2, 7)
        lk = lq + randsize(rng, 2, 4)  # Lq != Lk: top-left and bottom-right causal masks differ
        # Trailing padding, as pad_batch makes it (the contract): at least one real key (a row of
        # padding only is a fixed check's job) and at least one pad key per row.
        lengths = torch.randint(1, lk, (B,), generator=rng)
        pad_mask = torch.arange(lk)[None, :] >= lengths[:, None]  # (B, Lk)
        return {
            "states": weights(rng, num_heads * d_k),
            "num_heads": num_heads,
            "query": randn(rng, B, lq, num_heads * d_k),
            "key": randn(rng, B, lk, num_heads * d_k),
            "pad_mask": pad_mask,
        }

    def judge(self, inputs, got, expected, tol):
        expected = {key: value for key, value in expected.items() if key != WRITTEN_OUT}  # the reference's run
        return judge_with_earlier_steps(got, lambda own: compare(own, expected, tol), tol)


# ### PROBES (unscored: run when the step fails, to explain why)


class ProjectionNoGradient(Check):
    """In cross-attention every projection receives a gradient."""

    diagnosis = "projection_no_gradient"
    observer = observers.gradients

    def inputs(self, rng):
        return {"states": weights(rng), "query": randn(rng, 2, 5, D), "key": randn(rng, 2, 7, D)}

    def judge(self, inputs, got, expected, tol):
        for name in LAYERS:
            if not got.get(name):
                return Fail("projection_no_gradient", {"name": name})
        return None


class QueryRowsMixed(Check):
    """In cross-attention, changing one query token changes only that token's output."""

    diagnosis = "query_rows_mixed"
    observer = observers.one_query_changed

    def inputs(self, rng):
        query = randn(rng, 1, 5, D)
        changed = query.clone()
        changed[0, 2] = randn(rng, D)
        return {"states": weights(rng), "query": query, "changed": changed, "key": randn(rng, 1, 7, D)}

    def judge(self, inputs, got, expected, tol):
        before, after = got["before"], got["after"]
        if (
            not (isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor))
            or before.shape != after.shape
            or before.dim() != 3
        ):
            return None
        moved = [i for i in range(before.shape[1]) if i != 2 and not torch.allclose(before[0, i], after[0, i])]
        if moved:
            return Fail("query_rows_mixed", {"changed": 2, "moved": moved[0]})
        return None


class DropoutInEval(Check):
    """After eval(), two identical calls give identical outputs. (Random outputs cannot be
    matched against a planted mistake, so this behaviour is probed directly.)"""

    diagnosis = "dropout_in_eval"
    observer = observers.repeated_in_eval
    arguments = {"p": 0.5}

    def inputs(self, rng):
        return {"states": weights(rng), "query": randn(rng, 2, 5, D)}

    def judge(self, inputs, got, expected, tol):
        return Fail("dropout_in_eval", {}) if calls_differ(got["outputs"]) else None


def calls_differ(outputs) -> bool:
    """Whether identical calls (all tensors) gave outputs of the same shape but other values."""
    first, *others = outputs
    return all(isinstance(o, torch.Tensor) for o in outputs) and any(
        o.shape == first.shape and not torch.equal(o, first) for o in others
    )


class LayersCreatedInForward(Check):
    """With dropout 0, after eval(), two identical calls give identical outputs: where they do not,
    the module's weights change from call to call (layers made in forward, with fresh random
    weights each time, never the loaded ones). Every probe that compares two calls then compares
    two different modules: those diagnoses are void."""

    diagnosis = "layers_created_in_forward"
    observer = observers.repeated_in_eval
    arguments = {"p": 0.0}
    voids = ("dropout_in_eval", "query_rows_mixed")

    def inputs(self, rng):
        return {"states": weights(rng), "query": randn(rng, 2, 5, D)}

    def judge(self, inputs, got, expected, tol):
        return Fail("layers_created_in_forward", {}) if calls_differ(got["outputs"]) else None


class Localise(Check):
    """Helper: a localisation probe (engine/mistakes/localise.py): the module on small inputs, every
    value it computes recorded, compared stage by stage with the reference's (stages.json).
    B=2, Lq=4, d_model=15, H=3 (d_k=5): every size different, d_k no square."""

    localise = True
    observer = observers.traced
    causal, cross, p, pad_lengths = False, False, 0.0, (4, 2)

    def inputs(self, rng):
        query = randn(rng, 2, 4, 15)
        key = randn(rng, 2, 6, 15) if self.cross else None
        length = 6 if self.cross else 4
        pad_mask = torch.tensor([[j >= n for j in range(length)] for n in self.pad_lengths])
        return {
            "states": weights(rng, d_model=15),
            "query": query,
            "key": key,
            "value": key,
            "pad_mask": pad_mask,
            "causal": self.causal,
            "p": self.p,
        }


class LocaliseSelf(Localise):
    """Self-attention, the second sequence's last two tokens padded."""

    diagnosis = "localised"


class LocaliseCrossCausal(Localise):
    """Cross-attention (Lk=6) with the causal mask and padded keys."""

    diagnosis = "localised"

    causal, cross, pad_lengths = True, True, (6, 3)


class LocaliseDropout(Localise):
    """Self-attention in train() with dropout 0.5: the weights must be dropped out."""

    diagnosis = "localised"

    p = 0.5
