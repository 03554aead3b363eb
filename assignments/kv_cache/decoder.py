"""Step `decoder` — causal self-attention with GQA and a KV cache, in one module (디코더 어텐션 블록).

This is the attention block of a modern decoder-only model (Llama, Mistral), without the
rotary position embedding (positions are left out of this assignment):

    x (B, L, D) -> w_q -> q (B, H, L, d_k)
                -> w_k -> k (B, H_kv, L, d_k) -+-> cache.update -> K, V (B, H_kv, L_past + L, d_k)
                -> w_v -> v (B, H_kv, L, d_k) -+
    q, K, V, offset causal mask -> grouped_query_attention -> (B, H, L, d_k) -> merge -> w_o

d_k = D // H. The query projection has H * d_k = D outputs; the key and value projections have
only H_kv * d_k outputs: that is where GQA saves (in the weights, and above all in the cache).

forward(x) with no cache is ordinary causal self-attention over x. forward(x, cache) treats x
as the next chunk of a longer text: its keys and values are appended to the cache, and query i
of the chunk is at absolute position len(cache before) + i (decode.offset_causal_mask). Feeding
a text in one piece, in chunks, or token by token must give the same outputs, row for row.

Names the grader relies on: w_q, w_k, w_v, w_o (nn.Linear layers; bias as the argument says).
"""
import torch.nn as nn

from .decode import offset_causal_mask
from .gqa import grouped_query_attention


class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, bias=False):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.d_k = d_model // n_heads
        # TODO: raise ValueError when n_heads is not a multiple of n_kv_heads; then create w_q
        # (D -> H * d_k), w_k and w_v (D -> H_kv * d_k), w_o (D -> D), all nn.Linear(..., bias=bias).
        raise NotImplementedError("TODO")

    def forward(self, x, cache=None):
        """x (B, L, D): the whole text, or with `cache` the next chunk. Returns (B, L, D)."""
        B, L, d_model = x.shape
        # TODO: project and split into heads: q (B, H, L, d_k), k and v (B, H_kv, L, d_k).
        raise NotImplementedError("TODO")
        # TODO: with a cache, append k, v and attend over the whole cache; then the offset
        # causal mask, grouped-query attention, merge the heads, w_o.
        raise NotImplementedError("TODO")
