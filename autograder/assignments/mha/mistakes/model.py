"""Multi-head attention written once more, with one knob per known way of getting it wrong.

`package(**knobs)` returns an object shaped like a student's `mha` package (`.padding.pad_batch`,
`.attention.scaled_dot_product_attention`, `.mha.MultiHeadAttention`, ...). With no knobs it is
correct (a test holds it to the reference on every check); each knob changes one part of the
computation, e.g. `scale="d_model"` or `k_from="w_q"`. A known mistake (see mistakes/<step>.py)
is a list of knob settings: it is recognised by what it computes, so every way of writing it
that computes the same thing is recognised too.

Instructor-only, like the rest of autograder/assignments/mha/mistakes/: it is a second reference.

Over 400 lines: it is a whole multi-head attention with a knob per known mistake; one file,
so that each knob sits on the line it changes.
"""

import math
from types import SimpleNamespace

import torch
import torch.nn as nn

DEFAULTS = {
    # padding
    "pad_side": "right",
    "pad_mask_true": "pad",
    "pad_truncate": True,
    "pad_fill": "pad_id",
    "pad_keep_longer_max_len": True,
    "pad_empty_sequence": "ok",
    "pad_empty_batch": "raise",
    "pad_mutate": None,
    "pad_mask_dtype": torch.bool,
    "pad_ids_dtype": torch.long,
    # embedding
    "emb_padding_idx": "pad_id",
    "emb_scale": False,
    "emb_ids_cpu": False,
    # qkv projection: which layer computes q, k, v; which attributes are one layer
    "q_from": "w_q",
    "k_from": "w_k",
    "v_from": "w_v",
    "alias": (),
    "qkv_bias_always": False,
    "fused_split": "blocks",
    "fused_order": "qkv",
    "fused_bias_always": False,
    # heads
    "split": "view_transpose",
    "merge": "transpose_contiguous",
    "split_check": "raise",
    # attention
    "scale": "d_k",
    "scale_place": "scores",
    "softmax_dim": -1,
    "k_transpose": (-2, -1),
    "softmax": True,
    "returns": "out_weights",
    "out_upcast": False,
    "weights_are_scores": False,
    # masking
    "fill": "min",
    "mask_place": "fill",
    "mask_invert": False,
    "mask_cpu": False,
    "padding_mask_invert": False,
    "padding_mask_shape": "keys",
    "padding_mask_pad_id": True,
    "causal": "triu1",
    "causal_device": True,
    # output projection
    "out_bias": "arg",
    "out_cpu": False,
    # module
    "mha_key_from": "key",
    "mha_value_from": "value",
    "mha_pad_mask": "keys",
    "mha_causal": "top_left",
    "mha_dropout": "weights",
    "mha_dropout_p": "arg",
    "mha_detach": False,
    "mha_heads": "split",
    "mha_mask_device": "scores",
    "mha_mask_buffer": True,
    "mha_pad_tiling": None,
    "mha_layers_in_forward": False,
}


def package(**knobs):
    """A `mha`-like package computing attention with `knobs` changed from the defaults."""
    unknown = set(knobs) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown knobs: {sorted(unknown)}")
    K = SimpleNamespace(**{**DEFAULTS, **knobs})
    heads = SimpleNamespace(
        split_heads=lambda x, num_heads: split_heads(K, x, num_heads), merge_heads=lambda x: merge_heads(K, x)
    )
    attention = SimpleNamespace(scaled_dot_product_attention=lambda q, k, v, mask=None: attend(K, q, k, v, mask))
    return SimpleNamespace(
        padding=SimpleNamespace(
            pad_batch=lambda sequences, pad_id=0, max_len=None: pad_batch(K, sequences, pad_id, max_len)
        ),
        embedding=SimpleNamespace(TokenEmbedding=token_embedding(K)),
        projection=SimpleNamespace(QKVProjection=qkv_projection(K), FusedQKVProjection=fused_projection(K)),
        heads=heads,
        attention=attention,
        masking=SimpleNamespace(
            padding_mask=lambda ids, pad_id=0: padding_mask(K, ids, pad_id),
            causal_mask=lambda seq_len, device=None: causal_mask(K, seq_len, device),
        ),
        output=SimpleNamespace(OutputProjection=output_projection(K)),
        mha=SimpleNamespace(MultiHeadAttention=multi_head_attention(K)),
    )


