"""kv_cache — what comes after multi-head attention: decoding fast, one token at a time.

Fill in the TODOs file by file, in this order, and run `pytest assignments/` after each:

    cache.py     KVCache                                 keep the keys and values already computed (키-값 캐시)
    decode.py    offset_causal_mask, cached_attention    new queries against cached + new keys, causally
    gqa.py       repeat_kv, grouped_query_attention      fewer K/V heads than query heads (그룹 쿼리 어텐션)
    decoder.py   CachedSelfAttention                     everything above in one module

Conventions used in every file:
    * every tensor is batch-first: (B, ...)
    * B = batch, L = sequence length, D = d_model, H = n_heads (query heads),
      H_kv = n_kv_heads (key/value heads), d_k = D // H (the size of one head)
    * per-head tensors are (B, heads, L, d_k): the sequence is dim 2, as in the mha assignment
    * a mask is a bool tensor with True = BLOCKED (the key may not be attended to).
      F.scaled_dot_product_attention uses the opposite convention (True = may attend) and is
      not allowed in this assignment: these are the functions you write.

This file imports nothing on purpose: a mistake in one step's file must not stop the others
from being graded.
"""
