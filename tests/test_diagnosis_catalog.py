"""The diagnosis catalog: the ids the course promises exist, and every id has a message."""
import pytest

from autograder import messages
from autograder.checks import step_modules
from autograder.mistakes import mistakes_of

# Ids the diagnosis issue makes a public contract, by step. (cpu_tensor_in_forward and
# mask_not_buffer of the cuda step come with the simulated CUDA device.)
PROMISED = {
    "padding": ["pad_mutates_input", "pad_mask_inverted", "pad_left", "pad_no_truncate"],
    "embedding": ["embedding_no_padding_idx"],
    "qkv_projection": ["qkv_shared_weight", "qkv_fused_split_per_head", "qkv_wrong_order"],
    "split_heads": ["split_without_transpose", "merge_without_transpose"],
    "attention": ["scale_by_d_model", "no_scale", "scale_not_sqrt", "softmax_wrong_dim", "k_not_transposed"],
    "masking": ["mask_fill_zero", "mask_after_softmax", "mask_inverted", "mask_on_queries",
                "causal_includes_diagonal", "causal_wrong_direction", "fully_masked_nan"],
    "output_projection": ["out_no_merge_transpose", "out_missing_bias"],
    "multi_head_attention": ["out_missing_bias", "dropout_in_eval", "mha_causal_ignored", "mha_pad_mask_ignored"],
}


def known_ids(step):
    module = step_modules()[step]
    return {m.id for m in mistakes_of(step)} | {p.diagnosis for p in module.PROBES}


def test_every_promised_diagnosis_exists():
    missing = {step: sorted(set(ids) - known_ids(step)) for step, ids in PROMISED.items()}
    assert {step: ids for step, ids in missing.items() if ids} == {}


def test_every_diagnosis_has_a_message():
    ids = {"no_known_mistake"} | {i for step in step_modules() for i in known_ids(step)}
    catalog = messages.CATALOG["en"]
    assert sorted(i for i in ids if f"diagnosis.{i}" not in catalog) == []


def test_every_diagnosis_message_is_one_line():
    """The release drops the messages of hidden-only mistakes line by line (release.student_messages)."""
    import inspect
    source = inspect.getsource(messages)
    for key in messages.CATALOG["en"]:
        if key.startswith("diagnosis."):
            assert f'"{key}": "' in source, f"{key}: keep it on one line"


def test_the_model_without_knobs_passes_every_check(config):
    """A mistake is a change from the model; unchanged, the model must be the reference."""
    from autograder.mistakes.model import package
    from autograder.runner import check_inputs, check_seed, expectation, judge, load_reference, observe
    from conftest import SOLUTIONS

    reference, model = load_reference(SOLUTIONS), package()
    for step in config.steps:
        for check in step_modules()[step.id].CHECKS:
            inputs = check_inputs(check, check_seed(check, 7))
            if check.requires == "cuda":
                inputs["mode"] = "simulated"
            fail = judge(check, inputs, observe(check, model, inputs), expectation(check, inputs, reference), step.tolerance)
            assert fail is None, f"{step.id}::{check.id}: {fail}"


def test_every_mistake_variant_fails_a_check_of_its_step():
    """A variant that passes every check could never be named, and would name correct code."""
    from autograder import fingerprints
    shown = {v.split("#")[0] for step in fingerprints.load()["steps"].values() for groups in step["checks"].values()
             for group in groups for v in group["variants"]}
    hidden_only = {"causal_ignores_device"}  # its check needs 'meta' triu: hidden (see checks/masking.py)
    catalog = {m.id for step in step_modules() for m in mistakes_of(step)}
    assert catalog - shown == hidden_only


def test_fingerprints_are_up_to_date_fast():
    """The sources the fingerprints are made from are the ones they were made from; else run
    `python -m autograder fingerprints` (the slow test below regenerates and compares)."""
    from autograder import fingerprints
    assert fingerprints.load().get("sources") == fingerprints.sources_digest(), \
        "run `python -m autograder fingerprints`"


@pytest.mark.slow
def test_fingerprints_are_up_to_date():
    import subprocess
    import sys

    from conftest import KIT
    completed = subprocess.run([sys.executable, "-m", "autograder", "fingerprints", "--check"], cwd=KIT,
                               capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr


def test_fingerprints_match_within_tolerance_and_only_then():
    import torch

    from autograder.fingerprints import fingerprint, matches
    tol = {torch.float64: (1e-7, 1e-9), torch.float32: (1e-5, 1e-6)}
    x = torch.randn(3, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    fp = fingerprint({"out": x, "n": 3, "pair": (x.float(), torch.tensor([True, False]))})
    assert matches({"out": x + 1e-10, "n": 3, "pair": (x.float() * (1 + 1e-7), torch.tensor([True, False]))}, fp, tol)
    assert not matches({"out": x + 1e-4, "n": 3, "pair": (x.float(), torch.tensor([True, False]))}, fp, tol)
    swapped = x.clone()
    swapped[0, 0, :2] = x[0, 0, :2].flip(0)  # same values, other places: projections tell them apart
    assert not matches({"out": swapped, "n": 3, "pair": (x.float(), torch.tensor([True, False]))}, fp, tol)
    assert not matches({"out": x, "n": 3, "pair": (x.float(), torch.tensor([True, True]))}, fp, tol)
    nan = x.clone()
    nan[1, 1, 1] = float("nan")
    assert matches({"out": nan}, fingerprint({"out": nan}), tol) and not matches({"out": x}, fingerprint({"out": nan}), tol)
