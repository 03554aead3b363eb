"""Localise, then name: the first stage of the computation where the student's values leave the
reference's on the same inputs, and what happened there.

A localisation probe (a probe with `localise = True`, in a step's checks module) runs the
student's code on small public inputs under the harness's recorder (harness/trace.py), which
sees every value the code computes. The reference's values of the same inputs, stage by stage
(projections, heads, scores, weights, ..., cache contents), come from the assignment's
stages.json: made once from the assignment's pipeline (mistakes/stages.py, instructor-only) by
`python -m autograder generate`, and shipped, so that a student's own run localises as the
grade does (stored values of public inputs: they compute nothing). Then:

1. each stage is *seen* when some recorded value is the stage's value, in the same layout or one
   whose axes keep their meaning (a (B*H, L, d_k) view of (B, H, L, d_k) heads), or up to a
   difference the rest of the computation does not see (unseen.py: a key's bias the softmax
   cancels, the scale applied to the queries), or when a later stage computed from it is seen;
2. the first stage not seen whose inputs were seen is where the computation leaves the
   reference; the student's values there are related to the reference's by the general
   relations of relations.py, and by the "skipped" relation: the student's outputs are those of
   the reference with one operation (or two) left out (stored with the stages);
3. one most specific relation names what happened; two different ones that fit equally well
   name nothing but the stage. Where the code raised, the finding is the stage it was
   computing, the call that raised and the shapes that met there, each axis by its name.

A Finding is plain data (scenario.py): the known mistakes' own findings on the same probes are
stored too (store.py), so a known mistake refines a finding and never contradicts one
(diagnosis.py drops a known mistake whose finding differs); said.py says it.

One module, though long: seeing the stages, finding the first one left, relating the values
there, going through the steps towards a relation and back to a parent's value used are one
walk over one call's report, sharing its positions and what was computed from what; split,
each part would take the whole report and the others' positions.
"""

import itertools

import torch

from autograder.engine.mistakes import raised as raising
from autograder.engine.mistakes import relations, unseen
from autograder.engine.mistakes.relations import blocked_of, close, coarsens, fine, is_float, orders
from autograder.engine.mistakes.scenario import Finding, Scenario

# The families by how much they say, the most specific first; a family says more than each one
# listed under it in GENERAL (a blocked set shifted by one is also "different only at masked
# positions"), so a fit of both names the former.
SPECIFIC = (
    "skip",
    "other_input",
    "blocked",
    "softmax_axis",
    "slice_map",
    "shift",
    "length",
    "layout",
    "shape",
    "factor",
    "bias",
    "masked_only",
    "unmasked_only",
)
EXACT = {"skip", "other_input"}  # a whole counterfactual computation: more specific than any other
# Where the values differ (masked_only, unmasked_only) is said by any relation that says how.
WHERE_ONLY = {"blocked", "softmax_axis", "slice_map", "shift", "length", "layout", "factor", "bias"}
GENERAL = {
    "layout": {"slice_map", "blocked"},  # heads tiled = the factors of H in another order: said as tiled
    "masked_only": WHERE_ONLY,
    "unmasked_only": WHERE_ONLY,
    "bias": {"factor", "blocked", "masked_only", "unmasked_only"},
    "slice_map": {"blocked"},
    "shift": {"blocked", "slice_map"},
}

# ---------------------------------------------------------------------------- seeing a stage


def sees(got, stage, sizes, tol) -> bool:
    """Whether the recorded value `got` is the stage's value (in an acceptable layout)."""
    if not isinstance(got, torch.Tensor):
        return False
    value = stage.value
    if stage.kind in ("masked", "dropout"):
        if got.shape != value.shape and got.numel() == value.numel() and coarsens(got.shape, value.shape):
            got = got.reshape(value.shape)  # heads folded into the batch: (B*H, Lq, Lk)
        return _same_effect(got, stage, tol) if stage.kind == "masked" else _dropped(got, stage, tol)
    if got.dtype == torch.bool or value.dtype == torch.bool:
        return got.dtype == value.dtype and got.shape == value.shape and torch.equal(got, value)
    if not is_float(got) or not is_float(value):
        return got.shape == value.shape and torch.equal(got.to(value.dtype), value)
    if got.shape == value.shape and close(got, value, tol):
        return True
    if got.numel() != value.numel() or stage.fixed:
        return False
    expected = fine(value, stage.axes, stage.splits, sizes)[1]
    return any(
        consistent and relations.acceptable(order, expected, stage)
        for order, consistent in orders(value, stage.axes, stage.splits, sizes, got, tol)
    )