# ---------------------------------------------------------------------------- padding


def pad_batch(K, sequences, pad_id, max_len):
    if len(sequences) == 0:
        if K.pad_empty_batch == "raise":
            raise ValueError("empty batch")
        if K.pad_empty_batch == "zeros":
            return torch.zeros(0, 0, dtype=torch.long), torch.zeros(0, 0, dtype=torch.bool)
        sequences[0]  # IndexError, as code that reads the first sequence gives
    if K.pad_empty_sequence == "reject" and min(map(len, sequences)) == 0:
        raise ValueError("empty sequence")
    cut = max_len is not None and K.pad_truncate
    lengths = [min(len(s), max_len) if cut else len(s) for s in sequences]
    if max_len is None:
        L = max(lengths)
    elif not K.pad_truncate:
        L = max(max(lengths), max_len)
    else:
        L = max_len if K.pad_keep_longer_max_len else max(lengths)
    fill = pad_id if K.pad_fill == "pad_id" else 0
    ids = torch.full((len(sequences), L), fill, dtype=torch.long)
    mask = torch.ones(len(sequences), L, dtype=torch.bool)
    for b, (seq, n) in enumerate(zip(sequences, lengths, strict=True)):
        where = slice(0, n) if K.pad_side == "right" else slice(L - n, L)
        ids[b, where] = torch.tensor(list(seq[:n]), dtype=torch.long)
        mask[b, where] = False
    if K.pad_mask_true == "token":
        mask = ~mask
    elif K.pad_mask_true == "pad_id":  # every id equal to pad_id, real tokens too
        mask = ids == fill
    elif K.pad_mask_true == "nothing":  # made from the padded rows: every row is full length then
        mask = torch.zeros_like(mask)
    if K.pad_mutate == "extend":
        for seq in sequences:
            seq.extend([pad_id] * (L - len(seq)))
    elif K.pad_mutate == "replace":
        for i, seq in enumerate(sequences):
            sequences[i] = list(seq) + [pad_id] * (L - len(seq))
    return ids.to(K.pad_ids_dtype), mask.to(K.pad_mask_dtype)


# ---------------------------------------------------------------------------- embedding


def token_embedding(K):
    class TokenEmbedding(nn.Module):
        def __init__(self, vocab_size, d_model, pad_id=0):
            super().__init__()
            padding_idx = {"pad_id": pad_id, "zero": 0}.get(K.emb_padding_idx)
            self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)
            if K.emb_padding_idx == "zeroed_row":  # zero at creation, but still trained
                with torch.no_grad():
                    self.embedding.weight[pad_id] = 0.0

        def forward(self, ids):
            out = self.embedding(ids.cpu() if K.emb_ids_cpu else ids)
            return out * math.sqrt(self.embedding.embedding_dim) if K.emb_scale else out

    return TokenEmbedding


# ---------------------------------------------------------------------------- projections


def qkv_projection(K):
    class QKVProjection(nn.Module):
        def __init__(self, d_model, bias=True):
            super().__init__()
            bias = True if K.qkv_bias_always else bias
            self.w_q = nn.Linear(d_model, d_model, bias=bias)
            self.w_k = nn.Linear(d_model, d_model, bias=bias)
            self.w_v = nn.Linear(d_model, d_model, bias=bias)
            for name, same_as in K.alias:  # e.g. self.w_k = self.w_q: one layer under two names
                setattr(self, name, getattr(self, same_as))

        def forward(self, x):
            return tuple(getattr(self, layer)(x) for layer in (K.q_from, K.k_from, K.v_from))

    return QKVProjection


def fused_projection(K):
    class FusedQKVProjection(nn.Module):
        def __init__(self, d_model, bias=True):
            super().__init__()
            self.d_model = d_model
            self.c_attn = nn.Linear(d_model, 3 * d_model, bias=True if K.fused_bias_always else bias)

        def forward(self, x):
            qkv = self.c_attn(x)
            D = self.d_model
            if K.fused_split == "blocks":
                parts = dict(zip(K.fused_order, qkv.split(D, dim=-1), strict=False))
                return parts["q"], parts["k"], parts["v"]
            if K.fused_split == "interleaved":  # view(..., D, 3): q, k, v take every third feature
                return tuple(qkv.view(*x.shape[:-1], D, 3).unbind(-1))
            if K.fused_split == "per_pair":  # the patch of an older catalog: view(..., 2, -1).chunk(3)
                return tuple(t.reshape(x.shape) for t in qkv.view(*x.shape[:-1], 2, -1).chunk(3, dim=-1))
            if K.fused_split == "wrong_dim":
                return tuple(qkv.chunk(3, dim=1))
            raise ValueError(K.fused_split)

    return FusedQKVProjection


