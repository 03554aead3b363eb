"""General relations between a value the student's code computed and the reference's value of the
same stage, on the same inputs: what happened there, whatever the code looks like.

    fits = relate(got, stage, sizes, tol)     # [Fit("factor", (("c", 0.4472), ("name", "1/sqrt(5)")))]

Each family is a small transformation of the reference's value (or of the value the stage starts
from) that may reproduce the student's, tested within the step's tolerance:

    layout        the same numbers in another order of the axes (a permutation, or a view where a
                  transpose was needed), or in a layout the next operation cannot use
    factor        a constant factor (a sign, a scale)
    bias          a constant added along some axes (a missing or extra bias, a shifted row)
    masked_only   different only where the mask blocks a key; unmasked_only: only where it lets one through
    blocked       the blocked set is another set: a part left out, inverted, shifted, transposed, ...
    shift         shifted by k positions along an axis
    slice_map     every slice along an axis holds another slice's values (another batch element or
                  head; tiled instead of interleaved; one slice for all)
    softmax_axis  normalised over another axis
    length        k positions more or fewer along an axis (a prefix, a suffix)

A fit never needs the student's code, only values: the same relations hold however the code is
written. `relate` returns every family that fits; localise.py decides what a set of fits names
(one most specific family, or none when two different explanations fit equally well).

One module, though long: every family is a small function beside the others, in the order
`relate` tries them, with the helpers they share (closeness, labelled axes, naming numbers).
"""

import itertools
import math
from dataclasses import dataclass

import torch

from autograder.engine.checks.check import allowed_error

MAX_AXES = 6  # permutations of at most 6! orders


@dataclass(frozen=True)
class Fit:
    """A relation that reproduces the student's value: its family and parameters (plain values,
    sorted by name: two fits are the same when these are equal)."""

    family: str
    params: tuple = ()

    def get(self, name, default=None):
        return dict(self.params).get(name, default)


def fit(family, **params) -> Fit:
    return Fit(family, tuple(sorted(params.items())))


# ---------------------------------------------------------------------------- closeness


def close(got, expected, tol, where=None) -> bool:
    """True if float tensor `got` equals `expected` within the tolerance (NaN where both are NaN;
    infinities where both are the same), at the positions `where` (all by default)."""
    if got.shape != expected.shape:
        return False
    if not expected.is_floating_point():
        equal = got == expected
        return bool((equal if where is None else equal | ~where).all())
    got, expected = got.to(torch.float64), expected.to(torch.float64)
    same = (got == expected) | (torch.isnan(got) & torch.isnan(expected))
    finite = torch.isfinite(expected)
    bound = allowed_error(torch.where(finite, expected, torch.zeros_like(expected)), tol)
    near = ((got - expected).abs() <= bound) & finite & torch.isfinite(got)
    ok = same | near
    if where is not None:
        ok = ok | ~where
    return bool(ok.all())


def near(got, expected) -> bool:
    """A quick necessary condition for close(): within float32 rounding of the magnitudes, a
    bound no tolerance of the steps goes beyond (a filter before the exact test)."""
    if got.shape != expected.shape:
        return False
    if not expected.is_floating_point():
        return bool(torch.equal(got, expected.to(got.dtype)))
    a, b = got.to(torch.float64), expected.to(torch.float64)
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return True  # the exact test decides
    scale = b.abs().max().item() if b.numel() else 0.0
    return bool(((a - b).abs() <= 1e-4 * (b.abs() + scale) + 1e-8).all())


def _sorted_close(got, expected, tol) -> bool:
    """A cheap necessary condition for `got` being `expected` in another order: sorted, they are near."""
    a, b = got.flatten(), expected.flatten()
    if a.numel() != b.numel():
        return False
    if not expected.is_floating_point() or not got.is_floating_point():
        return got.dtype == expected.dtype and bool(torch.equal(a.sort().values, b.sort().values))
    return near(a.to(torch.float64).sort().values, b.to(torch.float64).sort().values)