def _same_effect(got, stage, tol) -> bool:
    """Scores with the mask applied: the same where keys are let through, and blocked where the
    reference blocks (any value that the softmax turns into a weight of 0: min, -inf, -1e9)."""
    if got.shape != stage.value.shape or not is_float(got):
        return False
    theirs = blocked_of(got, "masked")
    ours = stage.blocked.expand_as(stage.value) if stage.blocked is not None else None
    if theirs is None or ours is None or not torch.equal(theirs, ours):
        return ours is None and close(got, stage.value, tol)
    return close(got, stage.value, tol, where=~ours)


def _dropped(got, stage, tol) -> bool:
    """Weights after dropout: every entry 0 or the reference's scaled by 1 / (1 - p), some 0."""
    value = stage.value
    if got.shape != value.shape or not is_float(got) or not stage.p:
        return False
    got = got.detach().to(torch.float64)
    zero = got.abs() <= 1e-12
    kept = close(got, value.to(torch.float64) / (1 - stage.p), tol, where=~zero)
    return kept and bool((zero & (value.abs() > 1e-12)).any())


# ---------------------------------------------------------------------------- localising one run


def localise(report, scenario: Scenario, tol) -> "Finding | None":
    """The Finding of a localisation probe's report ({"calls": [trace report per call],
    "outputs": [per call]}) against the Scenario, or None where every stage of every call is
    seen (or the report cannot be read, or too little of the stage was seen to name it)."""
    calls = report.get("calls") if isinstance(report, dict) else None
    if not isinstance(calls, list):
        return None
    outputs = report.get("outputs") if isinstance(report.get("outputs"), list) else []
    skipped = _skipped(outputs, scenario, tol)
    for index, stages in enumerate(scenario.calls):
        call = calls[index] if index < len(calls) and isinstance(calls[index], dict) else None
        if call is None:
            return None
        finding = _localise_call(index, stages, call, scenario, skipped, tol)
        if finding is not _RIGHT:
            if finding is not None and scenario.own and finding.stage not in scenario.own:
                return None  # where another step's code leaves the reference: that step says it
            return finding
    return None


_RIGHT = object()  # a call whose every stage was seen