# ---------------------------------------------------------------------------- heads


def split_heads(K, x, num_heads):
    B, L, D = x.shape
    if D % num_heads != 0:
        if K.split_check == "raise":
            raise ValueError("not divisible")
        if K.split_check == "assert":
            raise AssertionError("not divisible")
    d_k = D // num_heads
    if K.split == "view_transpose":
        return x.view(B, L, num_heads, d_k).transpose(1, 2)
    if K.split == "view_only":  # (B, L, D) read as (B, H, L, d_k): heads mix tokens
        return x.view(B, num_heads, L, d_k)
    if K.split == "interleaved":  # head h takes features h, h + H, h + 2H, ...
        return x.view(B, L, d_k, num_heads).permute(0, 3, 1, 2)
    if K.split == "one_slice":  # every head gets the first d_k features
        return x[..., :d_k].unsqueeze(1).expand(B, num_heads, L, d_k)
    raise ValueError(K.split)


def merge_heads(K, x):
    B, H, L, d_k = x.shape
    if K.merge == "transpose_contiguous":
        return x.transpose(1, 2).contiguous().view(B, L, H * d_k)
    if K.merge == "no_transpose":
        return x.contiguous().view(B, L, H * d_k)
    if K.merge == "view_not_contiguous":
        return x.transpose(1, 2).view(B, L, H * d_k)
    if K.merge == "interleaved":
        return x.permute(0, 2, 3, 1).reshape(B, L, H * d_k)
    if K.merge == "sum":  # the heads added up: (B, L, d_k), which no (D -> D) layer takes
        return x.sum(dim=1)
    raise ValueError(K.merge)


# ---------------------------------------------------------------------------- attention


def scale_of(K, q, k, v, heads=None):
    """The divisor of the scores."""
    d_k = q.size(-1)
    if K.scale == "d_k":
        return math.sqrt(d_k)
    # ** binds before /: `d_k ** 1/2` is (d_k ** 1) / 2, `d_k ** -1/2` is (d_k ** -1) / 2
    if K.scale == "half":  # scores / d_k ** 1/2
        return d_k / 2
    if K.scale == "half_factor":  # scores * d_k ** 1/2
        return 2 / d_k
    if K.scale == "negative_half":  # scores * d_k ** -1/2
        return 2 * d_k
    if K.scale == "negative_half_divisor":  # scores / d_k ** -1/2
        return 1 / (2 * d_k)
    if K.scale == "size_1":  # sqrt(q.size(1)): the number of heads of (B, H, L, d_k), Lq of (B, L, d_k)
        return math.sqrt(q.size(1))
    if K.scale == "none":
        return 1.0
    if K.scale == "d_k_not_sqrt":
        return d_k
    if K.scale == "inverted":  # / d_k ** -0.5, i.e. times sqrt(d_k)
        return d_k**-0.5
    if K.scale == "d_v":
        return math.sqrt(v.size(-1))
    if K.scale == "d_model":  # all heads together: d_k * H (q.size(1) is H for (B, H, L, d_k))
        return math.sqrt(d_k * (q.size(1) if heads is None else heads))
    raise ValueError(K.scale)


