"""The kv_cache assignment stage by stage, for localisation (engine/mistakes/localise.py): what the
reference computes at every stage of a localisation probe's inputs (the cache's contents after
each call, the scores, the blocked set, the weights, ... of each chunk), and what it would give
with one operation (or two) left out.

Instructor-only, like the rest of mistakes/: it is a reference. `python -m autograder generate`
stores what it computes on the probes' public inputs in the assignment's stages.json, which the
student release ships (values of fixed inputs: they compute nothing).

Over 400 lines: the assignment's four steps stage by stage, one scenario per localisation probe,
sharing the stages of attention; one file, as mistakes/model.py is.
"""

import itertools
import math

import torch
import torch.nn.functional as F

from autograder.engine.mistakes.scenario import Scenario, Stage

SCORE_TAILS = (("L_new", "L"), ("L", "L_new"))


def scenario(step: str, name: str, inputs: dict) -> Scenario:
    """The Scenario of the localisation probe `name` of step `step` on its inputs."""
    return {
        "LocaliseCache": cache_scenario,
        "LocaliseDecoding": decoding_scenario,
        "LocaliseMask": mask_scenario,
        "LocaliseGQA": gqa_scenario,
        "LocaliseDecoder": decoder_scenario,
    }[name](name, **inputs)


def offset_mask(q_len, k_len):
    """Query i sits at position k_len - q_len + i and may see keys 0..that: True = blocked."""
    return torch.ones(q_len, k_len, dtype=torch.bool).triu(k_len - q_len + 1)


def chunk_sizes(lengths):
    """Per call: its new tokens, the positions cached before it, and all of them."""
    sizes, past = [], 0
    for n in lengths:
        sizes.append({"L_new": n, "L_past": past, "L": past + n})
        past += n
    return sizes


def chunk_words(lengths):
    return [
        ["prompt", {"new": n}] if not past else ["chunk", {"new": n, "cached": past}] for n, past in _pasts(lengths)
    ]


def _pasts(lengths):
    past = 0
    for n in lengths:
        yield n, past
        past += n


# ---------------------------------------------------------------------------- the cache


def cache_scenario(name, pieces, after):
    """A cache fed `pieces`, reset, then fed after[0]: per call, what it returns and its length."""
    B, H_kv, _, d_k = pieces[0][0].shape
    d_v = pieces[0][1].shape[-1]
    sizes = {"B": B, "H_kv": H_kv, "d_k": d_k, "d_v": d_v}
    calls, outputs, call_sizes, words = [], [], [], []
    seen_k, seen_v = [], []
    for number, (k, v) in enumerate(pieces):
        seen_k.append(k)
        seen_v.append(v)
        K, V = torch.cat(seen_k, dim=2), torch.cat(seen_v, dim=2)
        stages = [
            Stage("k_in", k, ("B", "H_kv", "L_new", "d_k"), kind="input"),
            Stage("v_in", v, ("B", "H_kv", "L_new", "d_v"), kind="input"),
            Stage("cache_K", K, ("B", "H_kv", "L", "d_k"), others=_joined(seen_k), tails=(("L", "d_k"),)),
            Stage("cache_V", V, ("B", "H_kv", "L", "d_v"), others=_joined(seen_v), tails=(("L", "d_v"),)),
            Stage("cache_len", torch.tensor(K.shape[2]), (), others=_lengths(K.shape[2], number + 1, H_kv)),
        ]
        calls.append(stages)
        outputs.append(K)
        call_sizes.append({"L": K.shape[2], "L_new": k.shape[2], "L_past": K.shape[2] - k.shape[2]})
        words.append(["update", {"new": k.shape[2], "cached": K.shape[2] - k.shape[2]}])
    before = sum(k.shape[2] for k in seen_k)
    calls.append([Stage("cache_len", torch.tensor(0), (), others={"skip:reset": torch.tensor(before)})])
    outputs.append(torch.tensor(0))
    call_sizes.append({"L": 0})
    words.append(["reset", {"cached": before}])
    k, v = after[0]
    kept_k, kept_v = torch.cat(seen_k + [k], dim=2), torch.cat(seen_v + [v], dim=2)
    length = k.shape[2]
    calls.append(
        [
            Stage("cache_K", k, ("B", "H_kv", "L", "d_k"), others={"skip:reset": kept_k}, tails=(("L", "d_k"),)),
            Stage("cache_V", v, ("B", "H_kv", "L", "d_v"), others={"skip:reset": kept_v}, tails=(("L", "d_v"),)),
            Stage(
                "cache_len",
                torch.tensor(length),
                (),
                others={"skip:reset": torch.tensor(before + length), **_lengths(length, 1, H_kv)},
            ),
        ]
    )
    outputs.append(k)
    call_sizes.append({"L": length, "L_new": length})
    words.append(["after_reset", {"new": length}])
    # a second cache, fed the first chunk: it holds that chunk alone (no storage shared with the first)
    k, v = pieces[0]
    first = after[0][0]  # what the first cache holds by now
    shared = {"cache:shared": torch.cat([first, k], dim=2)}
    calls.append(
        [
            Stage("cache_K", k, ("B", "H_kv", "L", "d_k"), others=shared, tails=(("L", "d_k"),)),
            Stage(
                "cache_len", torch.tensor(k.shape[2]), (), others={"cache:shared": torch.tensor(length + k.shape[2])}
            ),
        ]
    )
    call_sizes.append({"L": k.shape[2], "L_new": k.shape[2]})
    words.append(["second_cache", {"new": k.shape[2]}])
    return Scenario(sizes=sizes, calls=calls, outputs=[], words=name, call_sizes=call_sizes, call_words=words)


