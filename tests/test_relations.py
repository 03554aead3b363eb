"""The general relations (engine/mistakes/relations.py) and how a set of fits names one (localise.choose).

Generated, not listed: a random stage value with labelled axes of distinct sizes, a relation
applied to it with random parameters, and the fits must name that relation with those
parameters; a value with no relation to the stage (noise) fits none; where two different
relations reproduce the value equally well, nothing is named.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine.mistakes import relations
from autograder.engine.mistakes.localise import choose
from autograder.engine.mistakes.scenario import Stage

TOL = {torch.float64: (1e-7, 1e-9), torch.float32: (1e-4, 1e-5)}
SIZES = {"B": 2, "H": 3, "L": 4, "d": 5}
AXES = ("B", "H", "L", "d")
FAST = settings(max_examples=8, deadline=None)


def value(seed, shape=(2, 3, 4, 5)):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def named(got, stage, sizes=SIZES):
    return choose(relations.relate(got, stage, sizes, TOL))


@FAST
@given(seed=st.integers(0, 10_000), c=st.floats(-4, 4).filter(lambda c: abs(c) > 0.05 and abs(c - 1) > 0.05))
def test_a_constant_factor_is_named_with_its_value(seed, c):
    stage = Stage("s", value(seed), AXES)
    found = named(c * stage.value, stage)
    assert (found.family, found.get("c")) == ("factor", round(c, 6))


def test_a_factor_is_said_by_the_sizes_it_is_made_of():
    stage = Stage("scores", value(1), AXES, scale=(1 / math.sqrt(5),))
    found = named(stage.value * math.sqrt(5) / math.sqrt(15), stage, {**SIZES, "D": 15})
    assert (found.get("name"), found.get("expected")) == ("1/sqrt(D)", "1/sqrt(d)")


@FAST
@given(seed=st.integers(0, 10_000), perm=st.permutations(range(4)))
def test_a_view_where_a_transpose_was_needed_is_named_with_its_order(seed, perm):
    stage = Stage("s", value(seed), AXES)
    got = stage.value.permute(*perm).reshape(stage.value.shape)  # the numbers in another order
    found = named(got, stage)
    if list(perm) == [0, 1, 2, 3]:
        assert found is None
    else:
        assert (found.family, found.get("view")) == ("layout", True)
        assert found.get("order") == "(" + ", ".join(AXES[i] for i in perm) + ")"


@FAST
@given(seed=st.integers(0, 10_000), perm=st.permutations(range(4)))
def test_a_permuted_layout_is_no_mistake_where_the_stage_allows_it(seed, perm):
    """A (H, B, L, d) layout of (B, H, L, d) heads is a representation, not a relation, unless
    the stage fixes its layout (an output) or needs (L, d) last (a matmul's operand)."""
    base = value(seed)
    got = base.permute(*perm)
    free = Stage("s", base, AXES)
    fixed = Stage("s", base, AXES, fixed=True)
    tailed = Stage("s", base, AXES, tails=(("L", "d"),))
    assert named(got, free) is None
    keeps_tail = tuple(AXES[i] for i in perm)[-2:] == ("L", "d")
    assert (named(got, tailed) is None) == keeps_tail
    if list(perm) != [0, 1, 2, 3]:
        assert (named(got, fixed).family, named(got, fixed).get("view")) == ("layout", False)


@FAST
@given(seed=st.integers(0, 10_000), axis=st.integers(0, 3), data=st.data())
def test_a_map_of_slices_is_named_with_the_map(seed, axis, data):
    stage = Stage("s", value(seed), AXES)
    n = stage.value.shape[axis]
    perm = data.draw(st.permutations(range(n)).filter(lambda p: list(p) != list(range(n))))
    got = stage.value.index_select(axis, torch.tensor(perm))
    found = named(got, stage)
    assert (found.family, found.get("axis")) == ("slice_map", AXES[axis])
    rolled = [k for k in range(1, n) if all(p == (i + k) % n for i, p in enumerate(perm))]
    if rolled and n > 2:  # (of two slices, swapped is said as reversed)
        assert found.get("map") == f"rolled {rolled[0]}"


def test_one_slice_for_all_and_tiled_groups_are_said_as_such():
    kv = value(3, (2, 2, 4, 5))  # (B, H_kv, L, d)
    stage = Stage("k", kv.repeat_interleave(3, dim=1), ("B", "H", "L", "d"), groups={"H": "n_rep"})
    sizes = {"B": 2, "H_kv": 2, "n_rep": 3, "H": 6, "L": 4, "d": 5}
    assert named(kv.repeat(1, 3, 1, 1), stage, sizes).get("map") == "tiled"
    first = stage.value[:, :1].expand_as(stage.value)
    assert named(first, stage, sizes).get("map") == "all=0"


@FAST
@given(seed=st.integers(0, 10_000), axis=st.integers(2, 3), k=st.integers(1, 2), sign=st.sampled_from([1, -1]))
def test_a_shift_along_an_axis_is_named_with_its_amount(seed, axis, k, sign):
    stage = Stage("s", value(seed), AXES)
    got = torch.roll(stage.value, sign * k, dims=axis)
    n = stage.value.shape[axis]
    edge = torch.randn_like(got.narrow(axis, 0 if sign > 0 else n - k, k))
    got.narrow(axis, 0 if sign > 0 else n - k, k).copy_(edge)  # the edge: anything
    found = named(got, stage)
    assert (found.family, found.get("axis"), found.get("by")) == ("shift", AXES[axis], f"{'+' if sign > 0 else '-'}{k}")


@FAST
@given(seed=st.integers(0, 10_000), along=st.sampled_from(["d", "L"]))
def test_a_constant_added_along_the_other_axes_is_a_bias(seed, along):
    stage = Stage("s", value(seed), AXES)
    axis = AXES.index(along)
    shape = [1, 1, 1, 1]
    shape[axis] = stage.value.shape[axis]
    got = stage.value + value(seed + 1, tuple(shape))
    found = named(got, stage)
    assert (found.family, found.get("along")) == ("bias", f"({along})")


@FAST
@given(seed=st.integers(0, 10_000), keep=st.integers(1, 3), where=st.sampled_from(["start", "end"]))
def test_fewer_positions_are_named_with_the_ones_kept(seed, keep, where):
    stage = Stage("s", value(seed), AXES)
    got = stage.value[:, :, :keep] if where == "start" else stage.value[:, :, 4 - keep :]
    found = named(got, stage)
    assert (found.family, found.get("axis"), found.get("kept"), found.get("fewer")) == ("length", "L", where, True)


def scores_stage(seed, blocked, parts):
    scores = value(seed, (2, 3, 4, 4))
    masked = scores.masked_fill(blocked, torch.finfo(torch.float64).min)
    axes = ("B", "H", "Lq", "Lk")
    masked_stage = Stage("masked", masked, axes, kind="masked", blocked=blocked, parts=parts, source=scores)
    weights_stage = Stage(
        "weights", torch.softmax(masked, -1), axes, kind="weights", blocked=blocked, parts=parts, source=scores
    )
    return scores, masked_stage, weights_stage


def masks():
    padding = torch.tensor([[False] * 4, [False, False, True, True]])[:, None, None, :]  # (B, 1, 1, Lk)
    causal = torch.ones(4, 4, dtype=torch.bool).triu(1)
    return padding, causal


@pytest.mark.parametrize(
    "change,student_parts",
    [
        ("left_out", lambda p, c: {"causal": c}),
        ("inverted", lambda p, c: {"padding": ~p, "causal": c}),
        ("shift -1", lambda p, c: {"padding": p, "causal": torch.ones(4, 4, dtype=torch.bool).triu(0)}),
        ("shift +1", lambda p, c: {"padding": p, "causal": torch.ones(4, 4, dtype=torch.bool).triu(2)}),
        ("transposed", lambda p, c: {"padding": p.transpose(-1, -2), "causal": c}),
    ],
)
@pytest.mark.parametrize("kind", ["masked", "weights"])
@pytest.mark.parametrize("fill", [torch.finfo(torch.float64).min, -1e9, float("-inf")])
def test_a_changed_part_of_the_mask_is_named_whatever_the_fill(change, student_parts, kind, fill):
    """Read from the values (a weight of 0, a very negative score), the student's blocked set is
    the reference's union of masks with one part changed; any fill with the same effect is the
    same observation (-inf where no row is blocked whole, -1e9, the dtype's minimum)."""
    padding, causal = masks()
    theirs = student_parts(padding, causal)
    blocked = torch.zeros(2, 1, 4, 4, dtype=torch.bool)
    for part in theirs.values():
        blocked = blocked | part
    scores, masked_stage, weights_stage = scores_stage(7, padding | causal, {"padding": padding, "causal": causal})
    got = scores.masked_fill(blocked, fill)
    stage = masked_stage
    if kind == "weights":
        got, stage = torch.softmax(got, -1), weights_stage
        if not torch.isfinite(got).all():
            pytest.skip("a row blocked whole gives NaN with -inf: another mistake")
    found = named(got, stage, {"B": 2, "H": 3, "L": 4})
    ours = {"padding": padding, "causal": causal}
    part = next(name for name in ours if name not in theirs or not torch.equal(theirs[name], ours[name]))
    assert (found.family, found.get("part"), found.get("change")) == ("blocked", part, change)


def test_a_mask_from_another_batch_element_is_named_with_its_map():
    padding, causal = masks()
    scores, masked_stage, _ = scores_stage(11, padding | causal, {"padding": padding, "causal": causal})
    # heads folded into the batch, the mask tiled over them: row b * H + h gets sample (b * H + h) mod B's
    tiled = padding[torch.tensor([(b * 3 + h) % 2 for b in range(2) for h in range(3)])].reshape(2, 3, 1, 4)
    got = scores.masked_fill(tiled | causal, torch.finfo(torch.float64).min)
    found = named(got, masked_stage, {"B": 2, "H": 3, "L": 4})
    assert (found.family, found.get("change"), found.get("map")) == ("blocked", "from_other_B", "tiled")


@FAST
@given(seed=st.integers(0, 10_000), axis=st.sampled_from([1, 2]))
def test_a_softmax_over_another_axis_is_named_with_the_axis(seed, axis):
    padding, causal = masks()
    scores, _, weights_stage = scores_stage(seed, padding | causal, {"padding": padding, "causal": causal})
    masked = scores.masked_fill(padding | causal, torch.finfo(torch.float64).min)
    found = named(torch.softmax(masked, dim=axis), weights_stage, {"B": 2, "H": 3, "L": 4})
    assert (found.family, found.get("axis")) == ("softmax_axis", ("B", "H", "Lq", "Lk")[axis])


@FAST
@given(seed=st.integers(0, 10_000))
def test_values_with_no_relation_to_the_stage_name_nothing(seed):
    stage = Stage("s", value(seed), AXES)
    assert relations.relate(value(seed + 1), stage, SIZES, TOL) == []
    assert relations.relate(stage.value.clone(), stage, SIZES, TOL) == []  # the right values: no relation


def test_two_relations_that_fit_equally_well_name_neither():
    """A batch whose second element is minus its first: the student's value is both the
    reference times -1 and its batch elements swapped. Two explanations: no name."""
    first = value(5, (1, 3, 4, 5))
    stage = Stage("s", torch.cat([first, -first]), AXES)
    fits = relations.relate(-stage.value, stage, SIZES, TOL)
    assert {f.family for f in fits} >= {"factor", "slice_map"}
    assert choose(fits) is None


def test_a_more_specific_relation_is_named_over_the_general_one_it_implies():
    """A blocked set shifted by one is also "different only where the mask blocks": the shift
    is named; a relation and a general one it does not imply name nothing."""
    blocked_shift = relations.fit("blocked", part="causal", change="shift -1")
    assert choose([relations.fit("masked_only"), blocked_shift]) == blocked_shift
    factor = relations.fit("factor", c=2.0)
    assert choose([relations.fit("masked_only"), factor]) == factor  # where it differs, said by how
    assert choose([relations.fit("slice_map", axis="B", map="reversed"), factor]) is None
    skipped = relations.fit("skip", unit="scale")
    assert choose([relations.fit("factor", c=2.236068), skipped]) == skipped


def test_symbols_name_a_number_only_when_one_expression_fits():
    sizes = {"d_k": 5, "D": 15, "H": 3}
    assert relations.symbol(1 / math.sqrt(15), sizes) == "1/sqrt(D)"
    assert relations.symbol(-1.0, sizes) == "-1"
    assert relations.symbol(0.123456, sizes) is None
    assert relations.symbol(3.0, {"H": 3, "L": 3}) is None  # two sizes of 3: either could be meant