def attend(K, q, k, v, mask=None, heads=None):
    scale = scale_of(K, q, k, v, heads)
    if K.k_transpose == "view":  # k re-read as (..., d_k, Lk): the shape of k^T, not its numbers
        scores = q @ k.reshape(*k.shape[:-2], k.shape[-1], k.shape[-2])
    else:
        scores = q @ k.transpose(*K.k_transpose) if K.k_transpose else q @ k
    if K.scale_place == "scores":
        scores = scores / scale
    if mask is not None:
        if K.mask_cpu:
            mask = mask.cpu()
        blocked = ~mask if K.mask_invert else mask
        if K.mask_place == "fill":
            scores = scores.masked_fill(blocked, fill_value(K, scores))
        elif K.mask_place == "add":  # scores + mask: a bool mask adds 1, blocks nothing
            scores = scores + blocked
    if K.softmax:  # noqa: SIM108 - a knob's line, as the reference's
        weights = torch.softmax(scores, dim=softmax_dim(K, scores))
    else:
        weights = scores
    if K.scale_place == "weights":
        weights = weights / scale
    if mask is not None and K.mask_place == "after_softmax":
        weights = weights.masked_fill(~mask if K.mask_invert else mask, 0.0)
    out = weights.double() @ v.double() if K.out_upcast else weights @ v
    if K.weights_are_scores:
        weights = scores
    return (weights, out) if K.returns == "weights_out" else (out, weights)


def softmax_dim(K, scores):
    """The softmax's dim; "implicit" is what nn.Softmax() and F.softmax without dim pick: dim 0
    for 0-, 1- and 3-D tensors (the batch of (B, L, L)), dim 1 otherwise (the heads of (B, H, L, L))."""
    if K.softmax_dim == "implicit":
        return 0 if scores.dim() in (0, 1, 3) else 1
    return K.softmax_dim


def fill_value(K, scores):
    return {"min": torch.finfo(scores.dtype).min, "zero": 0.0, "-inf": float("-inf"), "+inf": float("inf")}[K.fill]


# ---------------------------------------------------------------------------- masks


def padding_mask(K, ids, pad_id):
    pad = ids == (pad_id if K.padding_mask_pad_id else 0)
    if K.padding_mask_invert:  # built with != (True at real tokens)
        pad = ~pad
    if K.padding_mask_shape == "keys":
        return pad[:, None, None, :]
    if K.padding_mask_shape == "queries":
        return pad[:, None, :, None]
    if K.padding_mask_shape == "flat":
        return pad
    if K.padding_mask_shape == "three_dims":
        return pad[:, None, :]
    raise ValueError(K.padding_mask_shape)


def causal_mask(K, seq_len, device=None):
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device if K.causal_device else None)
    return {
        "triu1": lambda: torch.triu(ones, diagonal=1),
        "triu0": lambda: torch.triu(ones, diagonal=0),
        "tril-1": lambda: torch.tril(ones, diagonal=-1),
        "tril0": lambda: torch.tril(ones, diagonal=0),
    }[K.causal]()


# ---------------------------------------------------------------------------- output


def output_projection(K):
    class OutputProjection(nn.Module):
        def __init__(self, d_model, bias=True):
            super().__init__()
            self.w_o = nn.Linear(d_model, d_model, bias={"arg": bias, "never": False, "always": True}[K.out_bias])

        def forward(self, heads):
            merged = merge_heads(K, heads)
            return self.w_o(merged.cpu() if K.out_cpu else merged)

    return OutputProjection


# ---------------------------------------------------------------------------- the module