def _localise_call(index, stages, call, scenario, skipped, tol):
    values = call.get("values", [])
    values = [v if isinstance(v, torch.Tensor) else None for v in (values if isinstance(values, list) else [])]
    raised = call.get("raised") if isinstance(call.get("raised"), dict) else None
    sizes = scenario.sizes_of(index)
    ops = call.get("ops") if isinstance(call.get("ops"), list) else []
    returned = {i for i, op in enumerate(ops) if op == "returned"}
    live = _live(call, len(values), returned)
    seen = {}  # stage -> the positions of the values that are it
    shifted = {}  # stage -> the position of the value that is it up to a difference cancelled later
    loose = {}  # stage -> the positions of the values that are it up to a factor a later stage takes in
    moving = not unseen.scale_kept(stages, call, values, live, tol)
    for stage in stages:
        # what the code returns is seen in what it returned (not in a step towards it: weights
        # computed right and scores returned in their place); any other stage in a value the
        # computation goes on from (not in one made and thrown away: masked_fill's result dropped)
        among = returned if stage.fixed and returned else live
        positions = [i for i in among if values[i] is not None and sees(values[i], stage, sizes, tol)]
        if positions:
            seen[stage.name] = positions
        else:  # seen up to a difference that nothing later sees: right, and its value no other stage's
            differs = {i: unseen.loosely(values[i], stage, tol) for i in among if values[i] is not None}
            cancelled = [i for i, difference in differs.items() if difference == "cancelled"]
            if cancelled:  # its value, as the student's computation goes on from it
                seen[stage.name], shifted[stage.name] = cancelled, cancelled[0]
            factor = [i for i, difference in differs.items() if difference == "factor"]
            if factor and not cancelled and moving:
                loose[stage.name] = factor
    right = _right(stages, {**seen, **loose}) | {s.name for s in stages if s.kind == "input"}
    if len(right) == len(stages) and raised is None:
        return _RIGHT
    ready = [s for s in stages if s.name not in right and all(p in right for p in s.parents)]
    divergent = _raising(ready, raised, seen) or (ready[0] if ready else None)
    if divergent is None:
        return None
    divergent = unseen.rebased(divergent, stages, shifted, values)
    # a parent seen only up to a difference may be this stage's value already: the scale applied early
    start = max(
        [seen[p][0] for p in divergent.parents if p in seen]
        + [loose[p][0] - 1 for p in divergent.parents if p in loose],
        default=-1,
    )
    before = {s.name for s in _ancestors(stages, divergent)}
    inputs = {s.name for s in stages if s.kind == "input"}
    taken = {positions[0] for name, positions in seen.items() if name != divergent.name and name not in inputs}
    candidates = [
        (i, value)
        for i, value in enumerate(values)
        if value is not None
        and i > start
        and i not in taken  # the student's own value of another stage
        and not any(i in seen.get(name, ()) for name in before)  # an input of this stage
    ]
    fits = {}
    if divergent.fixed and returned:  # what the code returns is what it returned, not a step towards it
        candidates = [(i, v) for i, v in candidates if i in returned]
    shaped = [(i, v) for i, v in candidates if tuple(v.shape) == tuple(divergent.value.shape)]
    if divergent.fixed and shaped:  # its last value of that shape
        shaped = shaped[-1:]
    for group in (shaped, candidates):  # values of the stage's own shape first: others are steps towards them
        for i, value in group:
            for found in unseen.relate(value, divergent, stages, sizes, tol, moving):
                fits.setdefault(found, i)
        if fits:
            break
    # a value related the way a value computed from it is, with other parameters, is a step towards
    # it (scores / d_k, then / 2: one factor made in two steps): the stage is the later one, and a
    # step is neither the stage nor a parent's value. A value related otherwise (scores that the
    # weights' softmax would shift, then a mask applied to them) is no step: another operation
    steps = _steps_towards(fits, call)
    fits = {found: i for found, i in fits.items() if i not in steps}
    for unit, first in skipped:
        if first == divergent.name:
            fits[relations.fit("skip", unit=unit)] = None
    chosen = choose(list(fits))
    if not (chosen and chosen.family in EXACT):
        sources = [fits[chosen]] if chosen is not None and fits.get(chosen) is not None else [i for i, _ in shaped]
        # a parent's value up to a factor that a later stage takes in is no change on its way
        unchanged = {**{p: loose[p] for p in divergent.parents if p in loose}, **seen}
        used = _used_parent(sources, call, stages, divergent, values, unchanged, sizes, tol, steps, shifted, moving)
        weak = chosen is None or chosen.family in ("masked_only", "unmasked_only")
        if used is not None and (used[1] is not None or weak):
            # computed from a parent's value changed on its way: the cause is there (said how, where one relation does)
            divergent, chosen = used[0], used[1]
            fits = {chosen: used[2]} if chosen is not None else {}
    params = raising.described(raised, stages, sizes) if raised is not None else None
    if chosen is None and not fits and params is None and not _has_form(candidates, divergent):
        return None  # nothing shaped like this stage: too little seen to name it
    at = _place(call.get("at"), fits[chosen]) if chosen is not None and fits.get(chosen) is not None else None
    return Finding(
        divergent.name,
        index,
        chosen.family if chosen else None,
        chosen.params if chosen else (),
        raised=params,
        at=at,
        also=tuple(sorted({f.family for f in fits} - {chosen.family})) if chosen else (),
    )


def _raising(ready, raised, seen):
    """Of the stages whose inputs were all seen, the one the call that raised was computing: made
    from a value it was given (the keys' split that raised, not the values' projection that the
    reference's order puts first), or None where the report does not say."""
    given = raised.get("inputs") if raised is not None else None
    if not isinstance(given, list):
        return None
    given = {i for i in given if isinstance(i, int)}
    return next((s for s in ready if any(given & set(seen.get(p, ())) for p in s.parents)), None)


