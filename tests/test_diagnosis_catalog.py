"""The diagnosis catalog: the ids the course promises exist, and every id has a message."""
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