def multi_head_attention(K):
    class MultiHeadAttention(nn.Module):
        def __init__(self, d_model, num_heads, dropout=0.0, bias=True, causal=False):
            super().__init__()
            if d_model % num_heads != 0:
                raise ValueError("not divisible")
            self.d_model, self.num_heads, self.causal = d_model, num_heads, causal
            in_bias = True if K.qkv_bias_always else bias
            self.w_q = nn.Linear(d_model, d_model, bias=in_bias)
            self.w_k = nn.Linear(d_model, d_model, bias=in_bias)
            self.w_v = nn.Linear(d_model, d_model, bias=in_bias)
            self.w_o = nn.Linear(d_model, d_model, bias={"arg": bias, "never": False, "always": True}[K.out_bias])
            for name, same_as in K.alias:
                setattr(self, name, getattr(self, same_as))
            self.dropout = nn.Dropout(dropout if K.mha_dropout_p == "arg" else 0.0)
            if not K.mha_mask_buffer:  # a plain attribute: .to() leaves it where it is
                self.future = torch.triu(torch.ones(256, 256, dtype=torch.bool), diagonal=1)

        def split(self, x):
            if K.mha_heads == "one_slice":
                B, L, _ = x.shape
                d_k = self.d_model // self.num_heads
                return x[..., :d_k].unsqueeze(1).expand(B, self.num_heads, L, d_k)
            return split_heads(K, x, self.num_heads)

        def forward(self, query, key=None, value=None, pad_mask=None):
            key = query if key is None else key
            value = key if value is None else value
            sources = {"query": query, "key": key, "value": value}
            layers = {"w_q": self.w_q, "w_k": self.w_k, "w_v": self.w_v}
            if K.mha_layers_in_forward:  # new layers on every call: fresh random weights, never the loaded ones
                layers = {name: nn.Linear(self.d_model, self.d_model).to(query) for name in layers}
            q = self.split(layers[K.q_from](query))
            k = self.split(layers[K.k_from](sources[K.mha_key_from]))
            v = self.split(layers[K.v_from](sources[K.mha_value_from]))
            scores = q @ k.transpose(-2, -1)
            if K.scale_place == "scores":
                scores = scores / scale_of(K, q, k, v, heads=self.num_heads)
            Lq, Lk = scores.shape[-2:]
            device = scores.device if K.mha_mask_device == "scores" else None
            blocked = torch.zeros(Lq, Lk, dtype=torch.bool, device=device)
            if self.causal and K.mha_causal != "ignored":
                if not K.mha_mask_buffer:
                    blocked = self.future[:Lq, :Lk]
                elif K.mha_causal == "square":  # (Lq, Lq), as for self-attention
                    blocked = torch.ones(Lq, Lq, dtype=torch.bool, device=device).triu(diagonal=1)
                elif K.mha_causal == "tril":  # tril taken as the blocked set: the past and the token itself
                    blocked = torch.ones_like(blocked).tril()
                else:
                    diagonal = {"top_left": 1, "bottom_right": 1 + Lk - Lq, "with_diagonal": 0}[K.mha_causal]
                    blocked = torch.ones_like(blocked).triu(diagonal=diagonal)
            if pad_mask is not None and K.mha_pad_mask != "ignored":
                pad = ~pad_mask if K.mha_pad_mask == "inverted" else pad_mask
                blocked = (
                    blocked
                    | {
                        "queries": lambda: pad[:, None, :, None],
                        "no_head_axis": lambda: pad[:, None, :],  # (B, 1, Lk): B lines up with the heads
                    }.get(K.mha_pad_mask, lambda: pad[:, None, None, :])()
                )
            if K.mha_pad_tiling is not None:
                scores = masked_with_tiled_mask(K, scores, blocked)
            elif K.mask_place == "fill":
                scores = scores.masked_fill(blocked, fill_value(K, scores))
            elif K.mask_place == "add":  # the 0/1 mask added: blocked scores grow by 1, nothing is blocked
                scores = scores + blocked.to(scores.dtype)
            weights = torch.softmax(scores, dim=softmax_dim(K, scores))
            if K.mha_dropout == "weights":
                weights = self.dropout(weights)
            elif K.mha_dropout == "always":
                weights = nn.functional.dropout(weights, self.dropout.p, training=True)
            out = merge_heads(K, weights @ v)
            out = self.w_o(out.detach() if K.mha_detach else out)
            return self.dropout(out) if K.mha_dropout == "output" else out

    return MultiHeadAttention


def masked_with_tiled_mask(K, scores, blocked):
    """The heads folded into the batch and the (B, ...) mask tiled to match, in the other order:
    "repeat" tiles it batch after batch (row b * H + h gets sample (b * H + h) mod B's mask) where
    the rows are b * H + h; "repeat_interleave" repeats each sample H times (row i gets sample
    i // H's) where the rows are h * B + b. Either way a head sees another sample's padding."""
    B, H, Lq, Lk = scores.shape
    mask = blocked.expand(B, 1, Lq, Lk).reshape(B, Lq, Lk)
    if K.mha_pad_tiling == "repeat":
        flat = scores.reshape(B * H, Lq, Lk)
        return flat.masked_fill(mask.repeat(H, 1, 1), fill_value(K, scores)).view(B, H, Lq, Lk)
    if K.mha_pad_tiling == "repeat_interleave":
        flat = scores.transpose(0, 1).reshape(H * B, Lq, Lk)
        filled = flat.masked_fill(mask.repeat_interleave(H, dim=0), fill_value(K, scores))
        return filled.view(H, B, Lq, Lk).transpose(0, 1)
    raise ValueError(K.mha_pad_tiling)