def _joined(chunks):
    """The cache's contents joined otherwise: on another axis, newest first, the last chunk only."""
    others = {}
    if len(chunks) > 1:
        for label, dim in (("cache:joined_heads", 1), ("cache:joined_features", 3)):
            try:
                others[label] = torch.cat(chunks, dim=dim)
            except RuntimeError:  # chunks that do not fit together on that axis
                pass
        others["cache:newest_first"] = torch.cat(list(reversed(chunks)), dim=2)
        others["cache:last_chunk"] = chunks[-1]
    return others


def _lengths(length, updates, heads):
    """What a length counts instead of the cached positions: the calls to update, the heads."""
    others = {}
    if updates != length:
        others["len:updates"] = torch.tensor(updates)
    if heads != length:
        others["len:heads"] = torch.tensor(heads)
    return others


# ---------------------------------------------------------------------------- attention pieces


def attention_stages(q, K, V, blocked, *, groups=None, q_parent=None, k_parent=None, v_parent=None):
    """The stages of attention of q over the whole K, V (repeated for GQA when `groups`):
    ([Stage], out). Axes: (B, H, L_new, ...) queries, L keys. The causal mask `blocked` has its
    diagonal at L - L_new (query i sits at position L_past + i)."""
    kv_axis = "H_kv" if groups is not None else "H"
    stages = [
        Stage("q_in", q, ("B", "H", "L_new", "d_k"), kind="input"),
        Stage("k_in", K, ("B", kv_axis, "L", "d_k"), kind="input"),
        Stage("v_in", V, ("B", kv_axis, "L", "d_v"), kind="input"),
    ]
    diagonal = {"causal": K.shape[2] - q.shape[2]}
    H = q.shape[1]
    if groups is not None:
        n_rep = H // K.shape[1]
        K_rep, V_rep = K.repeat_interleave(n_rep, dim=1), V.repeat_interleave(n_rep, dim=1)
        split = {"H": ("H_kv", "n_rep")}
        stages += [
            Stage(
                "k_rep",
                K_rep,
                ("B", "H", "L", "d_k"),
                parents=k_parent or (),
                splits=split,
                groups={"H": "n_rep"},
                tails=(("L", "d_k"), ("d_k", "L")),
            ),
            Stage(
                "v_rep",
                V_rep,
                ("B", "H", "L", "d_v"),
                parents=v_parent or (),
                splits=split,
                groups={"H": "n_rep"},
                tails=(("L", "d_v"),),
            ),
        ]
        K, V = K_rep, V_rep
        k_parent, v_parent = ("k_rep",), ("v_rep",)
    split = {"H": ("H_kv", "n_rep")} if groups is not None else {}
    raw = q @ K.transpose(-2, -1)
    scale = 1 / math.sqrt(q.shape[-1])
    scores = raw * scale
    masked = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
    weights = torch.softmax(masked, dim=-1)
    out = weights @ V
    axes = ("B", "H", "L_new", "L")
    stages += [
        Stage("raw_scores", raw, axes, parents=(q_parent or ()) + (k_parent or ()), splits=split, tails=SCORE_TAILS),
        Stage("scores", scores, axes, parents=("raw_scores",), splits=split, tails=SCORE_TAILS, scale=(scale,)),
        Stage(
            "masked_scores",
            masked,
            axes,
            kind="masked",
            parents=("scores",),
            splits=split,
            tails=SCORE_TAILS,
            blocked=blocked,
            parts={"causal": blocked},
            source=scores,
            diagonals=diagonal,
        ),
        Stage(
            "weights",
            weights,
            axes,
            kind="weights",
            parents=("masked_scores",),
            splits=split,
            tails=(("L_new", "L"),),
            blocked=blocked,
            parts={"causal": blocked},
            source=scores,
            diagonals=diagonal,
        ),
        Stage(
            "heads_out",
            out,
            ("B", "H", "L_new", "d_v"),
            parents=("weights",) + (v_parent or ()),
            splits=split,
            tails=(("L_new", "d_v"),),
        ),
    ]
    return stages, out


