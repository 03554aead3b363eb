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
        "notebook_stderr": "What was written to stderr while grading (shown here: nbgrader would score stderr as zero):",
        "no_reference": "hidden checks need the reference solutions in {path} (the instructor's kit)",
        "worker_crashed": "your code crashed the interpreter ({signal}) in step {step}",
        "worker_exited": "your code ended the Python process (exit code {code}) in step {step}",
        "bad_worker_message": "the process running your code sent back something unreadable in step {step} ({detail})",
        "unreadable_observation": "what your code gave back in step {step} could not be judged ({detail})",
        "missing_file": "{file} is missing",
        "refused_file": "{file} was not graded: {reason}",
        "refused_link": "it is a symbolic link (hand in the file itself)",
        "refused_special": "it is not a regular file (a pipe, socket or device)",
        "refused_size": "it is larger than {limit} bytes",
        "syntax_error": "{file} has a syntax error on line {line}: {message}",
        "import_error": "importing {file} raised {type}: {message}",
        "not_checked": "not checked: {reason}",
        "no_cuda": "no CUDA device on this machine",
        "cuda_off": "turned off in grading.yml",
        "data_dependent": (
            "the {mode} device stopped at an operation that needs tensor values (.item(), .tolist(), "
            "if on a tensor, ...), which fake tensors do not have; a real GPU would check this"
        ),
        "cuda_on_request": "no GPU here; run `pytest assignments/ --cuda` to check it on a simulated one (a few seconds more)",
        "mode_real": "graded on a real CUDA device",
        "mode_simulated": "graded on a simulated CUDA device (fake tensors on cuda:0; devices and shapes, not values)",
        "mode_meta": "graded on a simulated device (fake tensors on 'meta': no C++ compiler for the fake CUDA guard, so a few ops such as F.embedding with a CPU index are not caught)",
        "device_mismatch": (
            "a CPU tensor met a tensor on {device} ({where}): {detail}. Create tensors inside forward "
            "with device=x.device, and keep masks in register_buffer so that .to() moves them"
        ),
        # Comparing what was seen with what was expected.
        "not_tensor": "{name}: expected a tensor, got {got}",
        "wrong_type": "{name}: expected {expected}, got {got}",
        "wrong_length": "{name}: expected {expected} items, got {got}",
        "shape": "{name}: expected shape {expected}, got {got}",
        "dtype": "{name}: expected dtype {expected}, got {got}",
        "device": "{name}: expected device {expected}, got {got}",
        "not_finite": "{name}: {got} at index {index} (expected a finite number {expected:.6g})",
        "values": (
            "{name}: {count} of {total} values out of tolerance, the first at index {index} (expected "
            "{expected:.10g}, got {got:.10g}); largest absolute error {max_abs:.3g} at index {max_abs_index}, "
            "largest relative error {max_rel:.3g}; allowed: {tolerance}; dtypes: got {got_dtype}, "
            "expected {expected_dtype}"
        ),
        "tolerance": "|got - expected| <= {atol:.3g} + {rtol:.3g} * |expected|",
        "tolerance_lower": (
            "|got - expected| <= {atol:.3g} + {rtol:.3g} * |expected|, or the rounding of {lower} "
            "arithmetic, {unit:.3g} * (|expected| + {scale:.3g})"
        ),
        "exact_values": "{name}: first difference at index {index}: expected {expected}, got {got}",
        "not_equal": "{name}: expected {expected}, got {got}",
        # Step-specific observations.
        "no_raise": "expected {expected} for {case}, but nothing was raised",
        "wrong_exception": "expected {expected} for {case}, got {type}: {message}",
        "mutated_input": "pad_batch changed the caller's `sequences` (it must leave them as they were)",
        "missing_attribute": "{owner} has no attribute `{name}` (the contract asks for {expected})",
        "bad_attribute": "{owner}.{name}: expected {expected}, got {got}",
        "projections_not_found": (
            "{owner}: could not tell which layers are the q, k, v and output projections (layers seen: "
            "{found}). Accepted: nn.Linear (or nn.LazyLinear) layers, anywhere in the module (your own "
            "QKVProjection / OutputProjection included): one (d_model -> d_model) each applied to the "
            "query, the key, the value and the merged heads, or a fused (d_model -> 3*d_model) layer cut "
            "into q, k, v blocks of d_model in that order (or d_model -> 2*d_model for k, v), each used "
            "in forward; or the names w_q, w_k, w_v, w_o"
        ),
        "projection_shared": (
            "the {role} projection is the same weights as the {other} projection ({where}); q, k, v "
            "and the output each need their own"
        ),
        "pad_vector_nonzero": "the vector of pad_id={pad_id} is not zero (largest entry {value:.3g})",
        "pad_vector_gets_grad": "the vector of pad_id={pad_id} receives a gradient ({value:.3g}); it must not be trained",
        "blocked_weight": (
            "{name}: a blocked key got weight {value:.3g} at index {index}; blocked keys must get "
            "exactly 0"
        ),
        "row_not_finite": "{name}: a row whose keys are all blocked came out as {got} at index {index}; it must stay finite",
        "mask_changes_kept_keys": (
            "{name}: for query {query} of batch item {batch}, the keys that are not blocked should "
            "get what attention over those keys alone gives them; largest difference {diff:.3g} "
            "(allowed: {tolerance})"
        ),
        "dropout_in_eval": "in eval() two identical calls gave different outputs (difference {diff:.3g}); dropout must be off",
        "dropout_inactive": "in train() with dropout={p} the output never changed; dropout should act on the attention weights",
        "dropout_not_on_weights": (
            "in train() the output is not what dropout on the attention weights gives: {detail}. Apply "
            "self.dropout to the weights (after the softmax, before @ v), not to the scores or the output"
        ),
        "grad_missing": "{name} received no gradient (is it used in forward?)",
        "forbidden_call": "your code called {call}, which step {step} asks you to write yourself (0 points for this check)",
        "forbidden_call_at": "your code called {call} ({file}, line {line}), which step {step} asks you to write yourself (0 points for this check)",
        "forbidden_source": "{file}, line {line} uses {call}, which step {step} asks you to write yourself",
        "tampering": "{file}, line {line}: {what} reaches into the grader, the interpreter's internals or torch's dispatcher, or rewrites torch, which graded code may not do (code under `if __name__ == \"__main__\":` and test functions is not graded)",
        # Diagnoses: what probably went wrong, shown under a failing step. Keyed "diagnosis.<id>".
        "diagnosis.no_known_mistake": "no known mistake reproduces your output; the closest evidence: {evidence}",
        "diagnosis.pad_mutates_input": "pad_batch extends the caller's lists in place; build new lists or tensors instead",
        "diagnosis.pad_mask_inverted": "pad_mask is True at real tokens; it must be True at PADDING (True = blocked)",
        "diagnosis.pad_left": "the padding is on the left; pad on the right, after the tokens",
        "diagnosis.pad_no_truncate": "sequences longer than max_len are not cut to their first max_len tokens",
        "diagnosis.pad_ignores_pad_id": "the padding is 0 instead of pad_id",
        "diagnosis.pad_ignores_longer_max_len": "with max_len longer than every sequence, L must still be max_len",
        "diagnosis.pad_rejects_empty_sequence": "an empty sequence inside the batch is allowed (it becomes a row of padding); only an empty batch is an error",
        "diagnosis.pad_empty_batch_no_error": "an empty batch must raise ValueError",
        "diagnosis.pad_mask_not_bool": "pad_mask is not a bool tensor; build it with dtype=torch.bool (or from a comparison such as ids == pad_id)",
        "diagnosis.pad_ids_not_long": "ids is not an int64 tensor; nn.Embedding needs dtype=torch.long",
        "diagnosis.embedding_no_padding_idx": "nn.Embedding was created without padding_idx=pad_id, so the pad vector is not zero and gets trained",
        "diagnosis.embedding_padding_idx_zero": "padding_idx is 0 instead of pad_id",
        "diagnosis.embedding_pad_row_trained": "nn.Embedding has no padding_idx, so the pad row is trained (zeroing it by hand at creation does not stop that); pass padding_idx=pad_id",
        "diagnosis.embedding_scaled": "the vectors are scaled (by sqrt(d_model)?); this step returns the table rows as they are",
        "diagnosis.qkv_shared_weight": "two of q, k, v come from the same Linear (k = self.w_q(x), or self.w_k = self.w_q, which makes two names one layer); each of q, k, v needs its own projection",
        "diagnosis.qkv_roles_swapped": "q, k and v each have their own projection, but not the one of their name (e.g. q = self.w_k(x))",
        "diagnosis.qkv_fused_split_per_head": "the fused output is not cut into three consecutive blocks (it is split per head or interleaved); split the last dim into three blocks of d_model: q, then k, then v",
        "diagnosis.qkv_fused_split_wrong_dim": "the fused output is cut along the wrong dimension; cut the LAST one (dim=-1) into three blocks of d_model",
        "diagnosis.qkv_wrong_order": "the fused output is split in another order than q, k, v",
        "diagnosis.qkv_bias_always_on": "the separate projections keep a bias when bias=False",
        "diagnosis.qkv_fused_bias_always_on": "c_attn keeps a bias when bias=False",
        "diagnosis.split_without_transpose": "split_heads views (B, L, D) directly as (B, H, L, d_k); view as (B, L, H, d_k), then transpose(1, 2)",
        "diagnosis.merge_without_transpose": "merge_heads reshapes (B, H, L, d_k) to (B, L, D) without moving the head axis back; transpose(1, 2) first",
        "diagnosis.merge_view_not_contiguous": "merge_heads calls view on a transposed tensor; call .contiguous() first (or use reshape)",
        "diagnosis.split_no_divisibility_check": "split_heads must raise ValueError when D is not divisible by num_heads",
        "diagnosis.split_interleaved": "split_heads gives head h the features h, h + H, h + 2H, ... (view as (B, L, d_k, H)); view as (B, L, H, d_k) so that head h gets one block of d_k features",
        "diagnosis.split_one_slice": "every head gets the same d_k features; head h must get features h*d_k ... (h+1)*d_k - 1",
        "diagnosis.merge_interleaved": "merge_heads interleaves the heads' features; put each head's d_k features side by side: transpose(1, 2), then view(B, L, H * d_k)",
        "diagnosis.scale_by_d_model": "your attention weights are what you get when you divide by sqrt(d_model) (all heads together) instead of sqrt(d_k), the size of one head",
        "diagnosis.no_scale": "your attention weights are what you get without dividing the scores by sqrt(d_k)",
        "diagnosis.scale_not_sqrt": "your attention weights are what you get when you divide by d_k instead of sqrt(d_k)",
        "diagnosis.scale_inverted": "your scores are multiplied by sqrt(d_k) instead of divided (dividing by d_k ** -0.5 multiplies); divide by d_k ** 0.5",
        "diagnosis.scale_by_d_v": "the scores are divided by sqrt of the VALUES' size; the scale is sqrt(d_k), the size of a query/key",
        "diagnosis.scale_after_softmax": "the scale is applied after the softmax, so a row no longer sums to 1; divide the scores before the softmax",
        "diagnosis.no_softmax": "the scores are used as weights without a softmax",
        "diagnosis.returns_swapped": "the function returns (weights, out); the contract is (out, weights)",
        "diagnosis.weights_before_softmax": "the weights returned are the scores before the softmax; return the softmax's output",
        "diagnosis.softmax_wrong_dim": "the softmax runs over the queries; it must run over the keys (the last dim), so each row sums to 1",
        "diagnosis.k_not_transposed": "the scores use q @ k instead of q @ k.transpose(-2, -1)",
        "diagnosis.output_upcast": "the output is computed in float64 whatever the input dtype; keep the input's dtype",
        "diagnosis.rows_not_normalised": "the attention weights of a row do not sum to 1 (sums range from {low:.3g} to {high:.3g}); softmax over the keys, the last dim",
        "diagnosis.mask_fill_zero": "blocked scores are set to 0, which still gives them weight; use a very negative number",
        "diagnosis.mask_after_softmax": "blocked weights are zeroed after the softmax, so the rows no longer sum to 1; mask the scores before the softmax",
        "diagnosis.mask_inverted": "the mask is applied as if True meant 'may attend' (masked_fill(~mask, ...), mask == 0, torch.where(mask, scores, ...)); in this kit True = blocked",
        "diagnosis.mask_added": "the bool mask is added to the scores (adding True adds 1); fill the blocked scores with a very negative number instead",
        "diagnosis.mask_ignored": "the mask has no effect on the weights",
        "diagnosis.padding_mask_inverted": "padding_mask is True at real tokens (built with != ?); it must be True where ids == pad_id (True = blocked)",
        "diagnosis.padding_mask_not_broadcastable": "padding_mask has the wrong shape; return (B, 1, 1, L) so that it broadcasts over heads and queries",
        "diagnosis.causal_inverted": "the causal mask is True at the keys a query MAY see (tril); in this kit True = blocked, so it is True strictly above the diagonal",
        "diagnosis.mask_on_queries": "the padding mask blocks queries (shape (B, 1, L, 1)) instead of keys (shape (B, 1, 1, L))",
        "diagnosis.padding_mask_ignores_pad_id": "padding_mask compares with 0 instead of pad_id",
        "diagnosis.causal_includes_diagonal": "the causal mask also blocks the diagonal (triu with diagonal=0), so a token cannot see itself",
        "diagnosis.causal_wrong_direction": "the causal mask blocks the past instead of the future",
        "diagnosis.causal_ignores_device": "causal_mask ignores its device argument",
        "diagnosis.fully_masked_nan": "a row whose keys are all blocked becomes NaN (-inf everywhere gives 0/0); fill with a large finite negative number or handle such rows",
        "diagnosis.out_no_merge_transpose": "the heads are merged without transpose(1, 2), which mixes tokens of different positions",
        "diagnosis.out_missing_bias": "w_o was built with bias=False, whatever the bias argument says",
        "diagnosis.out_bias_always_on": "w_o keeps a bias when bias=False; pass bias=bias",
        "diagnosis.out_merge_interleaved": "the heads are merged with their features interleaved; transpose(1, 2), then view(B, L, H * d_k)",
        "diagnosis.out_merge_view_not_contiguous": "view is called on a transposed tensor; call .contiguous() first (or use reshape)",
        "diagnosis.dropout_in_eval": "dropout is still active after eval(); use self.dropout (an nn.Dropout), which eval() switches off",
        "diagnosis.dropout_p_ignored": "the dropout probability argument is not used",
        "diagnosis.mha_causal_ignored": "causal=True has no effect: future keys are not blocked",
        "diagnosis.mha_causal_bottom_right": "with Lq != Lk the causal mask is aligned bottom-right; this kit aligns it top-left (query i sees keys 0..i)",
        "diagnosis.mha_pad_mask_ignored": "pad_mask has no effect: padding keys still get weight",
        "diagnosis.mha_scale_by_d_model": "the module divides the scores by sqrt(d_model) instead of sqrt(d_k)",
        "diagnosis.mha_fully_masked_nan": "a sequence that is all padding gives NaN; fill blocked scores with a large finite negative number",
        "diagnosis.mha_output_detached": "the output is detached from the graph, so the projections before it get no gradient",
        "diagnosis.mha_shared_projection": "two of q, k, v come from the same Linear (k = self.w_q(key), or self.w_k = self.w_q, which makes two names one layer); use w_q, w_k and w_v each for its own role",
        "diagnosis.mha_ignores_key": "the keys (or values) are projected from the query, so cross-attention ignores `key`/`value`",
        "diagnosis.mha_key_value_swapped": "keys are projected from `value` and values from `key`",
        "diagnosis.mha_dropout_on_output": "dropout acts on the module's output; it belongs on the attention weights, after the softmax",
        "diagnosis.mha_causal_includes_diagonal": "the causal mask also blocks the diagonal, so a token cannot see itself",
        "diagnosis.mha_pad_mask_inverted": "pad_mask is used as if True meant a real token (~pad_mask, != ...); True = padding = blocked",
        "diagnosis.mha_mask_on_queries": "the padding mask is applied to the queries (pad_mask[:, None, :, None]); it blocks KEYS: pad_mask[:, None, None, :]",
        "diagnosis.mha_bias_always_on": "a projection keeps a bias when bias=False; pass bias=bias to every nn.Linear",
        "diagnosis.mha_no_scale": "the module does not divide the scores by sqrt(d_k)",
        "diagnosis.mha_scale_inverted": "the module multiplies the scores by sqrt(d_k) instead of dividing (/ d_k ** -0.5 multiplies)",
        "diagnosis.mha_softmax_wrong_dim": "the module's softmax runs over the queries; it must run over the keys (the last dim)",
        "diagnosis.mha_mask_fill_zero": "blocked scores are set to 0, which still gives them weight; fill with a very negative number",
        "diagnosis.mha_heads_share_slice": "every head uses the same d_k features of the projections; head h must get its own slice h*d_k ... (h+1)*d_k - 1",
        "diagnosis.mha_split_without_transpose": "the heads are split by viewing (B, L, D) as (B, H, L, d_k); view as (B, L, H, d_k), then transpose(1, 2)",
        "diagnosis.mha_merge_without_transpose": "the heads are merged without transpose(1, 2), which mixes tokens of different positions",
        "diagnosis.cpu_tensor_in_forward": "forward creates a tensor on the CPU (a mask built without device=?); pass device=x.device, or use torch.ones_like and friends",
        "diagnosis.mask_not_buffer": "a tensor (a mask?) is kept as a plain attribute, which .to() does not move; keep it with self.register_buffer(...)",
        "diagnosis.embedding_cpu_ids": "TokenEmbedding moves the ids to the CPU (ids.cpu()); keep every tensor on the input's device",
        "diagnosis.output_on_cpu": "OutputProjection moves the heads to the CPU (.cpu()); keep every tensor on the input's device",
        "diagnosis.mask_moved_to_cpu": "attention moves the mask to the CPU before using it; keep it on the scores' device",
        "diagnosis.projection_no_gradient": "{name} receives no gradient: is it used (and not replaced by another projection) in forward?",
        "diagnosis.query_rows_mixed": "changing query token {changed} changed the output of query token {moved}; each query's output may depend only on itself and the keys (a missing transpose mixes tokens)",
    },
}

LANGUAGE = "en"


def render(message_id, **params):
    """The sentence for `message_id` in the current language, with `params` filled in."""
    template = CATALOG[LANGUAGE].get(message_id) or CATALOG["en"][message_id]
    return template.format(**params)
