"""No double charge (issue 22): a planted mistake loses points in its own step only.

For every planted mistake (tests/planted.py: PLANTED and REAL_BUGS; the first knob setting of
every mistake in autograder/assignments/*/mistakes/), tests/collateral.py measures the steps
that lose points besides its own. The rules asserted, each per mistake:

* no step outside the integration steps (multi_head_attention and cuda; decoder in kv_cache)
  loses points for another step's mistake;
* no step at all does for a mistake of an earlier (non-integration) step: the integration steps
  judge the earlier steps' functions as correct (issue 22, "No double charge, as a rule of the
  engine"), the cuda step's scenarios of an exception raised on both devices aside (below);
* the cuda step loses points only for its own (device) mistakes: it judges the device, not the
  values other steps judge; and for an exception raised on both devices (it agrees only on
  values: nothing shows the device), with that exception named;
* catalog mistakes: the model package (mistakes/model.py) applies a knob wherever it computes that
  part, as a submission whose module calls its own earlier functions does; for a mistake of an
  earlier step the integration steps must not lose points. (Steps outside the integration ones
  are not asserted there: one knob can stand for code in two files, the merge in heads.py and in
  output.py, say, which a student's single mistake would not touch.)

The mistakes that break a rule today are expected failures (xfail, strict), listed below with
what they lost on seed 20261121. A fix that removes a collateral loss turns its case into an
XPASS, which fails: take it off the list. `pytest tests/test_collateral.py -s -m ""` prints the
table. Slow (about 250 gradings): CI runs it (pytest -m "").
"""

import pytest

from collateral import HEADER, INTEGRATION_STEPS, catalog_variants, measure_catalog, measure_planted
from planted import PLANTED, REAL_BUGS

pytestmark = pytest.mark.slow

# Measured today (seed 20261121), what each lost besides its own step.
OUTSIDE_TODAY = {}
INTEGRATION_TODAY = {
    **OUTSIDE_TODAY,
    "causal_ignores_device": "cuda 4.29/5",
}
CUDA_TODAY = {
    "causal_ignores_device": "cuda 4.29/5 (a masking.py device mistake, judged in masking too)",
}
CATALOG_INTEGRATION_TODAY = {
    "mha:scale_by_d_model": "multi_head_attention 0.53/10.00",
    "mha:no_scale": "multi_head_attention 0.53/10.00",
    "mha:scale_not_sqrt": "multi_head_attention 0.53/10.00",
    "mha:scale_inverted": "multi_head_attention 0.53/10.00",
    "mha:scale_after_softmax": "multi_head_attention 0.53/10.00",
    # the model applies these knobs in the module's own attention too (as its siblings above)
    "mha:scale_precedence": "multi_head_attention (the model's module scales the same way)",
    "mha:scale_by_num_heads": "multi_head_attention (the model's module scales the same way)",
    "mha:mask_fill_positive": "multi_head_attention (the model's module fills the same way)",
    "mha:heads_summed": "multi_head_attention; cuda (the model's module sums the heads too)",
    "mha:softmax_wrong_dim": "multi_head_attention 0.53/10.00",
    "mha:k_not_transposed": "cuda 4.29/5.00",
    "mha:mask_fill_zero": "multi_head_attention 4.21/10.00",
    "mha:mask_after_softmax": "multi_head_attention 4.21/10.00",
    "mha:mask_added": "multi_head_attention 4.21/10.00",
    "mha:mask_ignored": "multi_head_attention 4.21/10.00",
    "mha:fully_masked_nan": "multi_head_attention 9.47/10.00",
    "mha:causal_ignores_device": "cuda 4.29/5.00",
    "mha:out_no_merge_transpose": "multi_head_attention 0.53/10.00",
    "mha:out_merge_interleaved": "multi_head_attention 0.53/10.00",
    "mha:out_merge_view_not_contiguous": "multi_head_attention 0.00/10.00; cuda 2.14/5.00",
    "mha:out_missing_bias": "multi_head_attention 0.53/10.00; cuda 2.14/5.00",
    "mha:out_bias_always_on": "multi_head_attention 9.47/10.00",
    "mha:qkv_shared_weight": "multi_head_attention 0.00/10.00",
    "mha:qkv_bias_always_on": "multi_head_attention 9.47/10.00",
    "mha:split_without_transpose": "multi_head_attention 0.53/10.00",
    "mha:split_interleaved": "multi_head_attention 0.53/10.00",
    "mha:split_one_slice": "multi_head_attention 0.53/10.00",
    "mha:merge_without_transpose": "multi_head_attention 0.53/10.00",
    "mha:merge_interleaved": "multi_head_attention 0.53/10.00",
    "mha:merge_view_not_contiguous": "multi_head_attention 0.00/10.00; cuda 2.14/5.00",
    "kv_cache:kv_heads_tiled": "decoder 2.67/20.00",
    "kv_cache:kv_repeated_on_wrong_axis": "decoder 2.67/20.00",
    "kv_cache:gqa_no_scale": "decoder 1.33/20.00",
    "kv_cache:gqa_mask_ignored": "decoder 5.33/20.00",
    "kv_cache:decode_positions_restart": "decoder 5.33/20.00",
    "kv_cache:decode_offset_off_by_one": "decoder 5.33/20.00",
    "kv_cache:gqa_kv_not_repeated": "decoder 17.50/20.00 (the model's module does not repeat either)",
}