# ---------------------------------------------------------------------------- incremental decoding


def decoding_scenario(name, q, k, v, lengths):
    """cached_attention on each chunk of `lengths`, fed a cache that holds the sequence so far."""
    B, H, _, d_k = q.shape
    sizes = {"B": B, "H": H, "d_k": d_k, "d_v": v.shape[-1]}
    calls, outputs, skipped = [], [], {"cache": [], "causal_mask": [], "scale": []}
    start = 0
    for n in lengths:
        end = start + n
        chunk_q = q[:, :, start:end]
        K, V = k[:, :, :end], v[:, :, :end]
        stages, out = attention_stages(chunk_q, K, V, offset_mask(n, end))
        stages[-1].fixed = True
        calls.append(stages)
        outputs.append(out)
        skipped["cache"].append(_attend(chunk_q, k[:, :, start:end], v[:, :, start:end], offset_mask(n, n)))
        skipped["causal_mask"].append(_attend(chunk_q, K, V, None))
        skipped["scale"].append(_attend(chunk_q, K, V, offset_mask(n, end), scale=False))
        start = end
    first = {"cache": "raw_scores", "causal_mask": "masked_scores", "scale": "scores"}
    return Scenario(
        sizes=sizes,
        calls=calls,
        outputs=outputs,
        skips={unit: {"first": first[unit], "outputs": outs} for unit, outs in skipped.items()},
        words=name,
        call_sizes=chunk_sizes(lengths),
        call_words=chunk_words(lengths),
    )


def _attend(q, k, v, blocked, scale=True):
    scores = q @ k.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(q.shape[-1])
    if blocked is not None:
        scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) @ v


def mask_scenario(name, sizes):
    """offset_causal_mask(q_len, k_len) for each pair: one call each."""
    calls = [
        [
            Stage(
                "mask",
                offset_mask(q, k),
                ("L_new", "L"),
                kind="mask",
                blocked=offset_mask(q, k),
                parts={"causal": offset_mask(q, k)},
                diagonals={"causal": k - q},
                fixed=True,
            )
        ]
        for q, k in sizes
    ]
    return Scenario(
        sizes={},
        calls=calls,
        outputs=[offset_mask(q, k) for q, k in sizes],
        words=name,
        call_sizes=[{"L_new": q, "L_past": k - q, "L": k} for q, k in sizes],
        call_words=[["mask", {"new": q, "all": k}] for q, k in sizes],
    )


# ---------------------------------------------------------------------------- grouped-query attention


