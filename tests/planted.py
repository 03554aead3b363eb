"""Planted mistakes: the reference with one error written into its source, and the diagnosis it
must get. Several are the same mistake written differently (`k = self.w_q(x)` and
`self.w_k = self.w_q`; `~mask`, `mask == 0` and `torch.where`): the catalog recognises a
mistake by what it computes, so every phrasing must get the same diagnosis.

The kit's tests plant each one (tests/test_mistakes.py, tests/test_release.py): it must lose
points in its own step only (plus the integration and cuda steps, and the steps its catalog
entry says it genuinely breaks) and carry its diagnosis, in the instructor's grade and in the
student release.
"""

from dataclasses import dataclass

from autograder.engine.assignment import mistakes_of


@dataclass
class Planted:
    name: str  # unique
    step: str
    diagnosis: str  # the id the step's diagnosis must give
    file: str
    patches: list  # (old, new): each old occurs exactly once in the reference file
    needs_check: bool = False  # no check can catch it yet (a blind spot): expected to pass

    @property
    def id(self):
        return self.name

    @property
    def also_breaks(self):
        return next((m.also_breaks for m in mistakes_of("mha", self.step) if m.id == self.diagnosis), ())

    def apply(self, source):
        for old, new in self.patches:
            count = source.count(old)
            if count != 1:
                raise ValueError(f"planted {self.name}: {old!r} occurs {count} times in {self.file}")
            source = source.replace(old, new)
        return source


def P(name, step, file, patches, diagnosis=None, **kwargs):
    return Planted(name, step, diagnosis or name, file, patches, **kwargs)


SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)"
SOFTMAX = "weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)"
FILL = "scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)  # (..., Lq, Lk)"
SPLIT_Q = "q = split_heads(self.w_q(query), self.num_heads)  # (B, H, Lq, d_k)"
SPLIT_K = "k = split_heads(self.w_k(key), self.num_heads)  # (B, H, Lk, d_k)"
SPLIT_V = "v = split_heads(self.w_v(value), self.num_heads)  # (B, H, Lk, d_k)"
MHA_SCALE = "/ math.sqrt(q.size(-1))"
MHA_PAD = "blocked = blocked | pad_mask[:, None, None, :]"
MHA_FILL = "torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)"
LIN = "nn.Linear(d_model, d_model, bias=bias)"

