"""Every student-facing sentence, keyed by id, so that they can be translated in one place.

Checks never build sentences themselves: they return a message id and its parameters, and
`render` turns those into text in the configured language.
"""

CATALOG = {
    "en": {
        # What happened when student code ran.
        "not_implemented": "not implemented yet ({where})",
        "step_not_implemented": "not implemented yet",
        "raised": "your code raised {type}: {message} ({where})",
        "timeout": "stopped after {seconds:g} s: your code did not finish (an endless loop?) ({where})",
        "missing_package": "no `mha` package found in {path}",
        "missing_file": "{file} is missing",
        "syntax_error": "{file} has a syntax error on line {line}: {message}",
        "import_error": "importing {file} raised {type}: {message}",
        "not_checked": "not checked: {reason}",
        "no_cuda": "no CUDA device on this machine",
        # Comparing what was seen with what was expected.
        "not_tensor": "{name}: expected a tensor, got {got}",
        "wrong_type": "{name}: expected {expected}, got {got}",
        "wrong_length": "{name}: expected {expected} items, got {got}",
        "shape": "{name}: expected shape {expected}, got {got}",
        "dtype": "{name}: expected dtype {expected}, got {got}",
        "device": "{name}: expected device {expected}, got {got}",
        "not_finite": "{name}: {got} at index {index} (expected a finite number {expected:.6g})",
        "values": (
            "{name}: values differ; largest difference {diff:.3g} at index {index} "
            "(expected {expected:.6g}, got {got:.6g})"
        ),
        "exact_values": "{name}: first difference at index {index}: expected {expected}, got {got}",
        "not_equal": "{name}: expected {expected}, got {got}",
        # Step-specific observations.
        "no_raise": "expected {expected} for {case}, but nothing was raised",
        "wrong_exception": "expected {expected} for {case}, got {type}: {message}",
        "mutated_input": "pad_batch changed the caller's `sequences` (it must leave them as they were)",
        "missing_attribute": "{owner} has no attribute `{name}` (the contract asks for {expected})",
        "bad_attribute": "{owner}.{name}: expected {expected}, got {got}",
        "pad_vector_nonzero": "the vector of pad_id={pad_id} is not zero (largest entry {value:.3g})",
        "pad_vector_gets_grad": "the vector of pad_id={pad_id} receives a gradient ({value:.3g}); it must not be trained",
        "blocked_weight": (
            "{name}: a blocked key got weight {value:.3g} at index {index}; blocked keys must get "
            "exactly 0"
        ),
        "row_not_finite": "{name}: a row whose keys are all blocked came out as {got} at index {index}; it must stay finite",
        "mask_changes_kept_keys": (
            "{name}: for query {query} of batch item {batch}, the keys that are not blocked should "
            "get what attention over those keys alone gives them; largest difference {diff:.3g}"
        ),
        "dropout_in_eval": "in eval() two identical calls gave different outputs (difference {diff:.3g}); dropout must be off",
        "dropout_inactive": "in train() with dropout={p} the output never changed; dropout should act on the attention weights",
        "grad_missing": "{name} received no gradient (is it used in forward?)",
    },
}

LANGUAGE = "en"


def render(message_id, **params):
    """The sentence for `message_id` in the current language, with `params` filled in."""
    template = CATALOG[LANGUAGE].get(message_id) or CATALOG["en"][message_id]
    return template.format(**params)