def gqa_scenario(name, q, k, v, mask):
    B, H, Lq, d_k = q.shape
    H_kv, Lk, d_v = k.shape[1], k.shape[2], v.shape[-1]
    sizes = {"B": B, "H": H, "H_kv": H_kv, "n_rep": H // H_kv, "d_k": d_k, "d_v": d_v, "L_new": Lq, "L": Lk}
    stages, out = attention_stages(q, k, v, mask, groups=True)
    stages[-1].fixed = True
    n_rep = H // H_kv
    skips = {
        "causal_mask": {"first": "masked_scores", "outputs": [_attend(q, _rep(k, n_rep), _rep(v, n_rep), None)]},
        "scale": {"first": "scores", "outputs": [_attend(q, _rep(k, n_rep), _rep(v, n_rep), mask, scale=False)]},
    }
    return Scenario(sizes=sizes, calls=[stages], outputs=[out], skips=skips, words=name)


def _rep(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


# ---------------------------------------------------------------------------- the decoder module

DECODER_UNITS = {
    "split_transpose": "q_heads",
    "cache": "raw_scores",
    "scale": "scores",
    "causal_mask": "masked_scores",
    "merge_transpose": "merged",
    "output_projection": "out",
}


def decoder_scenario(name, states, x, n_heads, n_kv_heads, bias, lengths):
    stages, outputs = decoder(states, x, n_heads, n_kv_heads, lengths)
    skips = {}
    for chosen in [(u,) for u in DECODER_UNITS] + list(itertools.combinations(DECODER_UNITS, 2)):
        _, changed = decoder(states, x, n_heads, n_kv_heads, lengths, skip=set(chosen))
        skips["+".join(chosen)] = {"first": DECODER_UNITS[chosen[0]], "outputs": changed}
    B, _, D = x.shape
    n_kv = n_heads if n_kv_heads is None else n_kv_heads
    sizes = {"B": B, "D": D, "H": n_heads, "H_kv": n_kv, "n_rep": n_heads // n_kv, "d_k": D // n_heads}
    return Scenario(
        sizes=sizes,
        calls=stages,
        outputs=outputs,
        skips=skips,
        words=name,
        call_sizes=chunk_sizes(lengths),
        call_words=chunk_words(lengths),
    )


def decoder(states, x, n_heads, n_kv_heads, lengths, skip=frozenset()):
    """([[Stage] per chunk], [out per chunk]) of the decoder fed x in chunks of `lengths`, with a
    cache holding the keys and values of the text so far; the units in `skip` left out."""
    B, _, D = x.shape
    n_kv = n_heads if n_kv_heads is None else n_kv_heads
    d_k = D // n_heads
    n_rep = n_heads // n_kv

    def linear(name, t):
        return F.linear(t, states[name]["weight"], states[name].get("bias"))

    def heads(t, count):
        b, length, _ = t.shape
        if "split_transpose" in skip:
            return t.reshape(b, count, length, d_k)
        return t.view(b, length, count, d_k).transpose(1, 2)

    calls, outputs, cached_k, cached_v, start = [], [], [], [], 0
    for n in lengths:
        chunk = x[:, start : start + n]
        q, k, v = linear("w_q", chunk), linear("w_k", chunk), linear("w_v", chunk)
        qh, kh, vh = heads(q, n_heads), heads(k, n_kv), heads(v, n_kv)
        cached_k.append(kh)
        cached_v.append(vh)
        if "cache" in skip:
            K, V, blocked = kh, vh, offset_mask(n, n)
        else:
            K, V, blocked = torch.cat(cached_k, dim=2), torch.cat(cached_v, dim=2), offset_mask(n, start + n)
        K_rep, V_rep = K.repeat_interleave(n_rep, dim=1), V.repeat_interleave(n_rep, dim=1)
        raw = qh @ K_rep.transpose(-2, -1)
        scale = 1 / math.sqrt(d_k)
        scores = raw if "scale" in skip else raw * scale
        masked = scores if "causal_mask" in skip else scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
        weights = torch.softmax(masked, dim=-1)
        out_heads = weights @ V_rep
        if "merge_transpose" in skip:  # noqa: SIM108 - each way on a line of its own, as the reference's
            merged = out_heads.reshape(B, n, D)
        else:
            merged = out_heads.transpose(1, 2).reshape(B, n, D)
        out = merged if "output_projection" in skip else linear("w_o", merged)
        features = {"D": ("H", "d_k"), "D_kv": ("H_kv", "d_k")}
        split = {"H": ("H_kv", "n_rep")}
        axes = ("B", "H", "L_new", "L")
        diagonal = {"causal": 0 if "cache" in skip else start}
        stages = [
            Stage("x", chunk, ("B", "L_new", "D"), kind="input"),
            Stage("q", q, ("B", "L_new", "D"), splits=features, tails=(("H", "d_k"),)),
            Stage("k", k, ("B", "L_new", "D_kv"), splits=features, tails=(("H_kv", "d_k"),)),
            Stage("v", v, ("B", "L_new", "D_kv"), splits=features, tails=(("H_kv", "d_k"),)),
            Stage("q_heads", qh, ("B", "H", "L_new", "d_k"), parents=("q",), splits=split, tails=(("L_new", "d_k"),)),
            Stage(
                "k_heads", kh, ("B", "H_kv", "L_new", "d_k"), parents=("k",), tails=(("L_new", "d_k"), ("d_k", "L_new"))
            ),
            Stage("v_heads", vh, ("B", "H_kv", "L_new", "d_k"), parents=("v",), tails=(("L_new", "d_k"),)),
            Stage("raw_scores", raw, axes, parents=("q_heads", "k_heads"), splits=split, tails=SCORE_TAILS),
            Stage("scores", scores, axes, parents=("raw_scores",), splits=split, tails=SCORE_TAILS, scale=(scale,)),
            Stage(
                "masked_scores",
                masked,
                axes,
                kind="masked",
                parents=("scores",),
                splits=split,
                tails=SCORE_TAILS,
                blocked=blocked,
                parts={"causal": blocked},
                source=scores,
                diagonals=diagonal,
            ),
            Stage(
                "weights",
                weights,
                axes,
                kind="weights",
                parents=("masked_scores",),
                splits=split,
                tails=(("L_new", "L"),),
                blocked=blocked,
                parts={"causal": blocked},
                source=scores,
                diagonals=diagonal,
            ),
            Stage(
                "heads_out",
                out_heads,
                ("B", "H", "L_new", "d_k"),
                parents=("weights", "v_heads"),
                splits=split,
                tails=(("L_new", "d_k"),),
            ),
            Stage(
                "merged", merged, ("B", "L_new", "D"), parents=("heads_out",), splits=features, tails=(("H", "d_k"),)
            ),
            Stage("out", out, ("B", "L_new", "D"), parents=("merged",), fixed=True),
        ]
        calls.append(stages)
        outputs.append(out)
        start += n
    return calls, outputs