def _live(call, count, returned) -> list:
    """The positions of the values the computation goes on from: returned, or an input of a
    later value. All, where the report cannot tell: it does not say what was computed from
    what, or what the call returned, or the call raised (what it would have gone on from is
    not known)."""
    inputs = call.get("from")
    if not isinstance(inputs, list) or len(inputs) != count or not returned or call.get("raised") is not None:
        return list(range(count))
    used = set(returned)
    for sources in inputs:
        if isinstance(sources, list):
            used.update(i for i in sources if isinstance(i, int))
    return [i for i in range(count) if i in used]


def _steps_towards(fits, call) -> set:
    """The positions of `fits` ({Fit: position}) that another position of `fits` was computed
    from, directly, by a relation of the same family (a factor towards a factor)."""
    inputs = call.get("from")
    if not isinstance(inputs, list):
        return set()
    families = {}
    for found, i in fits.items():
        if i is not None:
            families.setdefault(i, set()).add(found.family)
    steps = set()
    for i, later in families.items():
        sources = inputs[i] if i < len(inputs) and isinstance(inputs[i], list) else []
        steps.update(s for s in sources if isinstance(s, int) and s != i and families.get(s, set()) & later)
    return steps


def _used_parent(
    positions, call, stages, divergent, values, seen, sizes, tol, steps=frozenset(), shifted=None, moving=True
):
    """(parent stage, Fit, position) where the values at `positions` were computed from a value
    that is one of the divergent stage's parents changed by a relation (the heads sliced after
    they were split right): the parent's value as used is where the computation leaves the
    reference. None unless exactly one parent explains it. The stage's own `steps` are gone
    through, not related: they are the stage on its way, not a parent. A parent the student's code
    computed up to a difference nothing later sees (`shifted`: stage -> position) is related as the
    student's code computed it: that difference is no change on the way."""
    inputs = call.get("from")
    if not isinstance(inputs, list):
        return None
    stage_values = {i for positions_ in seen.values() for i in positions_}
    shifted = shifted or {}
    parents = [unseen.as_computed(s, stages, shifted, values) for s in stages if s.name in divergent.parents]
    found = {}

    def sources_of(position):
        listed = inputs[position] if position < len(inputs) and isinstance(inputs[position], list) else []
        return [i for i in listed if isinstance(i, int) and 0 <= i < len(values) and values[i] is not None]

    frontier, visited = [s for p in positions for s in sources_of(p)], set()
    for _ in range(3):  # back through a few steps that only lay the value out (a transpose for k^T)
        following = []
        for source in frontier:
            if source in visited or source in stage_values:
                continue
            visited.add(source)
            if source in steps:
                following += sources_of(source)
                continue
            related = False
            for parent in parents:
                for found_fit in unseen.relate(values[source], parent, stages, sizes, tol, moving):
                    if moving and parent.moves and found_fit.family == "factor":
                        continue  # a factor a later stage takes in: no change on the way
                    found.setdefault(parent.name, {}).setdefault(found_fit, source)
                    related = True
            if not related:  # go on only through a layout of the same values that the stage allows (k^T)
                following += [
                    i
                    for i in sources_of(source)
                    if any(_allowed_layout(values[source], values[i], parent, sizes, tol) for parent in parents)
                ]
        frontier = following
    chosen = {name: choose(list(fits)) for name, fits in found.items()}
    named = [parent for parent in parents if chosen.get(parent.name) is not None]
    if named:  # the first parent, in the order of the computation (q before k, both sliced)
        chosen_fit = chosen[named[0].name]
        return named[0], chosen_fit, found[named[0].name][chosen_fit]
    if found:
        return None
    # no relation: a parent's value as used is still wrong where an input of its own shape is none
    # of the stages' values (the scores scaled and flipped before the mask): the stage, unnamed
    unexplained = [
        parent
        for parent in parents
        if any(
            tuple(values[i].shape) == tuple(parent.value.shape) and values[i].dtype == parent.value.dtype
            for i in visited
        )
    ]
    return (unexplained[0], None, None) if len(unexplained) == 1 else None


