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

from autograder.engine.course.assignment import mistakes_of


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
        return patched(source, self.patches, f"planted {self.name}", self.file)


@dataclass
class Patched:
    """The reference file `file` with each (old, new) of `patches` applied: a correct variant
    (tests/variants.py) or style (tests/styles.py) written as edits, so that it stays in step with
    the reference. (A known mistake of the kit is engine/course/assignment.py's Mistake.)"""

    id: str
    file: str
    patches: list

    def apply(self, source):
        return patched(source, self.patches, self.id, self.file)


def patched(source: str, patches, what: str, file: str) -> str:
    """`source` with each (old, new) of `patches` applied; each `old` must occur exactly once."""
    for old, new in patches:
        count = source.count(old)
        if count != 1:
            raise ValueError(f"{what}: {old!r} occurs {count} times in {file}")
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
MHA_SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)"
MHA_CAUSAL = "blocked = torch.ones_like(blocked).triu(diagonal=1)  # (Lq, Lk)"
MHA_FILL_LINE = "scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)"
MHA_DROPOUT = "weights = self.dropout(weights)  # (B, H, Lq, Lk)"

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
    # the mask from the ids: a real token equal to pad_id (0 by default) is taken for padding
    P(
        "pad_mask_from_ids",
        "padding",
        "padding.py",
        [("    return ids, pad_mask  # (B, L), (B, L)", "    return ids, ids == pad_id  # (B, L), (B, L)")],
    ),
    # the mask made from the padded rows' lengths: every row is full length then, nothing is marked
    P(
        "pad_mask_after_padding",
        "padding",
        "padding.py",
        [
            (
                "        pad_mask[b, :n] = False  # (n,): 행 b의 실제 토큰 / the real tokens of row b",
                "        pad_mask[b, : len(ids[b])] = False  # (L,): the padded row's length",
            )
        ],
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
    P(
        "output_upcast",
        "attention",
        "attention.py",
        [
            ("out = weights @ v  #", "out = weights.double() @ v.double()  #")
        ],  # the code line, not the docstring's formula
    ),
    # operator precedence: d_k ** 1/2 is d_k / 2 (equal to sqrt(d_k) only at d_k = 4), d_k ** -1/2 is 1 / (2 d_k)
    P("scale_precedence", "attention", "attention.py", [("/ math.sqrt(d_k)", "/ d_k ** 1/2")]),
    P(
        "scale_precedence_negative",
        "attention",
        "attention.py",
        [("/ math.sqrt(d_k)", "* d_k ** -1/2")],
        "scale_precedence",
    ),
    # the size of axis 1 (the heads of (B, H, L, d_k)) taken for d_k
    P("scale_by_num_heads", "attention", "attention.py", [("/ math.sqrt(d_k)", "/ math.sqrt(q.shape[1])")]),
    # F.softmax without dim: PyTorch picks dim 1 for 4-D (the heads) and 0 for 3-D (the batch)
    P(
        "softmax_without_dim",
        "attention",
        "attention.py",
        [(SOFTMAX, "weights = torch.nn.functional.softmax(scores)")],
        "softmax_wrong_dim",
    ),
    P(
        "softmax_over_dim_1",
        "attention",
        "attention.py",
        [(SOFTMAX, "weights = scores.softmax(1)")],
        "softmax_wrong_dim",
    ),
    # k re-read as (..., d_k, Lk) with view: the shape of k^T, not its numbers
    P(
        "k_viewed_not_transposed",
        "attention",
        "attention.py",
        [("q @ k.transpose(-2, -1)", "q @ k.view(*k.shape[:-2], k.shape[-1], k.shape[-2])")],
    ),
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
    # +inf for the blocked scores: the blocked keys win the softmax (NaN rows)
    P("mask_fill_positive", "masking", "attention.py", [("torch.finfo(scores.dtype).min)", 'float("inf"))')]),
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
    # the heads added up instead of placed side by side: (B, L, d_k)
    P(
        "heads_summed",
        "output_projection",
        "output.py",
        [("heads.transpose(1, 2).contiguous().view(B, L, H * d_k)", "heads.sum(1)")],
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
    # the padding mask without its head axis: (B, 1, Lk) lines the batch up with the heads
    P(
        "mask_missing_head_axis",
        "multi_head_attention",
        "mha.py",
        [(MHA_PAD, "blocked = blocked | pad_mask.unsqueeze(1)")],
    ),
    # heads folded into the batch head-major (h * B + b), the mask tiled sample-major
    P(
        "mask_heads_order",
        "multi_head_attention",
        "mha.py",
        [
            (
                MHA_FILL_LINE,
                "B, H = scores.shape[:2]\n"
                "        folded = scores.transpose(0, 1).reshape(H * B, Lq, Lk)\n"
                "        tiled = blocked.expand(B, 1, Lq, Lk).reshape(B, Lq, Lk).repeat_interleave(H, dim=0)\n"
                "        folded = folded.masked_fill(tiled, torch.finfo(scores.dtype).min)\n"
                "        scores = folded.view(H, B, Lq, Lk).transpose(0, 1)",
            )
        ],
    ),
    # the causal mask sized (Lq, Lq), as for self-attention
    P(
        "causal_mask_square",
        "multi_head_attention",
        "mha.py",
        [(MHA_CAUSAL, "blocked = torch.triu(torch.ones(Lq, Lq, dtype=torch.bool, device=scores.device), 1)")],
    ),
    # tril taken for the blocked set: the past and the token itself blocked, the future seen
    P(
        "mha_causal_inverted",
        "multi_head_attention",
        "mha.py",
        [(MHA_CAUSAL, "blocked = torch.tril(torch.ones_like(blocked))")],
    ),
    # the bool mask added to the scores: blocked scores grow by 1
    P(
        "mha_mask_added",
        "multi_head_attention",
        "mha.py",
        [(MHA_FILL_LINE, "scores = scores + blocked")],
    ),
    # the output layer made inside forward: fresh random weights on every call
    P(
        "layers_created_in_forward",
        "multi_head_attention",
        "mha.py",
        [("return self.w_o(out)", "return nn.Linear(self.d_model, self.d_model).to(out)(out)")],
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
    # split and merged without either transpose: the shapes cancel, the tokens are mixed
    P(
        "mha_split_and_merge_without_transpose",
        "multi_head_attention",
        "mha.py",
        [
            (SPLIT_Q, "q = self.w_q(query).view(query.size(0), self.num_heads, query.size(1), -1)"),
            (SPLIT_K, "k = self.w_k(key).view(key.size(0), self.num_heads, key.size(1), -1)"),
            (SPLIT_V, "v = self.w_v(value).view(value.size(0), self.num_heads, value.size(1), -1)"),
            (
                "out = merge_heads(weights @ v)",
                "out = (weights @ v).reshape(query.size(0), query.size(1), self.d_model)",
            ),
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


# ---------------------------------------------------------------------------- real bugs (issue 22)
# Mistakes found in public issue threads and Q&A about multi-head attention, each written into
# the reference the way the thread shows it (the threads are listed in the findings report,
# /work/notes/fairness-findings.md). `diagnosis` is the id a correct diagnosis gives: an id of the
# catalog where one models the mistake, else the id a new mistake model would get (marked NEW).
# They are not in PLANTED: tests/test_collateral.py grades them and records, as expected
# failures, what the grader does with them today.


@dataclass
class RealBug(Planted):
    new_model: bool = False  # no mistake model names it yet: `diagnosis` is the id proposed


def R(name, step, file, patches, diagnosis, new_model=False):
    return RealBug(name, step, diagnosis, file, patches, new_model=new_model)


REAL_BUGS = [
    # ------------------------------------------------------------------ attention
    # `x ** 1/2` is (x ** 1) / 2: the scale becomes d_k / 2 (equal to sqrt(d_k) only when d_k = 4).
    R(
        "rb_scale_precedence_half",
        "attention",
        "attention.py",
        [(SCORES, "scale = d_k ** 1 / 2\n    scores = q @ k.transpose(-2, -1) / scale")],
        "scale_precedence",
        new_model=True,
    ),
    # the thread's own form: the "scale" d_k ** 1 / 2 (= d_k / 2) used as a factor, as one would
    # use d_k ** -0.5: with d_k = 4 it is exactly a multiplication by sqrt(d_k)
    R(
        "rb_scale_precedence_times",
        "attention",
        "attention.py",
        [(SCORES, "scale = d_k ** 1 / 2\n    scores = q @ k.transpose(-2, -1) * scale")],
        "scale_precedence",
        new_model=True,
    ),
    # `x ** -1/2` is (x ** -1) / 2: multiplying by it divides by 2 d_k.
    R(
        "rb_scale_precedence_neg_half",
        "attention",
        "attention.py",
        [(SCORES, "scores = (q @ k.transpose(-2, -1)) * d_k ** -1/2")],
        "scale_precedence",
        new_model=True,
    ),
    # nn.Softmax() with no dim: the implicit dim is 1 for 4-D (the heads) and 0 for 3-D (the batch).
    R(
        "rb_softmax_no_dim",
        "attention",
        "attention.py",
        [(SOFTMAX, "weights = torch.nn.Softmax()(scores)")],
        "softmax_wrong_dim",
    ),
    R(
        "rb_softmax_dim_1",
        "attention",
        "attention.py",
        [(SOFTMAX, "weights = torch.nn.functional.softmax(scores, dim=1)")],
        "softmax_wrong_dim",
    ),
    # k re-read with view as (.., d_k, Lk) instead of transposed: the shape fits, the numbers do not.
    R(
        "rb_k_view_not_transpose",
        "attention",
        "attention.py",
        [(SCORES, "scores = q @ k.reshape(*k.shape[:-2], k.shape[-1], k.shape[-2]) / math.sqrt(d_k)")],
        "k_viewed_not_transposed",
        new_model=True,
    ),
    # scaled by the number of heads (q.size(1) for (B, H, L, d_k)) instead of d_k
    R(
        "rb_scale_by_num_heads",
        "attention",
        "attention.py",
        [("d_k = q.size(-1)", "d_k = q.size(1)")],
        "scale_by_num_heads",
        new_model=True,
    ),
    # the full width C ** -0.5 (C = H * d_k) as a factor
    R(
        "rb_scale_full_width_factor",
        "attention",
        "attention.py",
        [(SCORES, "scores = q @ k.transpose(-2, -1) * (q.size(1) * q.size(-1)) ** -0.5")],
        "scale_by_d_model",
    ),
    # scale = d ** -0.5, then divided by it: a multiplication by sqrt(d_k)
    R(
        "rb_scale_divides_by_inverse",
        "attention",
        "attention.py",
        [(SCORES, "scale = d_k ** -0.5\n    scores = q @ k.transpose(-2, -1) / scale")],
        "scale_inverted",
    ),
    R("rb_scale_without_sqrt", "attention", "attention.py", [("/ math.sqrt(d_k)", "/ q.shape[-1]")], "scale_not_sqrt"),
    R(
        "rb_scale_missing",
        "attention",
        "attention.py",
        [(SCORES, "scores = torch.matmul(q, k.transpose(-2, -1))")],
        "no_scale",
    ),
    # ------------------------------------------------------------------ masking
    # masked_fill is not in place: its result thrown away, the mask does nothing
    R(
        "rb_mask_fill_result_dropped",
        "masking",
        "attention.py",
        [(FILL, "scores.masked_fill(mask, -1e9)")],
        "mask_ignored",
    ),
    # -float('-inf') is +inf: blocked keys win the softmax (NaN where several do)
    R(
        "rb_mask_fill_plus_inf",
        "masking",
        "attention.py",
        [(FILL, "scores = scores.masked_fill(mask, -float('-inf'))")],
        "mask_fill_positive",
        new_model=True,
    ),
    # the keep-mask convention of F.scaled_dot_product_attention (True = may attend)
    R(
        "rb_mask_keep_convention",
        "masking",
        "attention.py",
        [(FILL, "scores = scores.masked_fill(mask.logical_not(), -1e9)")],
        "mask_inverted",
    ),
    # the mask multiplied into the scores: blocked scores become 0, not very negative
    R(
        "rb_mask_multiplied",
        "masking",
        "attention.py",
        [(FILL, "scores = scores * (1 - mask.to(scores.dtype))")],
        "mask_fill_zero",
    ),
    # ------------------------------------------------------------------ split_heads
    # heads cut with one view into (B * H, L, d_k), no transpose
    R(
        "rb_split_folded_view",
        "split_heads",
        "heads.py",
        [
            (
                "    x = x.view(B, L, num_heads, d_k)  # (B, L, H, d_k)\n    return x.transpose(1, 2)",
                "    return x.view(B * num_heads, -1, d_k).view(B, num_heads, -1, d_k)",
            )
        ],
        "split_without_transpose",
    ),
    # ------------------------------------------------------------------ output_projection
    # heads reshaped to (B, L, D) without moving the head axis first
    R(
        "rb_merge_reshape_no_permute",
        "output_projection",
        "output.py",
        [("heads.transpose(1, 2).contiguous().view(B, L, H * d_k)", "heads.reshape(B, L, H * d_k)")],
        "out_no_merge_transpose",
    ),
    # heads summed instead of concatenated: (B, L, d_k), which w_o cannot take
    R(
        "rb_heads_summed",
        "output_projection",
        "output.py",
        [("heads.transpose(1, 2).contiguous().view(B, L, H * d_k)", "heads.sum(dim=1)")],
        "heads_summed",
        new_model=True,
    ),
    # ------------------------------------------------------------------ multi_head_attention
    # heads folded into the batch (B*H, ...) and the mask tiled with repeat (batch-major)
    # where the layout is b * H + h: each head gets another sample's padding
    R(
        "rb_mha_mask_repeat_order",
        "multi_head_attention",
        "mha.py",
        [
            (
                MHA_FILL_LINE,
                "B, H = scores.shape[:2]\n"
                "        flat = scores.reshape(B * H, Lq, Lk)\n"
                "        tiled = blocked.expand(B, 1, Lq, Lk).reshape(B, Lq, Lk).repeat(H, 1, 1)  # should be repeat_interleave\n"
                "        scores = flat.masked_fill(tiled, -1e9).view(B, H, Lq, Lk)",
            )
        ],
        "mask_heads_order",
        new_model=True,
    ),
    # the padding mask without its head axis: (B, 1, Lk) lines B up with the heads
    R(
        "rb_mha_mask_missing_head_axis",
        "multi_head_attention",
        "mha.py",
        [(MHA_PAD, "blocked = blocked | pad_mask[:, None, :]")],
        "mask_missing_head_axis",
        new_model=True,
    ),
    # new layers made inside forward: fresh random weights on every call
    R(
        "rb_mha_layers_made_in_forward",
        "multi_head_attention",
        "mha.py",
        [
            (SPLIT_Q, "q = split_heads(nn.Linear(self.d_model, self.d_model).to(query)(query), self.num_heads)"),
            (SPLIT_K, "k = split_heads(nn.Linear(self.d_model, self.d_model).to(key)(key), self.num_heads)"),
            (SPLIT_V, "v = split_heads(nn.Linear(self.d_model, self.d_model).to(value)(value), self.num_heads)"),
        ],
        "layers_created_in_forward",
        new_model=True,
    ),
    # the padding mask unsqueezed on the query axis (B, 1, Lq, 1)
    R(
        "rb_mha_pad_mask_query_axis",
        "multi_head_attention",
        "mha.py",
        [(MHA_PAD, "blocked = blocked | pad_mask.unsqueeze(1).unsqueeze(3)")],
        "mha_mask_on_queries",
    ),
    # F.dropout without training=self.training: active after eval() too
    R(
        "rb_mha_functional_dropout_always",
        "multi_head_attention",
        "mha.py",
        [(MHA_DROPOUT, "weights = nn.functional.dropout(weights, self.dropout.p)")],
        "dropout_in_eval",
    ),
    # the query projected with the key's layer
    R(
        "rb_mha_query_through_key_layer",
        "multi_head_attention",
        "mha.py",
        [(SPLIT_Q, "q = split_heads(self.w_k(query), self.num_heads)")],
        "mha_shared_projection",
    ),
    # keys computed from the query input, values from the value input
    R(
        "rb_mha_keys_from_query",
        "multi_head_attention",
        "mha.py",
        [(SPLIT_K, "k = split_heads(self.w_k(query), self.num_heads)")],
        "mha_ignores_key",
    ),
    # the causal mask made (Lq, Lq), as for self-attention: wrong size in cross-attention
    R(
        "rb_mha_causal_square",
        "multi_head_attention",
        "mha.py",
        [(MHA_CAUSAL, "blocked = torch.ones(Lq, Lq, dtype=torch.bool, device=scores.device).triu(diagonal=1)")],
        "causal_mask_square",
        new_model=True,
    ),
    # a 0/1 mask added to the scores (an additive mask needs -inf or a large negative number)
    R(
        "rb_mha_bool_mask_added",
        "multi_head_attention",
        "mha.py",
        [(MHA_FILL_LINE, "scores = scores + blocked.to(scores.dtype)")],
        "mha_mask_added",
        new_model=True,
    ),
    # tril used as the blocked set: blocks the past and the token itself, lets the future through
    R(
        "rb_mha_causal_tril_blocked",
        "multi_head_attention",
        "mha.py",
        [(MHA_CAUSAL, "blocked = torch.ones_like(blocked).tril()")],
        "mha_causal_inverted",
        new_model=True,
    ),
    # the scale inside the module by the full width (a course seed's mistake, in the module)
    R(
        "rb_mha_scale_embedding_dim",
        "multi_head_attention",
        "mha.py",
        [(MHA_SCORES, "scores = q @ k.transpose(-2, -1) / self.d_model ** 0.5")],
        "mha_scale_by_d_model",
    ),
]
