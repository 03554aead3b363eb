"""The diagnosis catalog: the ids the course promises exist, and every id has a message."""

from pathlib import Path

import pytest

from autograder.engine.checks import messages
from autograder.engine.course.assignment import known, mistakes_of, step_modules

# Ids the diagnosis issue makes a public contract, by step. (cpu_tensor_in_forward and
# mask_not_buffer of the cuda step come with the simulated CUDA device.)
PROMISED = {
    "padding": ["pad_mutates_input", "pad_mask_inverted", "pad_left", "pad_no_truncate"],
    "embedding": ["embedding_no_padding_idx"],
    "qkv_projection": ["qkv_shared_weight", "qkv_fused_split_per_head", "qkv_wrong_order"],
    "split_heads": ["split_without_transpose", "merge_without_transpose"],
    "attention": ["scale_by_d_model", "no_scale", "scale_not_sqrt", "softmax_wrong_dim", "k_not_transposed"],
    "masking": [
        "mask_fill_zero",
        "mask_after_softmax",
        "mask_inverted",
        "mask_on_queries",
        "causal_includes_diagonal",
        "causal_wrong_direction",
        "fully_masked_nan",
    ],
    "output_projection": ["out_no_merge_transpose", "out_missing_bias"],
    "multi_head_attention": ["out_missing_bias", "dropout_in_eval", "mha_causal_ignored", "mha_pad_mask_ignored"],
}


def known_ids(step):
    module = step_modules("mha")[step]
    return {m.id for m in mistakes_of("mha", step)} | {p.diagnosis for p in module.PROBES}


def test_every_promised_diagnosis_exists():
    missing = {step: sorted(set(ids) - known_ids(step)) for step, ids in PROMISED.items()}
    assert {step: ids for step, ids in missing.items() if ids} == {}


def test_every_diagnosis_has_a_message():
    """The engine's fallback has a text in every language (each assignment's diagnoses:
    tests/test_assignment_contract.py)."""
    for lang in messages.LANGUAGES:
        assert "diagnosis.no_known_mistake" in messages.catalog(lang), lang


def test_the_release_catalogs_drop_the_hidden_only_diagnoses(tmp_path):
    """A student release's compiled catalogs keep the diagnoses the fingerprints and probes can
    give, and no other (release.student_message); every other message ships."""
    from autograder.engine.course import config as grading_config
    from autograder.engine.course.assignment import known
    from autograder.engine.generate.catalogs import write_student_catalogs
    from autograder.engine.mistakes.diagnosis import public_message_ids
    from autograder.engine.mistakes.fingerprints import load, shipped_ids
    from autograder.publish.student_release import student_message

    ids = tuple(known())
    keep = set().union(*(public_message_ids(config) for config in grading_config.load_all()))
    write_student_catalogs(tmp_path, lambda message_id: student_message(message_id, keep))
    shipped = {p.diagnosis for a in ids for module in step_modules(a).values() for p in module.PROBES} | {
        i for a in ids for i in shipped_ids(load(a))
    }
    hidden_only = {m.id for a in ids for step in step_modules(a) for m in mistakes_of(a, step)} - shipped
    assert "causal_ignores_device" in hidden_only
    released = tuple((tmp_path / Path(d).relative_to(messages.GRADER), domain) for d, domain in messages.CATALOGS)
    for lang in messages.LANGUAGES:
        kept, full = messages.catalog(lang, released), messages.catalog(lang)
        assert sorted(i for i in kept if i.removeprefix("diagnosis.") in hidden_only) == []
        # and where the skeleton teaches them (feedback's pointer for a cause)
        left_out = {f"{prefix}{i}" for i in hidden_only for prefix in ("diagnosis.", "concept.cause.")}
        assert set(full) - set(kept) == left_out & set(full), lang
        assert all(kept[i] == full[i] for i in kept)


def test_every_mistake_variant_fails_a_check_of_its_step():
    """A variant that passes every check could never be named, and would name correct code."""
    from autograder.engine.mistakes import fingerprints

    shown = {
        v.split("#")[0]
        for step in fingerprints.load("mha")["steps"].values()
        for groups in step["checks"].values()
        for group in groups
        for v in group["variants"]
    }
    hidden_only = {"causal_ignores_device"}  # its check needs 'meta' triu: hidden (see checks/masking.py)
    catalog = {m.id for step in step_modules("mha") for m in mistakes_of("mha", step)}
    assert catalog - shown == hidden_only


@pytest.mark.parametrize("assignment", known())
def test_fingerprints_are_up_to_date_fast(assignment):
    """The sources the fingerprints are made from are the ones they were made from; else run
    `python -m autograder fingerprints` (the slow test below regenerates and compares)."""
    from autograder.engine.mistakes import fingerprints

    assert fingerprints.load(assignment).get("sources") == fingerprints.sources_digest(assignment), (
        "run `python -m autograder fingerprints`"
    )


@pytest.mark.slow
def test_fingerprints_are_up_to_date():
    import subprocess
    import sys

    from conftest import KIT

    completed = subprocess.run(
        [sys.executable, "-m", "autograder", "fingerprints", "--check"], cwd=KIT, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr


def test_fingerprints_match_within_tolerance_and_only_then():
    import torch

    from autograder.engine.mistakes.fingerprints import fingerprint, matches

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
    assert matches({"out": nan}, fingerprint({"out": nan}), tol) and not matches(
        {"out": x}, fingerprint({"out": nan}), tol
    )