def _allowed_layout(out, value, stage, sizes, tol) -> bool:
    """Whether `out` is `value` with its axes permuted (neighbours merged or split at most: a
    transpose, a view; not a flip nor a roll), in a layout the stage allows: the same layout of
    the stage's own value is the stage (k_heads as k^T is; weights as weights^T is not)."""
    if out.numel() != value.numel() or out.dtype != value.dtype or value.dim() > 6:
        return False
    if tuple(value.shape) != tuple(stage.value.shape):
        return False
    flat = out.reshape(-1)
    for perm in itertools.permutations(range(value.dim())):
        permuted = value.permute(perm)
        if (coarsens(out.shape, permuted.shape) or coarsens(permuted.shape, out.shape)) and torch.equal(
            flat, permuted.reshape(-1)
        ):
            return sees(stage.value.permute(perm).reshape(out.shape), stage, sizes, tol)
    return False


def _right(stages, seen) -> set:
    """The stages seen, or with a later stage computed from them seen."""
    right = set(seen)
    children = {}
    for stage in stages:
        for parent in stage.parents:
            children.setdefault(parent, []).append(stage.name)
    changed = True
    while changed:
        changed = False
        for stage in stages:
            if stage.name not in right and any(child in right for child in children.get(stage.name, ())):
                right.add(stage.name)
                changed = True
    return right


def _ancestors(stages, stage) -> list:
    """The stages `stage` is computed from, directly or not: a value that is one of them is no
    candidate for `stage` (its relation to it would be innocent: the scores are the raw scores
    times a factor in every program)."""
    by_name = {s.name: s for s in stages}
    found, todo = {}, list(stage.parents)
    while todo:
        name = todo.pop()
        if name in by_name and name not in found:
            found[name] = by_name[name]
            todo += list(by_name[name].parents)
    return list(found.values())


def _has_form(candidates, stage) -> bool:
    return any(value.numel() == stage.value.numel() or value.shape == stage.value.shape for _, value in candidates)


def _place(ats, position):
    try:
        file, line = ats[position]
    except (TypeError, ValueError, IndexError):
        return None
    if isinstance(file, str) and isinstance(line, int) and file.endswith(".py") and len(file) < 200:
        return file, line
    return None


def _skipped(outputs, scenario, tol) -> list:
    """[(unit, its first stage)] of the operations whose leaving out gives the student's outputs."""
    found = []
    for unit, skip in scenario.skips.items():
        expected = skip["outputs"]
        if len(outputs) >= len(expected) and all(
            isinstance(got, torch.Tensor) and got.shape == want.shape and close(got.detach(), want, tol)
            for got, want in zip(outputs, expected, strict=False)
        ):
            found.append((unit, skip["first"]))
    return found


def choose(fits):
    """The one fit that names what happened, or None. A fit is named when it is the only one of
    its family and every other fit says no more than it does: a family it implies (GENERAL: a
    blocked set shifted by one is also "different only where the mask blocks"), or a more
    specific family whose fits are several (two shifts that are one cyclic map). Skipping one
    operation is preferred to skipping two. Two explanations of which neither implies the other
    name nothing: a wrong name is worse than none."""
    fits = list(dict.fromkeys(fits))
    skips = [f for f in fits if f.family == "skip"]
    singles = [f for f in skips if "+" not in f.get("unit", "")]
    if singles and len(singles) < len(skips):
        fits = [f for f in fits if f.family != "skip" or f in singles]
    order = {family: i for i, family in enumerate(SPECIFIC)}
    for best in sorted(fits, key=lambda f: order.get(f.family, len(order))):
        if sum(f.family == best.family for f in fits) > 1:
            continue
        if all(other is best or _says(best, other) for other in fits):
            return best
    return None


def _says(named, other) -> bool:
    """Whether naming `named` also says what `other` says (or more)."""
    if named.family in EXACT:
        return True
    return named.family in GENERAL.get(other.family, ()) or other.family in GENERAL.get(named.family, ())