PLANTED = [
    # ------------------------------------------------------------------ padding
    P(
        "pad_mask_inverted",
        "padding",
        "padding.py",
        [("pad_mask = torch.ones(", "pad_mask = torch.zeros("), ("pad_mask[b, :n] = False", "pad_mask[b, :n] = True")],
    ),
    P(
        "pad_left",
        "padding",
        "padding.py",
        [("ids[b, :n] = ", "ids[b, L - n:] = "), ("pad_mask[b, :n] = False", "pad_mask[b, L - n:] = False")],
    ),
    P(
        "pad_no_truncate",
        "padding",
        "padding.py",
        [
            (
                "lengths = [len(seq) if max_len is None else min(len(seq), max_len) for seq in sequences]",
                "lengths = [len(seq) for seq in sequences]",
            ),
            ("L = max(lengths) if max_len is None else max_len", "L = max(lengths + [max_len or 0])"),
        ],
    ),
    P(
        "pad_mutates_input",
        "padding",
        "padding.py",
        [
            (
                "    return ids, pad_mask",
                "    for seq in sequences:\n        seq.extend([pad_id] * (L - len(seq)))\n    return ids, pad_mask",
            )
        ],
    ),
    # seed 003: the padded rows replace the caller's rows
    P(
        "pad_mutates_input_rows_replaced",
        "padding",
        "padding.py",
        [
            (
                "    return ids, pad_mask",
                "    for i, seq in enumerate(sequences):\n"
                "        if len(seq) < L:\n            sequences[i] = seq + [pad_id] * (L - len(seq))\n"
                "    return ids, pad_mask",
            )
        ],
        "pad_mutates_input",
    ),
    P(
        "pad_ignores_pad_id",
        "padding",
        "padding.py",
        [("torch.full((len(sequences), L), pad_id,", "torch.full((len(sequences), L), 0,")],
    ),
    P(
        "pad_ignores_longer_max_len",
        "padding",
        "padding.py",
        [("L = max(lengths) if max_len is None else max_len", "L = max(lengths)")],
    ),
    P(
        "pad_rejects_empty_sequence",
        "padding",
        "padding.py",
        [("if len(sequences) == 0:", "if len(sequences) == 0 or min(map(len, sequences)) == 0:")],
    ),
    P(
        "pad_empty_batch_no_error",
        "padding",
        "padding.py",
        [
            (
                'raise ValueError("pad_batch needs at least one sequence")',
                "return torch.zeros(0, 0, dtype=torch.long), torch.zeros(0, 0, dtype=torch.bool)",
            )
        ],
    ),
    P(
        "pad_mask_not_bool",
        "padding",
        "padding.py",
        [("pad_mask = torch.ones(len(sequences), L, dtype=torch.bool)", "pad_mask = torch.ones(len(sequences), L)")],
    ),
    P(
        "pad_ids_not_long",
        "padding",
        "padding.py",
        [
            (
                "torch.full((len(sequences), L), pad_id, dtype=torch.long)",
                "torch.full((len(sequences), L), pad_id, dtype=torch.int32)",
            )
        ],
    ),
    # ------------------------------------------------------------------ embedding
    P(
        "embedding_no_padding_idx",
        "embedding",
        "embedding.py",
        [("nn.Embedding(vocab_size, d_model, padding_idx=pad_id)", "nn.Embedding(vocab_size, d_model)")],
    ),
    P(
        "embedding_padding_idx_zero",
        "embedding",
        "embedding.py",
        [("nn.Embedding(vocab_size, d_model, padding_idx=pad_id)", "nn.Embedding(vocab_size, d_model, padding_idx=0)")],
    ),
    P(
        "embedding_scaled",
        "embedding",
        "embedding.py",
        [("return self.embedding(ids)", "return self.embedding(ids) * self.embedding.embedding_dim ** 0.5")],
    ),
    P(
        "embedding_pad_row_trained",
        "embedding",
        "embedding.py",
        [
            (
                "self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)",
                "self.embedding = nn.Embedding(vocab_size, d_model)\n        self.embedding.weight.data[pad_id] = 0",
            )
        ],
    ),
    # ------------------------------------------------------------------ qkv_projection
    P("qkv_shared_weight", "qkv_projection", "projection.py", [("k = self.w_k(x)", "k = self.w_q(x)")]),
    P(
        "qkv_shared_alias",
        "qkv_projection",
        "projection.py",
        [(f"self.w_k = {LIN}", "self.w_k = self.w_q")],
        "qkv_shared_weight",
    ),
    # seed 003: k and v both projected with w_q
    P(
        "qkv_shared_k_and_v",
        "qkv_projection",
        "projection.py",
        [("k = self.w_k(x)", "k = self.w_q(x)"), ("v = self.w_v(x)", "v = self.w_q(x)")],
        "qkv_shared_weight",
    ),
    P(
        "qkv_roles_swapped",
        "qkv_projection",
        "projection.py",
        [("q = self.w_q(x)", "q = self.w_k(x)"), ("k = self.w_k(x)", "k = self.w_q(x)")],
    ),
    P(
        "qkv_fused_split_per_head",
        "qkv_projection",
        "projection.py",
        [
            (
                "q, k, v = qkv.split(self.d_model, dim=-1)",
                "q, k, v = [t.reshape(x.shape) for t in qkv.view(*x.shape[:-1], 2, -1).chunk(3, dim=-1)]",
            )
        ],
    ),
    P(
        "qkv_fused_interleaved",
        "qkv_projection",
        "projection.py",
        [("q, k, v = qkv.split(self.d_model, dim=-1)", "q, k, v = qkv.unflatten(-1, (self.d_model, 3)).unbind(-1)")],
        "qkv_fused_split_per_head",
    ),
    P(
        "qkv_fused_split_wrong_dim",
        "qkv_projection",
        "projection.py",
        [("q, k, v = qkv.split(self.d_model, dim=-1)", "q, k, v = qkv.chunk(3, dim=1)")],
    ),
    P("qkv_wrong_order", "qkv_projection", "projection.py", [("q, k, v = qkv.split(", "k, q, v = qkv.split(")]),
    P(
        "qkv_wrong_order_chunk",
        "qkv_projection",
        "projection.py",
        [("q, k, v = qkv.split(self.d_model, dim=-1)", "v, k, q = qkv.chunk(3, dim=-1)")],
        "qkv_wrong_order",
    ),
    P(
        "qkv_bias_always_on",
        "qkv_projection",
        "projection.py",
        [(f"self.w_q = {LIN}", "self.w_q = nn.Linear(d_model, d_model)")],
    ),
    P(
        "qkv_fused_bias_always_on",
        "qkv_projection",
        "projection.py",
        [
            (
                "self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)\n",
                "self.c_attn = nn.Linear(d_model, 3 * d_model)\n",
            )
        ],
    ),
    # ------------------------------------------------------------------ split_heads
    P(
        "split_without_transpose",
        "split_heads",
        "heads.py",
        [
            (
                "    x = x.view(B, L, num_heads, d_k)  # (B, L, H, d_k)\n    return x.transpose(1, 2)",
                "    return x.view(B, num_heads, L, d_k)",
            )
        ],
    ),
    P(
        "split_without_transpose_reshape",
        "split_heads",
        "heads.py",
        [
            (
                "    x = x.view(B, L, num_heads, d_k)  # (B, L, H, d_k)\n    return x.transpose(1, 2)",
                "    return x.reshape(B, num_heads, -1, d_k)",
            )
        ],
        "split_without_transpose",
    ),
    P(
        "split_interleaved",
        "split_heads",
        "heads.py",
        [
            (
                "    x = x.view(B, L, num_heads, d_k)  # (B, L, H, d_k)\n    return x.transpose(1, 2)",
                "    return x.view(B, L, d_k, num_heads).permute(0, 3, 1, 2)",
            )
        ],
    ),
    P(
        "split_one_slice",
        "split_heads",
        "heads.py",
        [
            (
                "    x = x.view(B, L, num_heads, d_k)  # (B, L, H, d_k)\n    return x.transpose(1, 2)",
                "    return torch.stack([x[..., :d_k]] * num_heads, dim=1)",
            ),
            ('"""Step', 'import torch\n"""Step'),
        ],
    ),
    P(
        "merge_without_transpose",
        "split_heads",
        "heads.py",
        [("x = x.transpose(1, 2).contiguous()", "x = x.contiguous()")],
    ),
    P(
        "merge_without_transpose_reshape",
        "split_heads",
        "heads.py",
        [
            (
                "    x = x.transpose(1, 2).contiguous()  # (B, L, H, d_k)\n    return x.view(B, L, H * d_k)  # (B, L, D)",
                "    return x.reshape(B, L, -1)",
            )
        ],
        "merge_without_transpose",
    ),
    P(
        "merge_view_not_contiguous",
        "split_heads",
        "heads.py",
        [("x = x.transpose(1, 2).contiguous()", "x = x.transpose(1, 2)")],
    ),
    P(
        "split_no_divisibility_check",
        "split_heads",
        "heads.py",
        [('raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")', "pass")],
    ),
    P(
        "split_divisibility_assert",
        "split_heads",
        "heads.py",
        [
            (
                '    if D % num_heads != 0:\n        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")',
                '    assert D % num_heads == 0, "d_model must be divisible by num_heads"',
            )
        ],
        "split_no_divisibility_check",
    ),
    # ------------------------------------------------------------------ attention
    P("scale_by_d_model", "attention", "attention.py", [("d_k = q.size(-1)", "d_k = q.size(-1) * q.size(1)")]),
    # seed 002: attn_scores /= embedding_dim ** 0.5
    P(
        "scale_by_d_model_pow",
        "attention",
        "attention.py",
        [(SCORES, "scores = q @ k.transpose(-2, -1)\n    scores /= (q.shape[1] * q.shape[-1]) ** 0.5")],
        "scale_by_d_model",
    ),
    P("no_scale", "attention", "attention.py", [(" / math.sqrt(d_k)", "")]),
    P("scale_not_sqrt", "attention", "attention.py", [("/ math.sqrt(d_k)", "/ d_k")]),
    P("scale_inverted", "attention", "attention.py", [("/ math.sqrt(d_k)", "/ d_k ** -0.5")]),
    P(
        "scale_inverted_times",
        "attention",
        "attention.py",
        [("/ math.sqrt(d_k)", "* math.sqrt(d_k)")],
        "scale_inverted",
    ),
    P("scale_by_d_v", "attention", "attention.py", [("/ math.sqrt(d_k)", "/ math.sqrt(v.size(-1))")]),
    P(
        "scale_after_softmax",
        "attention",
        "attention.py",
        [
            (SCORES, "scores = q @ k.transpose(-2, -1)"),
            (SOFTMAX, "weights = torch.softmax(scores, dim=-1) / math.sqrt(d_k)"),
        ],
    ),
    P("softmax_wrong_dim", "attention", "attention.py", [(SOFTMAX, "weights = torch.softmax(scores, dim=-2)")]),
    P("k_not_transposed", "attention", "attention.py", [("q @ k.transpose(-2, -1)", "q @ k")]),
    P(
        "k_transposed_wrong_axes",
        "attention",
        "attention.py",
        [("q @ k.transpose(-2, -1)", "torch.matmul(q, k.transpose(1, 2))")],
        "k_not_transposed",
    ),
    P("returns_swapped", "attention", "attention.py", [("return out, weights", "return weights, out")]),
    P("weights_before_softmax", "attention", "attention.py", [("return out, weights", "return out, scores")]),
    P("no_softmax", "attention", "attention.py", [(SOFTMAX, "weights = scores")]),
    P("output_upcast", "attention", "attention.py", [("out = weights @ v", "out = weights.double() @ v.double()")]),
    # ------------------------------------------------------------------ masking
    P("mask_fill_zero", "masking", "attention.py", [("torch.finfo(scores.dtype).min)", "0.0)")]),
    P("mask_fill_zero_multiply", "masking", "attention.py", [(FILL, "scores = scores * ~mask")], "mask_fill_zero"),
    P(
        "mask_after_softmax",
        "masking",
        "attention.py",
        [
            (FILL, "pass"),
            (
                f"    {SOFTMAX}\n",
                f"    {SOFTMAX}\n    if mask is not None:\n        weights = weights.masked_fill(mask, 0.0)\n",
            ),
        ],
    ),
    P("mask_inverted", "masking", "attention.py", [("scores.masked_fill(mask,", "scores.masked_fill(~mask,")]),
    P(
        "mask_inverted_eq_zero",
        "masking",
        "attention.py",
        [("scores.masked_fill(mask,", "scores.masked_fill(mask == 0,")],
        "mask_inverted",
    ),
    P(
        "mask_inverted_where",
        "masking",
        "attention.py",
        [(FILL, "scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)")],
        "mask_inverted",
    ),
    P("mask_added", "masking", "attention.py", [(FILL, "scores = scores + mask")]),
    P("fully_masked_nan", "masking", "attention.py", [("torch.finfo(scores.dtype).min)", 'float("-inf"))')]),
    P(
        "fully_masked_nan_torch_inf",
        "masking",
        "attention.py",
        [("torch.finfo(scores.dtype).min)", "-torch.inf)")],
        "fully_masked_nan",
    ),
    P("mask_on_queries", "masking", "masking.py", [("[:, None, None, :]", "[:, None, :, None]")]),
    P(
        "mask_on_queries_unsqueeze",
        "masking",
        "masking.py",
        [("(ids == pad_id)[:, None, None, :]", "(ids == pad_id).unsqueeze(1).unsqueeze(-1)")],
        "mask_on_queries",
    ),
    # the opposite polarity, built with !=
    P("padding_mask_inverted", "masking", "masking.py", [("(ids == pad_id)", "(ids != pad_id)")]),
    P(
        "padding_mask_not_broadcastable",
        "masking",
        "masking.py",
        [("(ids == pad_id)[:, None, None, :]", "ids == pad_id")],
    ),
    P("padding_mask_ignores_pad_id", "masking", "masking.py", [("(ids == pad_id)", "(ids == 0)")]),
    P(
        "causal_includes_diagonal",
        "masking",
        "masking.py",
        [("torch.triu(ones, diagonal=1)", "torch.triu(ones, diagonal=0)")],
    ),
    P(
        "causal_wrong_direction",
        "masking",
        "masking.py",
        [("torch.triu(ones, diagonal=1)", "torch.tril(ones, diagonal=-1)")],
    ),
    P("causal_inverted", "masking", "masking.py", [("torch.triu(ones, diagonal=1)", "torch.tril(ones)")]),
    P("causal_ignores_device", "masking", "masking.py", [("dtype=torch.bool, device=device)", "dtype=torch.bool)")]),
    # ------------------------------------------------------------------ output_projection
    P(
        "out_no_merge_transpose",
        "output_projection",
        "output.py",
        [("heads.transpose(1, 2).contiguous().view(B, L, H * d_k)", "heads.contiguous().view(B, L, H * d_k)")],
    ),
    P(
        "out_merge_view_not_contiguous",
        "output_projection",
        "output.py",
        [("heads.transpose(1, 2).contiguous().view(", "heads.transpose(1, 2).view(")],
    ),
    P(
        "out_missing_bias",
        "output_projection",
        "output.py",
        [(f"self.w_o = {LIN}\n", "self.w_o = nn.Linear(d_model, d_model, bias=False)\n")],
    ),
    P(
        "out_bias_always_on",
        "output_projection",
        "output.py",
        [(f"self.w_o = {LIN}\n", "self.w_o = nn.Linear(d_model, d_model)\n")],
    ),
    # ------------------------------------------------------------------ multi_head_attention
    P(
        "mha_out_missing_bias",
        "multi_head_attention",
        "mha.py",
        [(f"self.w_o = {LIN}", "self.w_o = nn.Linear(d_model, d_model, bias=False)")],
        "out_missing_bias",
    ),
    P(
        "dropout_in_eval",
        "multi_head_attention",
        "mha.py",
        [
            (
                "weights = self.dropout(weights)",
                "weights = nn.functional.dropout(weights, self.dropout.p, training=True)",
            )
        ],
    ),
    P(
        "dropout_p_ignored",
        "multi_head_attention",
        "mha.py",
        [("self.dropout = nn.Dropout(dropout)\n", "self.dropout = nn.Dropout(0.0)\n")],
    ),
    P(
        "mha_dropout_on_output",
        "multi_head_attention",
        "mha.py",
        [
            ("weights = self.dropout(weights)  # (B, H, Lq, Lk)", "pass"),
            ("return self.w_o(out)", "return self.dropout(self.w_o(out))"),
        ],
    ),
    P("mha_causal_ignored", "multi_head_attention", "mha.py", [("if self.causal:", "if False:")]),
    P(
        "mha_causal_bottom_right",
        "multi_head_attention",
        "mha.py",
        [("torch.ones_like(blocked).triu(diagonal=1)", "torch.ones_like(blocked).triu(diagonal=1 + Lk - Lq)")],
    ),
    P(
        "mha_causal_includes_diagonal",
        "multi_head_attention",
        "mha.py",
        [("torch.ones_like(blocked).triu(diagonal=1)", "torch.ones_like(blocked).triu()")],
    ),
    P("mha_pad_mask_ignored", "multi_head_attention", "mha.py", [("if pad_mask is not None:", "if False:")]),
    P(
        "mha_pad_mask_inverted",
        "multi_head_attention",
        "mha.py",
        [(MHA_PAD, "blocked = blocked | (pad_mask[:, None, None, :] != True)")],
    ),
    # the mask applied on the query side
    P(
        "mha_mask_on_queries",
        "multi_head_attention",
        "mha.py",
        [(MHA_PAD, "blocked = blocked | pad_mask[:, None, :, None]")],
    ),
    P("mha_scale_by_d_model", "multi_head_attention", "mha.py", [(MHA_SCALE, "/ math.sqrt(self.d_model)")]),
    P("mha_no_scale", "multi_head_attention", "mha.py", [(MHA_SCALE, "")]),
    P("mha_scale_inverted", "multi_head_attention", "mha.py", [(MHA_SCALE, "/ q.size(-1) ** -0.5")]),
    P(
        "mha_softmax_wrong_dim",
        "multi_head_attention",
        "mha.py",
        [("weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(scores, dim=2)")],
    ),
    P("mha_fully_masked_nan", "multi_head_attention", "mha.py", [(MHA_FILL, 'float("-inf"))')]),
    P("mha_mask_fill_zero", "multi_head_attention", "mha.py", [(MHA_FILL, "0.0)")]),
    P(
        "mha_output_detached",
        "multi_head_attention",
        "mha.py",
        [("return self.w_o(out)", "return self.w_o(out.detach())")],
    ),
    P(
        "mha_shared_alias",
        "multi_head_attention",
        "mha.py",
        [(f"self.w_k = {LIN}", "self.w_k = self.w_q")],
        "mha_shared_projection",
    ),
    # seed 003 written as a module: k and v both projected with w_q
    P(
        "mha_shared_k_and_v",
        "multi_head_attention",
        "mha.py",
        [
            (SPLIT_K, "k = split_heads(self.w_q(key), self.num_heads)"),
            (SPLIT_V, "v = split_heads(self.w_q(value), self.num_heads)"),
        ],
        "mha_shared_projection",
    ),
    P(
        "mha_ignores_key",
        "multi_head_attention",
        "mha.py",
        [
            (SPLIT_K, "k = split_heads(self.w_k(query), self.num_heads)"),
            (SPLIT_V, "v = split_heads(self.w_v(query), self.num_heads)"),
        ],
    ),
    P(
        "mha_key_value_swapped",
        "multi_head_attention",
        "mha.py",
        [
            (SPLIT_K, "k = split_heads(self.w_k(value), self.num_heads)"),
            (SPLIT_V, "v = split_heads(self.w_v(key), self.num_heads)"),
        ],
    ),
    # every head shares one projection slice
    P(
        "mha_heads_share_slice",
        "multi_head_attention",
        "mha.py",
        [
            (SPLIT_Q, SPLIT_Q.split("  #")[0] + "[:, :1].expand(-1, self.num_heads, -1, -1)"),
            (SPLIT_K, SPLIT_K.split("  #")[0] + "[:, :1].expand(-1, self.num_heads, -1, -1)"),
            (SPLIT_V, SPLIT_V.split("  #")[0] + "[:, :1].expand(-1, self.num_heads, -1, -1)"),
        ],
    ),
    P(
        "mha_split_without_transpose",
        "multi_head_attention",
        "mha.py",
        [
            (SPLIT_Q, "q = self.w_q(query).view(query.size(0), self.num_heads, query.size(1), -1)"),
            (SPLIT_K, "k = self.w_k(key).view(key.size(0), self.num_heads, key.size(1), -1)"),
            (SPLIT_V, "v = self.w_v(value).view(value.size(0), self.num_heads, value.size(1), -1)"),
        ],
    ),
    P(
        "mha_merge_without_transpose",
        "multi_head_attention",
        "mha.py",
        [("out = merge_heads(weights @ v)", "out = (weights @ v).reshape(query.size(0), query.size(1), self.d_model)")],
    ),
    # seed 004: the output projection ignores the bias switch
    P(
        "mha_bias_always_on",
        "multi_head_attention",
        "mha.py",
        [(f"self.w_o = {LIN}", "self.w_o = nn.Linear(d_model, d_model)")],
    ),
    # ------------------------------------------------------------------ cuda
    P(
        "cpu_tensor_in_forward",
        "cuda",
        "mha.py",
        [
            (
                "blocked = torch.zeros(Lq, Lk, dtype=torch.bool, device=scores.device)",
                "blocked = torch.zeros(Lq, Lk, dtype=torch.bool)",
            )
        ],
    ),
    P(
        "mask_not_buffer",
        "cuda",
        "mha.py",
        [
            (
                "        self.dropout = nn.Dropout(dropout)\n",
                "        self.dropout = nn.Dropout(dropout)\n"
                "        self.future = torch.triu(torch.ones(256, 256, dtype=torch.bool), diagonal=1)\n",
            ),
            ("blocked = torch.ones_like(blocked).triu(diagonal=1)  # (Lq, Lk)", "blocked = self.future[:Lq, :Lk]"),
        ],
    ),
    P(
        "embedding_cpu_ids",
        "cuda",
        "embedding.py",
        [("return self.embedding(ids)  # (B, L, d_model)", "return self.embedding(ids.cpu())  # (B, L, d_model)")],
    ),
    P(
        "output_on_cpu",
        "cuda",
        "output.py",
        [("return self.w_o(merged)  # (B, L, D)", "return self.w_o(merged.cpu())  # (B, L, D)")],
    ),
    P("mask_moved_to_cpu", "cuda", "attention.py", [("scores.masked_fill(mask,", "scores.masked_fill(mask.cpu(),")]),
]


def planted_of(step=None):
    """The planted mistakes (of one step)."""
    return [p for p in PLANTED if step is None or p.step == step]


def all_planted():
    """(step, planted) pairs, the ones a check can catch."""
    return [(p.step, p) for p in PLANTED if not p.needs_check]
