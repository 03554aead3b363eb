"""Known mistakes of step `multi_head_attention`, each a list of knob settings of the model (mistakes/model.py).

Instructor-only. Used by the diagnosis (autograder/engine/mistakes/diagnosis.py) and by the fingerprints shipped
to students (autograder/engine/mistakes/fingerprints.py); never imported where student code runs.
"""

from . import SHARED, Mistake

MISTAKES = [
    Mistake("mha_shared_projection", *SHARED),
    Mistake("mha_ignores_key", {"mha_key_from": "query", "mha_value_from": "query"}, {"mha_key_from": "query"}),
    Mistake("mha_key_value_swapped", {"mha_key_from": "value", "mha_value_from": "key"}),
    Mistake("dropout_in_eval", {"mha_dropout": "always"}),
    Mistake("dropout_p_ignored", {"mha_dropout_p": "zero"}),
    Mistake("mha_dropout_on_output", {"mha_dropout": "output"}),
    Mistake("mha_causal_ignored", {"mha_causal": "ignored"}),
    Mistake("mha_causal_bottom_right", {"mha_causal": "bottom_right"}),
    Mistake("mha_causal_includes_diagonal", {"mha_causal": "with_diagonal"}),
    Mistake("mha_pad_mask_ignored", {"mha_pad_mask": "ignored"}),
    Mistake("mha_pad_mask_inverted", {"mha_pad_mask": "inverted"}),
    Mistake("mha_mask_on_queries", {"mha_pad_mask": "queries"}),
    Mistake("mask_missing_head_axis", {"mha_pad_mask": "no_head_axis"}),
    Mistake("mask_heads_order", {"mha_pad_tiling": "repeat"}, {"mha_pad_tiling": "repeat_interleave"}),
    Mistake("causal_mask_square", {"mha_causal": "square"}),
    Mistake("mha_causal_inverted", {"mha_causal": "tril"}),
    Mistake("mha_mask_added", {"mask_place": "add"}),
    # Random outputs match nothing: the probe of the same id (checks/multi_head_attention.py) decides.
    Mistake("layers_created_in_forward", {"mha_layers_in_forward": True}),
    Mistake("out_missing_bias", {"out_bias": "never"}),
    Mistake(
        "mha_bias_always_on",
        {"qkv_bias_always": True},
        {"out_bias": "always"},
        {"qkv_bias_always": True, "out_bias": "always"},
    ),
    Mistake("mha_scale_by_d_model", {"scale": "d_model"}),
    Mistake("mha_no_scale", {"scale": "none"}),
    Mistake("mha_scale_inverted", {"scale": "inverted"}),
    Mistake("mha_softmax_wrong_dim", {"softmax_dim": -2}),
    Mistake("mha_fully_masked_nan", {"fill": "-inf"}),
    Mistake("mha_mask_fill_zero", {"fill": "zero"}),
    Mistake("mha_heads_share_slice", {"mha_heads": "one_slice"}),
    Mistake("mha_split_without_transpose", {"split": "view_only"}),
    Mistake("mha_merge_without_transpose", {"merge": "no_transpose"}),
    # two mistakes that cancel in shape: the output has the right shape, its tokens are mixed
    Mistake("mha_split_and_merge_without_transpose", {"split": "view_only", "merge": "no_transpose"}),
    Mistake("mha_output_detached", {"mha_detach": True}),
]