def is_float(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point()


# ---------------------------------------------------------------------------- labelled axes


def fine(value, axes, splits, sizes):
    """(value, axes) with every axis that `splits` factorises cut into its factors: (B, L, D) with
    D -> (H, d_k) becomes (B, L, H, d_k)."""
    shape, labels = [], []
    for n, label in zip(value.shape, axes, strict=False):
        parts = splits.get(label)
        if parts and all(p in sizes for p in parts) and math.prod(sizes[p] for p in parts) == n:
            shape += [sizes[p] for p in parts]
            labels += list(parts)
        else:
            shape.append(n)
            labels.append(label)
    return value.reshape(shape), tuple(labels)


def coarsens(shape, fine_shape) -> bool:
    """True if `shape` is `fine_shape` with runs of neighbouring axes merged (axes of size 1
    ignored on both sides): a view that keeps every axis's meaning."""
    a = [n for n in shape if n != 1]
    b = [n for n in fine_shape if n != 1]
    i = 0
    for n in a:
        product = 1
        while i < len(b) and product < n:
            product *= b[i]
            i += 1
        if product != n:
            return False
    return i == len(b)


def orders(value, axes, splits, sizes, got, tol):
    """[(labels in the order the student's numbers follow, consistent?)] for each permutation of
    the reference's fine axes whose numbers, read flat, are the student's `got` read flat;
    consistent: `got`'s shape keeps the axes' meaning (merged neighbours at most)."""
    if got.numel() != value.numel() or not _sorted_close(got, value, tol):
        return []
    base, labels = fine(value, axes, splits, sizes)
    if base.dim() > MAX_AXES:
        return []
    flat = got.detach().flatten().to(base.dtype)
    head = flat[:16]
    found = []
    for perm in itertools.permutations(range(base.dim())):
        permuted = base.permute(perm)
        line = permuted.reshape(-1)
        if near(head, line[:16]) and close(flat, line, tol):
            found.append((tuple(labels[i] for i in perm), coarsens(tuple(got.shape), tuple(permuted.shape))))
    return found


# ---------------------------------------------------------------------------- families


def layout(got, stage, sizes, tol):
    """The stage's numbers in another order: Fit("layout", order=..., view=True) when the shape
    does not follow the order (a view or reshape where a transpose was needed); view=False when
    it does but the stage's contract needs another order (`stage.tails`, or `stage.fixed`)."""
    found = orders(stage.value, stage.axes, stage.splits, sizes, got, tol)
    fits = []
    expected = fine(stage.value, stage.axes, stage.splits, sizes)[1]
    for order, consistent in found:
        if consistent and acceptable(order, expected, stage):
            if stage.fixed and tuple(got.shape) != tuple(stage.value.shape):  # what the code returns: its shape too
                return [fit("shape", got=_label_text(tuple(str(n) for n in got.shape)), expected=_label_text(expected))]
            return []  # a representation of the right values: no relation
        params = {"order": _label_text(order), "expected": _label_text(expected), "view": not consistent}
        exchanged = [a for a, b in zip(order, expected, strict=False) if a != b]
        if len(exchanged) == 2:  # two axes swapped: said by name (the batch for the sequence, say)
            params["swapped"] = " ".join(sorted(exchanged))
        fits.append(fit("layout", **params))
    return fits[:1] if fits else []


def acceptable(order, expected, stage) -> bool:
    """Whether a consistent order of the stage's fine axes is as good as the reference's: the
    same, or (stage not fixed) its leading axes permuted with one of the stage's allowed tails last."""
    if tuple(order) == tuple(expected):
        return True
    if stage.fixed:
        return False
    for parts in stage.splits.values():  # a factored axis keeps the order of its factors (head = kv * n_rep + r)
        where = [order.index(p) for p in parts if p in order]
        if where != sorted(where):
            return False
    tails = stage.tails or ((),)
    return any(tuple(order[len(order) - len(tail) :]) == tuple(tail) for tail in tails if len(tail) <= len(order))


def factor(got, stage, sizes, tol):
    """got = c * value for a constant c other than 1."""
    value = stage.value.to(torch.float64)
    if got.shape != value.shape or not is_float(got):
        return []
    got = got.detach().to(torch.float64)
    finite = torch.isfinite(value) & torch.isfinite(got)
    if not finite.all():
        return []
    norm = float((value * value).sum())
    if norm <= 1e-12 * max(1, value.numel()):
        return []
    c = float((got * value).sum()) / norm
    if abs(c) < 1e-9 or close(got, value, tol) or not close(got, c * value, tol):
        return []
    if stage.scale:  # said as the student's own factor beside the expected one
        return [
            fit("factor", c=round(c, 6), name=symbol(c * stage.scale[0], sizes), expected=symbol(stage.scale[0], sizes))
        ]
    return [fit("factor", c=round(c, 6), name=symbol(c, sizes))]


def bias(got, stage, sizes, tol):
    """got - value is constant along some axes (the same vector added at every token, a constant
    added to every entry): the axes along which it varies."""
    value = stage.value.to(torch.float64)
    if got.shape != value.shape or not is_float(got) or value.dim() == 0:
        return []
    got = got.detach().to(torch.float64)
    if not (torch.isfinite(value).all() and torch.isfinite(got).all()) or close(got, value, tol):
        return []
    difference = got - value
    varies = []
    for axis in range(difference.dim()):
        if difference.shape[axis] > 1 and not close(
            value + difference.mean(axis, keepdim=True).expand_as(difference), got, tol
        ):
            varies.append(axis)
    rebuilt = value + difference.mean(dim=tuple(a for a in range(value.dim()) if a not in varies) or None, keepdim=True)
    if len(varies) == sum(n > 1 for n in difference.shape):
        return []  # varies along every axis that has more than one position: no constant was added
    if not close(got, rebuilt.expand_as(got), tol):
        return []
    return [fit("bias", along=_label_text(tuple(stage.axes[a] for a in varies)) if varies else "()")]


def masked(got, stage, sizes, tol):
    """Different only where the mask blocks (masked_only) or only where it lets keys through
    (unmasked_only)."""
    if stage.blocked is None or got.shape != stage.value.shape:
        return []
    blocked = stage.blocked.expand_as(stage.value)
    if not blocked.any() or blocked.all() or not is_float(got):
        return []
    if close(got, stage.value, tol, where=~blocked):
        if not close(got, stage.value, tol, where=blocked):
            fills = got.detach()[blocked].to(torch.float64)
            if torch.isfinite(fills).all() and close(fills, fills[:1].expand_as(fills), tol):
                # one value where the mask blocks (0, where the mask fills zeros): said, it tells two apart
                c = float(fills[0])
                return [fit("masked_only", fill="0" if c == 0 else symbol(c, sizes) or f"{c:.4g}")]
            return [fit("masked_only")]
    elif close(got, stage.value, tol, where=blocked):
        return [fit("unmasked_only")]
    return []


def blocked_set(got, stage, sizes, tol):
    """The student's blocked set (read from the values: a weight of 0, a very negative score) is
    not the reference's, and every value is what that other set gives: Fit("blocked", part=...,
    change=...) where one part of the reference's union of masks, changed in one way, explains it."""
    if stage.blocked is None or stage.kind not in ("masked", "weights", "mask"):
        return []
    if got.shape != stage.value.shape:
        return []
    if stage.kind == "mask":  # the blocked set itself
        theirs = got if got.dtype == torch.bool else None
    elif not is_float(got) or stage.source is None:
        return []
    else:
        theirs = blocked_of(got, stage.kind)
    shape = stage.value.shape
    ours = stage.blocked.expand(shape)
    if theirs is None or _explains(theirs, ours, torch.ones_like(ours), stage.kind):
        return []
    parts = stage.parts or {"mask": stage.blocked}
    fits = []
    for name, part in parts.items():
        others = torch.zeros(shape, dtype=torch.bool)
        for other, mask in parts.items():
            if other != name:
                others = others | mask.expand(shape)
        part = part.expand(shape)
        diagonal = (stage.diagonals or {}).get(name)
        changes = (
            diagonal_changes(part, diagonal, stage, sizes) if diagonal is not None else part_changes(part, stage, sizes)
        )
        simple = [
            change
            for change, changed, care in changes
            if any(  # what comes in at the edge: as the student's values say, or blocked
                _explains(theirs, full, torch.ones_like(full), stage.kind) and _values_with(got, full, stage, tol)
                for full in ((others | changed) & care | theirs & ~care, (others | changed) | ~care)
            )
        ]
        fits += [fit("blocked", part=name, change=change) for change in simple]
        mapped = _rows_from_other(theirs, others, part)
        if mapped is not None and not simple:
            mapping, changed = mapped
            # a map that gives what a simpler change gives is that change; its values must be what it gives
            if not any(torch.equal(changed & care, other & care) for _, other, care in changes) and _values_with(
                got, others | changed, stage, tol
            ):
                fits.append(fit("blocked", part=name, change="from_other_" + stage.axes[0], map=mapping))
    return fits


def _explains(theirs, blocked, care, kind) -> bool:
    """Whether the blocked set `blocked` is the one read from the student's values, where known
    (`care`; and for weights not in a row blocked whole: its weights may be anything finite)."""
    if kind == "weights":
        care = care & ~blocked.all(-1, keepdim=True)
    return not ((theirs ^ blocked) & care).any()


def _values_with(got, blocked, stage, tol) -> bool:
    """Whether `got` is what the stage gives with `blocked` as its blocked set: the scores where
    keys are let through (masked), or their softmax over the keys let through (weights)."""
    if stage.kind == "mask":
        return True
    source = stage.source.to(torch.float64)
    masked = source.masked_fill(blocked, torch.finfo(torch.float64).min)
    if stage.kind == "masked":
        return close(got, source, tol, where=~blocked)
    # a row blocked whole: what any very negative fill gives (equal weights), or NaN (-inf)
    whole = blocked.all(-1, keepdim=True).expand_as(got)
    nan = whole & torch.isnan(got)
    return close(got, torch.softmax(masked, dim=stage.axis), tol, where=~nan)


def blocked_of(got, kind):
    """Where a value blocks a key: a weight of (practically) 0; a score far below its row's
    largest, or below -1000 (a row blocked whole); None where that cannot be read."""
    got = got.detach().to(torch.float64)
    if kind == "weights":
        return got.abs() <= 1e-12
    finite = torch.where(torch.isfinite(got), got, torch.full_like(got, -math.inf))
    top = finite.amax(-1, keepdim=True)
    if torch.isnan(got).any():
        return None
    return (got == -math.inf) | (got < top - 60) | (got <= -1000)


def part_changes(part, stage, sizes):
    """[(change, the changed part, where it is known)]: the ways one part of a blocked set can go
    wrong. A shift moves the part along the keys: what comes in at the edge is not known (a
    causal mask shifted left blocks its last column too), so the edge is not compared. A change
    that gives the same set as an earlier one is left out (one name per set)."""
    everywhere = torch.ones_like(part)
    changes = [("left_out", torch.zeros_like(part), everywhere), ("inverted", ~part, everywhere)]
    n = part.shape[-1]
    prefer = stage.axes[part.dim() - 1][:1]
    for k in range(1, n):
        for step in (k, -k):
            shifted, care = torch.zeros_like(part), torch.ones_like(part)
            if step > 0:
                shifted[..., step:] = part[..., : n - step]
                care[..., :step] = False
            else:
                shifted[..., :step] = part[..., -step:]
                care[..., step:] = False
            changes.append((f"shift {_signed(step, sizes, prefer)}", shifted, care))
    if part.shape[-1] == part.shape[-2]:
        changes.append(("transposed", part.transpose(-1, -2), everywhere))
    kept = []
    for change, changed, care in changes:
        if not ((changed ^ part) & care).any():
            continue  # no change where it is known
        if not any(torch.equal(changed & care, other & care) for _, other, _ in kept):
            kept.append((change, changed, care))
    return kept


def diagonal_changes(part, diagonal, stage, sizes):
    """[(change, the changed part, where it is known)] of a causal part (key j of query i blocked
    where j > i + diagonal): left out, inverted, or its diagonal moved by k positions (off by one,
    the cached positions forgotten: said in lengths); exact at every position."""
    q_len, k_len = part.shape[-2], part.shape[-1]
    everywhere = torch.ones_like(part)
    changes = [("left_out", torch.zeros_like(part), everywhere), ("inverted", ~part, everywhere)]
    prefer = stage.axes[part.dim() - 1][:1]
    for k in range(-q_len - diagonal, k_len - diagonal):
        if k:
            moved = torch.ones(q_len, k_len, dtype=torch.bool).triu(diagonal + k + 1).expand_as(part)
            changes.append((f"shift {_signed(k, sizes, prefer)}", moved, everywhere))
    if q_len == k_len:
        changes.append(("transposed", part.transpose(-1, -2), everywhere))
    kept = []
    for change, changed, care in changes:
        if not torch.equal(changed, part) and not any(torch.equal(changed, other) for _, other, _ in kept):
            kept.append((change, changed, care))
    return kept


def _rows_from_other(theirs, others, part):
    """(said, the part so mapped) for the map (b, h) -> b' where every (b, h) slice of the student's blocked set is the other
    parts with batch element b''s part, when that is one b' each and not b itself everywhere;
    said as "tiled" (b' = (b * H + h) mod B), "interleaved" ((b * H + h) // H ... by head) or the map."""
    if part.dim() < 3:
        return None
    B, H = part.shape[0], part.shape[1]
    mapping = []
    for b in range(B):
        for h in range(H):
            sources = [c for c in range(B) if torch.equal(theirs[b, h], others[b, h] | part[c, h])]
            if not sources:
                return None
            mapping.append(b if b in sources else sources[0] if len(sources) == 1 else None)
    if None in mapping or mapping == [b for b in range(B) for _ in range(H)]:
        return None
    changed = torch.stack([torch.stack([part[mapping[b * H + h], h] for h in range(H)]) for b in range(B)])
    if all(mapping[b * H + h] == (b * H + h) % B for b in range(B) for h in range(H)):
        return "tiled", changed
    if all(mapping[b * H + h] == (h * B + b) // H for b in range(B) for h in range(H)):
        return "interleaved", changed
    return " ".join(map(str, mapping)), changed


def shift(got, stage, sizes, tol):
    """got[..., i, ...] = value[..., i - k, ...] along one axis (the edge aside), k != 0."""
    value = stage.value
    if got.shape != value.shape or got.dtype.is_floating_point != value.dtype.is_floating_point:
        return []
    fits = []
    for axis in range(value.dim()):
        n = value.shape[axis]
        for k in range(1, n - 1):
            for step in (k, -k):
                a = got.narrow(axis, step, n - step) if step > 0 else got.narrow(axis, 0, n + step)
                b = value.narrow(axis, 0, n - step) if step > 0 else value.narrow(axis, -step, n + step)
                if close(a, b, tol) and not close(got, value, tol):
                    label = stage.axes[axis]
                    fits.append(fit("shift", axis=label, by=_signed(step, sizes, label[:1])))
    return fits[:2] if len(fits) <= 2 else []


def slice_map(got, stage, sizes, tol):
    """Every slice along one axis holds the reference's slice of another index: {i: j}; said as
    "tiled", "one slice for all", "reversed", "rolled" or the map itself. Along an axis made of
    repeated groups (GQA's heads: each kv head n_rep times), the map is to the groups. An axis
    that factors (D into H, d_k) is looked at in its factors first: the heads of D reversed is
    said along H."""
    if got.shape != stage.value.shape:
        return []
    value, axes = fine(stage.value, stage.axes, stage.splits, sizes)
    if value.dim() != stage.value.dim():
        finer = _slice_map(got.reshape(value.shape), value, axes, stage, sizes, tol)
        if finer:
            return finer
    return _slice_map(got, stage.value, stage.axes, stage, sizes, tol)


def _slice_map(got, value, axes, stage, sizes, tol):
    fits = []
    for axis in range(value.dim()):
        n = value.shape[axis]
        label = axes[axis]
        if n < 2 or label in stage.no_map:
            continue
        group = sizes.get((stage.groups or {}).get(label), 1)
        mapping = []
        for i in range(n):
            here = got.select(axis, i)
            sources = {j // group for j in range(n) if close(here, value.select(axis, j), tol)}
            if len(sources) != 1:
                mapping = None
                break
            mapping.append(sources.pop())
        if mapping is None or mapping == [i // group for i in range(n)]:
            continue
        fits.append(fit("slice_map", axis=label, map=describe_map(mapping, n // group)))
    return fits


def describe_map(mapping, count) -> str:
    """A map of slices (or of groups, `count` of them) in words the catalog says."""
    n = len(mapping)
    if len(set(mapping)) == 1:
        return f"all={mapping[0]}"
    if count < n:  # groups: tiled where each group's copies must sit together
        if all(mapping[i] == i % count for i in range(n)):
            return "tiled"
        return "from " + " ".join(str(j) for j in mapping)
    if mapping == list(reversed(range(n))):
        return "reversed"
    for k in range(1, n):
        if all(mapping[i] == (i + k) % n for i in range(n)):
            return f"rolled {k}"
    if sorted(mapping) == list(range(n)):
        return "permuted " + " ".join(str(j) for j in mapping)
    return "from " + " ".join(str(j) for j in mapping)


def softmax_axis(got, stage, sizes, tol):
    """Normalised over another axis than the reference's: softmax(source, dim=a)."""
    if stage.kind != "weights" or stage.source is None or got.shape != stage.value.shape or not is_float(got):
        return []
    source = stage.source.to(torch.float64)
    if stage.blocked is not None:
        source = source.masked_fill(stage.blocked, torch.finfo(torch.float64).min)
    fits = []
    # where keys are blocked, the fill decides what another axis's softmax gives (-inf: NaN): not compared
    free = torch.ones_like(source, dtype=torch.bool) if stage.blocked is None else ~stage.blocked.expand_as(source)
    for axis in range(source.dim()):
        if axis == stage.axis % source.dim() or source.shape[axis] < 2:
            continue
        candidate = torch.softmax(source, dim=axis)
        if close(got, candidate, tol, where=free & torch.isfinite(candidate)):
            fits.append(fit("softmax_axis", axis=stage.axes[axis]))
    return fits


def length(got, stage, sizes, tol):
    """k positions more or fewer along one axis: the student's value is the start or the end of
    the reference's along it (or the reference's is the start or end of theirs)."""
    value = stage.value
    if got.dim() != value.dim() or got.dtype.is_floating_point != value.dtype.is_floating_point:
        return []
    differ = [a for a in range(value.dim()) if got.shape[a] != value.shape[a]]
    if len(differ) != 1:
        return []
    axis = differ[0]
    short, long_, fewer = (got, value, True) if got.shape[axis] < value.shape[axis] else (value, got, False)
    n, m = short.shape[axis], long_.shape[axis]
    if n == 0:
        return []
    fits = []
    for where, start in (("start", 0), ("end", m - n)):
        if (
            close(short, long_.narrow(axis, start, n), tol)
            if fewer
            else close(long_.narrow(axis, start, n), short, tol)
        ):
            label = stage.axes[axis]
            count, of = _symbol_int(n, sizes, label[:1]), _symbol_int(m, sizes, label[:1])
            fits.append(fit("length", axis=label, kept=where, count=count, of=of, fewer=fewer))
    return fits[:1] if len(fits) == 1 else []


def other_input(got, stage, sizes, tol):
    """The stage computed from another input than its own (the keys from the query, the scores
    from the value heads): Fit("other_input", replaced=..., by=...)."""
    fits = []
    for label, alternative in (stage.others or {}).items():
        if got.shape == alternative.shape and close(got, alternative, tol):
            if label.startswith("skip:"):  # the stage's value had an operation before it been left out
                fits.append(fit("skip", unit=label.removeprefix("skip:")))
            elif "=" in label and ":" not in label:
                replaced, by = label.split("=", 1)
                fits.append(fit("other_input", replaced=replaced, by=by))
            else:  # "<what>:<how>": an alternative the assignment's catalog says (`other.<label>`)
                fits.append(fit("other_input", label=label))
    return fits


FAMILIES = (layout, factor, bias, masked, blocked_set, shift, slice_map, softmax_axis, length, other_input)


def relate(got, stage, sizes, tol) -> list:
    """Every Fit of the families above between the student's `got` and the stage's reference value."""
    if not isinstance(got, torch.Tensor):
        return []
    found = []
    for family in FAMILIES:
        try:
            found += family(got.detach(), stage, sizes, tol)
        except Exception:  # noqa: BLE001 - values the student's code made: unreadable is no fit
            continue
    if any(f.family == "layout" for f in found):  # a map with no name of its own is said better as axes
        found = [
            f for f in found if not (f.family == "slice_map" and f.get("map", "").startswith(("permuted", "from")))
        ]
    return list(dict.fromkeys(found))


# ---------------------------------------------------------------------------- naming numbers


def _label_text(labels) -> str:
    return "(" + ", ".join(labels) + ")"


def _symbol_int(n, sizes, prefer=None) -> str:
    """An integer by the name of the one size it equals ("L_past"), or of the one difference of
    two sizes ("Lk-Lq"), among the labels starting with `prefer` where given (a shift along a
    sequence axis is said in sequence lengths); by itself where none or several fit."""
    labels = {label: size for label, size in sizes.items() if prefer is None or label.startswith(prefer)}
    names = [label for label, size in labels.items() if size == n]
    if not names and prefer is not None:
        names = [f"{a}-{b}" for a, x in labels.items() for b, y in labels.items() if a != b and x - y == n]
    return names[0] if len(names) == 1 else str(n)


def _signed(k, sizes, prefer=None) -> str:
    name = _symbol_int(abs(k), sizes, prefer) if abs(k) != 1 else "1"
    return ("+" if k > 0 else "-") + name


def symbol(x, sizes, limit=1e-6):
    """A factor by the one simple expression it equals: a constant ("-1", "1/2"), else one of the
    sizes ("1/sqrt(d_model)", "sqrt(d_k)", "d_k/2"); None where none fits, or several sizes do."""
    if not math.isfinite(x) or x == 0:
        return None
    sign = "-" if x < 0 else ""
    magnitude = abs(x)
    for name, v in (("1", 1.0), ("2", 2.0), ("1/2", 0.5)):
        if abs(magnitude - v) <= limit * v:
            return sign + name
    found = set()
    for label, size in sizes.items():
        if size <= 1:
            continue
        forms = (  # (the factor's name, its value, its reciprocal's name)
            (label, size, f"1/{label}"),
            (f"sqrt({label})", math.sqrt(size), f"1/sqrt({label})"),
            (f"{label}/2", size / 2, f"2/{label}"),
            (f"2*{label}", 2.0 * size, f"1/(2*{label})"),
        )
        for name, v, reciprocal in forms:
            if abs(magnitude - v) <= limit * v:
                found.add(name)
            if abs(magnitude - 1 / v) <= limit / v:
                found.add(reciprocal)
    return sign + found.pop() if len(found) == 1 else None
