"""mha — multi-head attention, one step per file.

Fill in the TODOs file by file, in this order, and run `pytest assignments/` after each:

    padding.py     pad_batch                        a batch of token-id lists -> (B, L) tensor + pad mask
    embedding.py   TokenEmbedding                   token ids -> vectors (B, L, d_model)
    projection.py  QKVProjection, FusedQKVProjection  vectors -> queries, keys, values
    heads.py       split_heads, merge_heads         (B, L, D) <-> (B, H, L, d_k)
    attention.py   scaled_dot_product_attention     softmax(q k^T / sqrt(d_k)) v
    masking.py     padding_mask, causal_mask        which keys a query may not look at
    output.py      OutputProjection                 merge the heads, then w_o
    mha.py         MultiHeadAttention               everything above in one module

Conventions used in every file:
    * every tensor is batch-first: (B, ...)
    * B = batch, L = sequence length, D = d_model, H = num_heads, d_k = D // H
    * a mask is a bool tensor with True = BLOCKED (the key may not be attended to).
      This is the convention of nn.MultiheadAttention. Careful: F.scaled_dot_product_attention
      uses the opposite one (True = may attend).

This file imports nothing on purpose: a mistake in one step's file must not stop the others
from being graded.
"""