SOURCE = [p for p in PLANTED if not p.needs_check] + REAL_BUGS
CATALOG = [
    (assignment, step, mistake, knobs)
    for assignment in ("mha", "kv_cache")
    for step, mistake, index, knobs in catalog_variants(assignment)
    if index == 0 and step not in INTEGRATION_STEPS
]


def cases(mistakes, today):
    return [
        pytest.param(m, marks=[pytest.mark.xfail(strict=True, reason=today[m.name])] if m.name in today else [])
        for m in mistakes
    ]


@pytest.fixture(scope="module")
def measured(config, tmp_path_factory):
    """planted mistake name -> Measure, graded once for the module."""
    root = tmp_path_factory.mktemp("collateral")
    return {mistake.name: measure_planted(mistake, config, root / "submission") for mistake in SOURCE}


@pytest.fixture(scope="module")
def measured_catalog():
    return {
        f"{assignment}:{mistake.id}": measure_catalog(assignment, step, mistake, 0, knobs)
        for assignment, step, mistake, knobs in CATALOG
    }


@pytest.mark.parametrize("mistake", cases(SOURCE, OUTSIDE_TODAY), ids=lambda m: m.name)
def test_no_collateral_outside_the_integration_steps(measured, mistake):
    assert measured[mistake.name].outside_integration() == []


@pytest.mark.parametrize(
    "mistake", cases([m for m in SOURCE if m.step not in INTEGRATION_STEPS], INTEGRATION_TODAY), ids=lambda m: m.name
)
def test_no_collateral_at_all_for_an_earlier_step(measured, mistake):
    assert beyond_raising(measured[mistake.name]) == []


def beyond_raising(measure) -> list:
    """The collateral steps but the cuda step where all it charged is an exception raised on both
    devices (failed_on_both_devices): it agrees only on values (issue 31)."""
    raised = measure.failed.get("cuda") and all(m == "failed_on_both_devices" for m, _ in measure.failed["cuda"])
    return [step for step in measure.collateral if not (step == "cuda" and raised)]


@pytest.mark.parametrize("mistake", cases([m for m in SOURCE if m.step != "cuda"], CUDA_TODAY), ids=lambda m: m.name)
def test_cuda_step_charges_only_device_mistakes(measured, mistake):
    measure = measured[mistake.name]
    if "cuda" in measure.collateral:
        raised = [message_id == "failed_on_both_devices" for message_id, _ in measure.failed["cuda"]]
        assert raised and all(raised), measure.failed["cuda"]


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(
            f"{a}:{m.id}",
            marks=[pytest.mark.xfail(strict=True, reason=CATALOG_INTEGRATION_TODAY[f"{a}:{m.id}"])]
            if f"{a}:{m.id}" in CATALOG_INTEGRATION_TODAY
            else [],
        )
        for a, _, m, _ in CATALOG
    ],
)
def test_catalog_mistake_costs_no_integration_step(measured_catalog, key):
    measure = measured_catalog[key]
    assert [step for step in measure.collateral if step in INTEGRATION_STEPS] == []


def test_collateral_table(measured, measured_catalog, capsys):
    """The measure, one row per planted mistake (run with -s to see it)."""
    with capsys.disabled():
        print("\n" + HEADER)
        print("\n".join(m.row() for m in measured.values()))
        print("\ncatalog mistakes (first knob setting), the model package applying the knob everywhere")
        print("\n".join(f"{key.split(':')[0]}:{m.row()}" for key, m in measured_catalog.items()))
        for title, table in (("source", list(measured.values())), ("catalog", list(measured_catalog.values()))):
            print(
                f"{title}: {len(table)} mistakes; collateral outside the integration steps: "
                f"{sum(bool(m.outside_integration()) for m in table)}; any collateral: "
                f"{sum(bool(m.collateral) for m in table)}; maxima moved: {sum(bool(m.moved_maxima) for m in table)}"
            )
    assert len(measured) == len(SOURCE)
