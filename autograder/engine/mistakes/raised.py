"""A run that raised, in the words of the computation: the call that raised, the shapes that met
there, each axis by its name ("(B, H, L_new, L)"), and for the one that fits no stage of the
reference, the stage's shape it most resembles: where they differ is the likely cause (a mask
(L_new, L_new) where (L_new, L) fits: a square mask while a cache holds earlier positions)."""

from autograder.engine.mistakes import relations


def described(raised, stages, sizes) -> tuple:
    """The parameters of a finding where the code raised: the exception, the call that raised,
    the shapes that met there with their axes named, and, for the one that fits no stage of the
    reference, the stage's shape it most resembles (where they differ is the likely cause)."""
    shapes = raised.get("shapes") if isinstance(raised.get("shapes"), list) else []
    dtypes = raised.get("dtypes") if isinstance(raised.get("dtypes"), list) else []
    shapes = [tuple(s) for s in shapes[:6] if isinstance(s, list) and all(isinstance(n, int) for n in s)]
    values = [(tuple(s.value.shape), s.axes) for s in stages]
    masks = [
        (tuple(m.shape), s.axes[len(s.axes) - m.dim() :])
        for s in stages
        for m in ([s.blocked] if s.blocked is not None else []) + list((s.parts or {}).values())
    ]
    named, odd = [], None
    for i, shape in enumerate(shapes):
        mask = i < len(dtypes) and dtypes[i] == "bool"
        expected = (masks or values) if mask else values
        like = next((axes for want, axes in expected if want == shape), None)
        if like is None and odd is None and not _broadcasts(shape, [want for want, _ in expected]):
            odd = shape, _closest(shape, expected, sizes)
        named.append(label_shape(shape, sizes, like or _closest(shape, expected, sizes)[1]))
    params = {
        "type": str(raised.get("type", "Exception"))[:60],
        "op": str(raised.get("op") or "")[:60],
        "shapes": ", ".join(named[:4]) or "-",
    }
    if odd is not None:
        shape, (want, axes) = odd
        params["odd"], params["wanted"] = label_shape(shape, sizes, axes), label_shape(want, sizes, axes)
    outside = raised.get("outside") if isinstance(raised.get("outside"), list) else []
    outside = [tuple(s) for s in outside if isinstance(s, list) and all(isinstance(n, int) for n in s)]
    if outside:  # a tensor the code was never given nor made in this run: kept from before
        params["outside"] = label_shape(outside[0], sizes, _closest(outside[0], values, sizes)[1])
    return tuple(sorted(params.items()))


def _broadcasts(shape, expected) -> bool:
    """A mask-like shape of ones and the expected sizes, right-aligned with one of `expected`."""
    for want in expected:
        if len(shape) <= len(want) and all(a in (1, b) for a, b in zip(reversed(shape), reversed(want), strict=False)):
            return True
    return False


def _closest(shape, expected, sizes=None):
    """The (shape, axes) of `expected` that `shape` most resembles, right-aligned: where they
    differ is the likely cause. An axis of another size but of the same kind (a length where a
    length belongs) differs less than one of another kind; of equals, the latest stage (a call
    that raises comes after the ones that ran)."""

    def distance(want, axes):
        total = abs(len(shape) - len(want))
        for position in range(1, min(len(shape), len(want)) + 1):
            got, size, label = shape[-position], want[-position], axes[-position] if position <= len(axes) else ""
            if got != size:
                kin = sizes and any(n == got and name[:1] == label[:1] for name, n in sizes.items())
                total += 0.5 if kin else 1
        return total

    ranked = [(distance(want, axes), -i) for i, (want, axes) in enumerate(expected)]
    return expected[-min(ranked)[1]]


def label_shape(shape, sizes, like=None) -> str:
    """(2, 4, 2, 7) as "(B, H, L_new, L)": each axis by the label `like` has at its place (right-
    aligned) where the size is that label's, else by the one label of its size (of the same kind:
    a length for a length), else by its number."""
    like = tuple(like or ())
    names = []
    for position, n in enumerate(shape):
        offset = len(shape) - position
        expected = like[-offset] if offset <= len(like) else None
        if expected is not None and sizes.get(expected) == n:
            names.append(expected)
            continue
        prefer = expected[:1] if expected else None
        name = relations._symbol_int(int(n), sizes, prefer) if prefer else str(n)
        if not name.isidentifier():
            name = relations._symbol_int(int(n), sizes)
        names.append(name)
    return "(" + ", ".join(names) + ")"
