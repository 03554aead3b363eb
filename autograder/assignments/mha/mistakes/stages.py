"""Multi-head attention stage by stage, for localisation (engine/mistakes/localise.py): what the
reference computes at every stage of a localisation probe's inputs, and what it would output
with one operation (or two) left out.

Instructor-only, like the rest of mistakes/: it is a reference. `python -m autograder generate`
stores what it computes on the probes' public inputs in the assignment's stages.json, which the
student release ships (values of fixed inputs: they compute nothing).
"""

import itertools
import math

import torch
import torch.nn.functional as F

from autograder.engine.mistakes import cancelled
from autograder.engine.mistakes.scenario import Scenario, Stage

# The operations the module can leave out, each with the first stage it changes.
# An operation at a neighbouring place is the same operation moved: "<unit>@<stage>".
MODULE_UNITS = {
    "split_transpose": "q_heads",
    "scale": "scores",
    "scale@weights": "scores",
    "padding_mask": "masked_scores",
    "causal_mask": "masked_scores",
    "mask@weights": "masked_scores",
    "softmax": "weights",
    "dropout": "dropped",
    "merge_transpose": "merged",
    "output_projection": "out",
}
HEADS = ("B", "H", "L", "d_k")


def scenario(step: str, name: str, inputs: dict) -> Scenario:
    """The Scenario of the localisation probe `name` of step `step` on its inputs."""
    if step == "multi_head_attention":
        return module_scenario(name, **inputs)
    return {
        ("attention", "LocaliseAttention"): attention_scenario,
        ("masking", "LocaliseMasked"): masked_scenario,
        ("masking", "LocaliseMasks"): masks_scenario,
        ("split_heads", "LocaliseSplit"): split_scenario,
        ("output_projection", "LocaliseOutput"): output_scenario,
    }[step, name](name, **inputs)


# ---------------------------------------------------------------------------- the steps' functions


def attention_stages(q, k, v, mask, skip=frozenset()):
    """([Stage], out): the attention function's stages, the units in `skip` left out or moved;
    out and weights are what it returns."""
    scale = 1 / math.sqrt(q.shape[-1])
    raw = q @ k.transpose(-2, -1)
    scores = raw if skip & {"scale", "scale@weights"} else raw * scale
    blocked = mask if mask is not None and not skip & {"mask", "mask@weights"} else None
    masked = scores if blocked is None else scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
    weights = masked if "softmax" in skip else torch.softmax(masked, dim=-1)
    if mask is not None and "mask@weights" in skip:
        weights = weights.masked_fill(mask, 0.0)
    if "scale@weights" in skip:
        weights = weights * scale
    out = weights @ v
    axes, tails = ("B", "H", "Lq", "Lk"), (("Lq", "Lk"), ("Lk", "Lq"))
    stages = [
        Stage("q_in", q, ("B", "H", "Lq", "d_k"), kind="input"),
        Stage("k_in", k, ("B", "H", "Lk", "d_k"), kind="input"),
        Stage("v_in", v, ("B", "H", "Lk", "d_v"), kind="input"),
        Stage("raw_scores", raw, axes, tails=tails),
        Stage("scores", scores, axes, parents=("raw_scores",), tails=tails, scale=(scale,)),
    ]
    last = "scores"
    if mask is not None:
        parts = {"mask": mask}
        stages.append(
            Stage(
                "masked_scores",
                masked,
                axes,
                kind="masked",
                parents=("scores",),
                tails=tails,
                blocked=mask,
                parts=parts,
                source=scores,
            )
        )
        last = "masked_scores"
    stages += [
        Stage(
            "weights",
            weights,
            axes,
            kind="weights",
            parents=(last,),
            fixed=True,
            blocked=mask,
            parts=None if mask is None else {"mask": mask},
            source=scores,
        ),
        Stage("heads_out", out, ("B", "H", "Lq", "d_v"), parents=("weights",), fixed=True),
    ]
    return stages, out


def attention_scenario(name, q, k, v, mask):
    stages, out = attention_stages(q, k, v, mask)
    units = {"scale": "scores", "scale@weights": "scores", "softmax": "weights"}
    if mask is not None:
        units.update({"mask": "masked_scores", "mask@weights": "masked_scores"})
    skips = {
        unit: {"first": first, "outputs": [attention_stages(q, k, v, mask, {unit})[1]]} for unit, first in units.items()
    }
    B, H, Lq, d_k = q.shape
    sizes = {"B": B, "H": H, "Lq": Lq, "Lk": k.shape[2], "d_k": d_k, "d_v": v.shape[-1], "D": H * d_k}
    return Scenario(sizes=sizes, calls=[stages], outputs=[out], skips=skips, words=name)


def masked_scenario(name, q, k, v, mask):
    """Attention with a mask, judged from the mask on: what comes before it is the attention
    step's, and a finding there is not this step's to say (`own`)."""
    found = attention_scenario(name, q, k, v, mask)
    found.own = ["masked_scores", "weights", "heads_out"]
    return found


def masks_scenario(name, ids, length):
    padding = (ids == 0)[:, None, None, :]
    causal = torch.ones(length, length, dtype=torch.bool).triu(1)
    return Scenario(
        sizes={"B": ids.shape[0], "L": ids.shape[1]},
        calls=[
            [
                Stage(
                    "padding_mask",
                    padding,
                    ("B", "H", "Lq", "L"),
                    kind="mask",
                    blocked=padding,
                    parts={"padding": padding},
                    fixed=True,
                )
            ],
            [
                Stage(
                    "causal_mask",
                    causal,
                    ("Lq", "L"),
                    kind="mask",
                    blocked=causal,
                    parts={"causal": causal},
                    diagonals={"causal": 0},
                    fixed=True,
                )
            ],
        ],
        outputs=[padding, causal],
        words=name,
    )


def split_scenario(name, x, num_heads, heads):
    B, L, D = x.shape
    d_k = D // num_heads
    split = x.view(B, L, num_heads, d_k).transpose(1, 2)
    merged = heads.transpose(1, 2).reshape(B, L, D)
    return Scenario(
        sizes={"B": B, "H": num_heads, "L": L, "d_k": d_k, "D": D},
        calls=[
            [Stage("x", x, ("B", "L", "D"), kind="input"), Stage("split", split, ("B", "H", "L", "d_k"), fixed=True)],
            [
                Stage("heads_in", heads, ("B", "H", "L", "d_k"), kind="input"),
                Stage("merged", merged, ("B", "L", "D"), splits={"D": ("H", "d_k")}, fixed=True),
            ],
        ],
        outputs=[split, merged],
        words=name,
    )


def output_scenario(name, state, heads):
    B, H, L, d_k = heads.shape
    merged = heads.transpose(1, 2).reshape(B, L, H * d_k)
    out = F.linear(merged, state["weight"], state.get("bias"))
    skips = {
        "merge_transpose": {
            "first": "merged",
            "outputs": [F.linear(heads.reshape(B, L, H * d_k), state["weight"], state.get("bias"))],
        },
        "output_projection": {"first": "out", "outputs": [merged]},
    }
    return Scenario(
        sizes={"B": B, "H": H, "L": L, "d_k": d_k, "D": H * d_k},
        calls=[
            [
                Stage("heads_in", heads, ("B", "H", "L", "d_k"), kind="input"),
                Stage("merged", merged, ("B", "L", "D"), splits={"D": ("H", "d_k")}, tails=(("H", "d_k"),)),
                Stage("out", out, ("B", "L", "D"), parents=("merged",), fixed=True),
            ]
        ],
        outputs=[out],
        skips=skips,
        words=name,
    )


# ---------------------------------------------------------------------------- the module


def module_scenario(name, states, query, key, value, pad_mask, causal, p=0.0, num_heads=3):
    stages, out = module(states, query, key, value, pad_mask, causal, p, num_heads)

    def run(perturb):
        changed, changed_out = module(states, query, key, value, pad_mask, causal, p, num_heads, perturb=perturb)
        return [changed[-1].value if changed_out is None else changed_out]

    cancelled.mark(stages, run)
    sizes = module_sizes(query, key, num_heads)
    units = [u for u in MODULE_UNITS if any(s.name == MODULE_UNITS[u] for s in stages)]
    if pad_mask is None:
        units.remove("padding_mask")
    if not causal:
        units.remove("causal_mask")
    if pad_mask is None and not causal:
        units.remove("mask@weights")
    if p:  # in train() only leaving the dropout out gives outputs that compare (no random mask)
        units = ["dropout"]
    skips = {}
    for chosen in [(u,) for u in units] + list(itertools.combinations(units, 2)):
        _, changed = module(states, query, key, value, pad_mask, causal, p, num_heads, skip=set(chosen))
        skips["+".join(chosen)] = {"first": MODULE_UNITS[chosen[0]], "outputs": [changed]}
    return Scenario(sizes=sizes, calls=[stages], outputs=[] if out is None else [out], skips=skips, words=name)


def module_sizes(query, key, num_heads):
    """The sizes by name; one length L where queries and keys are as long (self-attention)."""
    B, Lq, D = query.shape
    Lk = (query if key is None else key).shape[1]
    lengths = {"L": Lq} if Lq == Lk else {"Lq": Lq, "Lk": Lk}
    return {"B": B, "H": num_heads, **lengths, "d_k": D // num_heads, "D": D}


def module(states, query, key, value, pad_mask, causal, p, num_heads, skip=frozenset(), perturb=None):
    """([Stage], out): the module's stages on these inputs, with the units in `skip` left out and
    each stage named in `perturb` ({name: function}) changed by its function as it is computed.
    In train() (p > 0) the stages end with the dropout, whose mask is the student's own draw."""
    perturb = perturb or {}

    def at(name, x):
        return perturb[name](x) if name in perturb else x

    key = query if key is None else key
    value = key if value is None else value
    B, Lq, D = query.shape
    Lk, H = key.shape[1], num_heads
    d_k = D // H

    def linear(name, x):
        return F.linear(x, states[name]["weight"], states[name].get("bias"))

    def split(x, length):
        if "split_transpose" in skip:
            return x.reshape(B, H, length, d_k)
        return x.view(B, length, H, d_k).transpose(1, 2)

    model = ("D", ("H", "d_k"))
    q, k, v = at("q", linear("w_q", query)), at("k", linear("w_k", key)), at("v", linear("w_v", value))
    qh, kh, vh = at("q_heads", split(q, Lq)), at("k_heads", split(k, Lk)), at("v_heads", split(v, Lk))
    raw = at("raw_scores", qh @ kh.transpose(-2, -1))
    scale = 1 / math.sqrt(d_k)
    scores = at("scores", raw if skip & {"scale", "scale@weights"} else raw * scale)
    parts = {}
    after = "mask@weights" in skip  # the mask moved after the softmax
    if pad_mask is not None and "padding_mask" not in skip:
        parts["padding"] = pad_mask[:, None, None, :]
    if causal and "causal_mask" not in skip:
        parts["causal"] = torch.ones(Lq, Lk, dtype=torch.bool).triu(1)
    reference_parts = {}
    if pad_mask is not None:
        reference_parts["padding"] = pad_mask[:, None, None, :]
    if causal:
        reference_parts["causal"] = torch.ones(Lq, Lk, dtype=torch.bool).triu(1)
    blocked = torch.zeros(Lq, Lk, dtype=torch.bool)
    for part in parts.values():
        blocked = blocked | part
    masked = scores if after else at("masked_scores", scores.masked_fill(blocked, torch.finfo(scores.dtype).min))
    weights = at("weights", masked if "softmax" in skip else torch.softmax(masked, dim=-1))
    if after:
        weights = weights.masked_fill(blocked, 0.0)
    if "scale@weights" in skip:
        weights = weights * scale
    score_tails = (("Lq", "Lk"), ("Lk", "Lq"))
    inputs = {"query": query, "key": key, "value": value}
    layers = {"query": "w_q", "key": "w_k", "value": "w_v"}

    def projection(name, role):
        """The projection's stage; others: its layer applied to another input, another layer to its input."""
        value_ = {"query": q, "key": k, "value": v}[role]
        others = {f"{role}={o}": lambda o=o: linear(layers[role], inputs[o]) for o in inputs if o != role}
        others.update(
            {f"{layers[role]}={layers[o]}": lambda o=o: linear(layers[o], inputs[role]) for o in inputs if o != role}
        )
        axes = ("B", "Lq" if role == "query" else "Lk", "D")
        return Stage(name, value_, axes, splits=dict([model]), tails=(("H", "d_k"),), others=_differing(others, value_))

    feature_tail = (("H", "d_k"),)
    raw_others = {
        "k_heads=v_heads": lambda: qh @ vh.transpose(-2, -1),
        "k_heads=q_heads": lambda: qh @ qh.transpose(-2, -1),
        "q_heads=k_heads": lambda: kh @ kh.transpose(-2, -1),
    }
    stages = [
        Stage("query", query, ("B", "Lq", "D"), kind="input"),
        Stage("key", key, ("B", "Lk", "D"), kind="input"),
        Stage("value", value, ("B", "Lk", "D"), kind="input"),
        projection("q", "query"),
        projection("k", "key"),
        projection("v", "value"),
        Stage("q_heads", qh, ("B", "H", "Lq", "d_k"), parents=("q",), tails=(("Lq", "d_k"),)),
        Stage("k_heads", kh, ("B", "H", "Lk", "d_k"), parents=("k",), tails=(("Lk", "d_k"), ("d_k", "Lk"))),
        Stage("v_heads", vh, ("B", "H", "Lk", "d_k"), parents=("v",), tails=(("Lk", "d_k"),)),
        Stage(
            "raw_scores",
            raw,
            ("B", "H", "Lq", "Lk"),
            parents=("q_heads", "k_heads"),
            tails=score_tails,
            others=_differing(raw_others, raw),
        ),
        Stage("scores", scores, ("B", "H", "Lq", "Lk"), parents=("raw_scores",), tails=score_tails, scale=(scale,)),
    ]
    last = "scores"
    full = blocked if reference_parts else None
    if reference_parts:
        reference_blocked = torch.zeros(Lq, Lk, dtype=torch.bool)
        for part in reference_parts.values():
            reference_blocked = reference_blocked | part
        full = reference_blocked
        stages.append(
            Stage(
                "masked_scores",
                masked,
                ("B", "H", "Lq", "Lk"),
                kind="masked",
                parents=("scores",),
                tails=score_tails,
                blocked=reference_blocked,
                parts=reference_parts,
                source=scores,
                diagonals={"causal": 0} if causal else None,
            )
        )
        last = "masked_scores"
    stages.append(
        Stage(
            "weights",
            weights,
            ("B", "H", "Lq", "Lk"),
            kind="weights",
            parents=(last,),
            tails=(("Lq", "Lk"),),  # weights @ v needs the keys last
            blocked=full,
            parts=reference_parts or None,
            source=scores,
            diagonals={"causal": 0} if causal else None,
        )
    )
    last = "weights"
    if p:
        # the weights before dropout: the student's dropout keeps each or zeroes it (its own draw)
        stages.append(Stage("dropped", weights, ("B", "H", "Lq", "Lk"), kind="dropout", parents=("weights",), p=p))
        if "dropout" not in skip:  # the student's own mask is another draw: nothing after it compares
            return stages, None
        last = "dropped"
    heads = at("heads_out", weights @ vh)
    merged = at(
        "merged",
        (heads.reshape if "merge_transpose" in skip else lambda *s: heads.transpose(1, 2).reshape(*s))(B, Lq, D),
    )
    out = merged if "output_projection" in skip else linear("w_o", merged)
    heads_others = {"v_heads=k_heads": lambda: weights @ kh, "v_heads=q_heads": lambda: weights @ qh}
    stages += [
        Stage(
            "heads_out",
            heads,
            ("B", "H", "Lq", "d_k"),
            parents=(last, "v_heads"),
            tails=(("Lq", "d_k"),),
            others=_differing(heads_others, heads),
        ),
        Stage("merged", merged, ("B", "Lq", "D"), parents=("heads_out",), splits=dict([model]), tails=feature_tail),
        Stage("out", out, ("B", "Lq", "D"), parents=("merged",), fixed=True),
    ]
    return stages, out


def _differing(others, value) -> dict:
    """The alternatives (label -> a function computing it) that can be computed and told from the
    value itself: the same shape, other numbers."""
    found = {}
    for label, compute in others.items():
        try:
            other = compute()
        except RuntimeError:  # shapes that do not fit together: no alternative
            continue
        if other.shape != value.shape or not torch.allclose(other, value, rtol=1e-6, atol=1e-9):
            found[label] = other
    return found
