"""Step `decoder` — 디코더 어텐션 블록 / causal self-attention with GQA and a KV cache, in one module.

[한국어]
단계 `decoder`: 디코더 어텐션 블록, GQA와 KV 캐시를 쓰는 인과 셀프 어텐션을 모듈 하나로.

지금까지의 단계를 하나의 nn.Module로 묶으세요 (회전 위치 임베딩(RoPE)은 없습니다):

    x (B, L, D) -> w_q -> q (B, H, L, d_k)
                -> w_k -> k (B, H_kv, L, d_k) -+-> cache.update -> K, V (B, H_kv, L_past + L, d_k)
                -> w_v -> v (B, H_kv, L, d_k) -+
    q, K, V, 오프셋 인과 마스크 -> grouped_query_attention -> (B, H, L, d_k) -> 헤드 결합 -> w_o

d_k = D // H. 쿼리 프로젝션의 출력은 H * d_k = D개이고, 키와 밸류 프로젝션의 출력은 H_kv * d_k개뿐입니다.

캐시 없이 forward(x)를 부르면 x 전체에 대한 보통의 인과 셀프 어텐션입니다. forward(x, cache)는 x를
더 긴 글의 다음 청크로 봅니다: 그 키와 밸류가 (헤드 H_kv개 모양 그대로) 캐시에 붙고, 청크의 쿼리 i는
절대 위치 (update 전의 len(cache)) + i에 있습니다. 글을 한 번에 넣든 토큰 하나씩 넣든 출력은 행마다
같아야 합니다.

채점기가 쓰는 이름: w_q, w_k, w_v, w_o (nn.Linear 층, bias는 인자대로).

예시: D = 2, H = 2 (d_k = 1), H_kv = 1. w_q와 w_o는 항등, w_k는 0 (그래서 가중치가 균등), w_v는 특성 0만
읽음: 토큰 i의 출력은 토큰 0..i의 특성 0의 평균이고, 토큰 하나씩 캐시와 함께 넣어도 같습니다:

    >>> import torch
    >>> from kv_cache.cache import KVCache
    >>> from kv_cache.decoder import CachedSelfAttention
    >>> m = CachedSelfAttention(d_model=2, n_heads=2, n_kv_heads=1).requires_grad_(False)
    >>> _ = m.w_q.weight.copy_(torch.eye(2)), m.w_o.weight.copy_(torch.eye(2))
    >>> _ = m.w_k.weight.zero_(), m.w_v.weight.copy_(torch.tensor([[1., 0.]]))
    >>> x = torch.tensor([[[1., 0.], [3., 0.], [5., 0.]]])   # (B=1, L=3, D=2)
    >>> m(x)         # (B, L, D): 누적 평균 1, (1+3)/2, (1+3+5)/3
    tensor([[[1., 1.],
             [2., 2.],
             [3., 3.]]])
    >>> cache = KVCache()
    >>> torch.equal(torch.cat([m(x[:, t:t + 1], cache) for t in range(3)], dim=1), m(x))   # 토큰 하나씩
    True

[English]
Step `decoder`: causal self-attention with GQA and a KV cache, in one module.

Put the steps so far into one nn.Module (without the rotary position embedding, RoPE):

    x (B, L, D) -> w_q -> q (B, H, L, d_k)
                -> w_k -> k (B, H_kv, L, d_k) -+-> cache.update -> K, V (B, H_kv, L_past + L, d_k)
                -> w_v -> v (B, H_kv, L, d_k) -+
    q, K, V, offset causal mask -> grouped_query_attention -> (B, H, L, d_k) -> merge -> w_o

d_k = D // H. The query projection has H * d_k = D outputs; the key and value projections have
only H_kv * d_k outputs.

forward(x) with no cache is ordinary causal self-attention over x. forward(x, cache) treats x as the
next chunk of a longer text: its keys and values (split into their H_kv heads) are appended to the
cache, and query i of the chunk is at absolute position (len(cache) before the update) + i. A text
fed in one piece or token by token gives the same outputs, row for row.

Names the grader relies on: w_q, w_k, w_v, w_o (nn.Linear layers; bias as the argument says).

Example: D = 2, H = 2 (d_k = 1), H_kv = 1. w_q and w_o identity, w_k zero (so the weights are
uniform), w_v reads feature 0 only: token i's output is the mean of feature 0 over tokens 0..i,
and token by token with a cache gives the same:

    >>> import torch
    >>> from kv_cache.cache import KVCache
    >>> from kv_cache.decoder import CachedSelfAttention
    >>> m = CachedSelfAttention(d_model=2, n_heads=2, n_kv_heads=1).requires_grad_(False)
    >>> _ = m.w_q.weight.copy_(torch.eye(2)), m.w_o.weight.copy_(torch.eye(2))
    >>> _ = m.w_k.weight.zero_(), m.w_v.weight.copy_(torch.tensor([[1., 0.]]))
    >>> x = torch.tensor([[[1., 0.], [3., 0.], [5., 0.]]])   # (B=1, L=3, D=2)
    >>> m(x)         # (B, L, D): running means
    tensor([[[1., 1.],
             [2., 2.],
             [3., 3.]]])
    >>> cache = KVCache()
    >>> steps = [m(x[:, t:t + 1], cache) for t in range(3)]   # each (B, 1, D)
    >>> torch.equal(torch.cat(steps, dim=1), m(x)), len(cache)   # token by token, cached tokens
    (True, 3)
"""
import torch.nn as nn

from .decode import offset_causal_mask
from .gqa import grouped_query_attention


class CachedSelfAttention(nn.Module):
    """[한국어] GQA와 선택적 KV 캐시를 쓰는 인과 셀프 어텐션. n_kv_heads=None이면 n_heads (보통의
    멀티헤드 어텐션). n_heads가 n_kv_heads의 배수가 아니면 ValueError.
    [English] Causal self-attention with GQA and an optional KV cache. n_kv_heads=None means n_heads
    (ordinary multi-head attention). ValueError when n_heads is not a multiple of n_kv_heads."""

    def __init__(self, d_model, n_heads, n_kv_heads=None, bias=False):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.d_k = d_model // n_heads
        # TODO (decoder)
        #   [한국어] n_heads가 n_kv_heads의 배수가 아니면 ValueError를 내세요. 그다음 w_q (D -> H * d_k),
        #            w_k와 w_v (D -> H_kv * d_k), w_o (D -> D)를 만드세요. 모두 nn.Linear(..., bias=bias).
        #   [English] raise ValueError when n_heads is not a multiple of n_kv_heads; then create w_q
        #             (D -> H * d_k), w_k and w_v (D -> H_kv * d_k), w_o (D -> D), all
        #             nn.Linear(..., bias=bias).
        ### BEGIN SOLUTION
        if n_heads % n_kv_heads != 0:
            raise ValueError(f"n_heads={n_heads} is not a multiple of n_kv_heads={n_kv_heads}")
        self.w_q = nn.Linear(d_model, n_heads * self.d_k, bias=bias)  # D -> H * d_k
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)  # D -> H_kv * d_k
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)  # D -> H_kv * d_k
        self.w_o = nn.Linear(d_model, d_model, bias=bias)  # D -> D
        ### END SOLUTION

    def forward(self, x, cache=None):  # x (B, L, D) -> (B, L, D)
        """[한국어] x (B, L, D): 글 전체, 또는 `cache`가 있으면 다음 청크. (B, L, D)를 반환합니다.
        [English] x (B, L, D): the whole text, or with `cache` the next chunk. Returns (B, L, D)."""
        B, L, d_model = x.shape  # (B, L, D)
        # TODO (decoder)
        #   [한국어] 프로젝션하고 헤드로 나누세요: q (B, H, L, d_k), k와 v (B, H_kv, L, d_k).
        #   [English] project and split into heads: q (B, H, L, d_k), k and v (B, H_kv, L, d_k).
        ### BEGIN SOLUTION
        q = self.w_q(x).view(B, L, self.n_heads, self.d_k).transpose(1, 2)  # (B, H, L, d_k)
        k = self.w_k(x).view(B, L, self.n_kv_heads, self.d_k).transpose(1, 2)  # (B, H_kv, L, d_k)
        v = self.w_v(x).view(B, L, self.n_kv_heads, self.d_k).transpose(1, 2)  # (B, H_kv, L, d_k)
        ### END SOLUTION
        # TODO (decoder)
        #   [한국어] 캐시가 있으면 k, v를 붙이고 캐시 전체 (B, H_kv, L_past + L, d_k)에 어텐션하세요.
        #            그다음 오프셋 인과 마스크 (L, L_past + L), 그룹 쿼리 어텐션 (B, H, L, d_k),
        #            헤드 결합 (B, L, D), w_o.
        #   [English] with a cache, append k, v and attend over the whole cache
        #             (B, H_kv, L_past + L, d_k); then the offset causal mask (L, L_past + L),
        #             grouped-query attention (B, H, L, d_k), merge the heads (B, L, D), w_o.
        ### BEGIN SOLUTION
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H_kv, L_past + L, d_k) each
        blocked = offset_causal_mask(L, k.size(2), device=x.device)  # (L, L_past + L)
        out = grouped_query_attention(q, k, v, blocked)  # (B, H, L, d_k)
        out = out.transpose(1, 2).contiguous().view(B, L, d_model)  # (B, L, D)
        return self.w_o(out)  # (B, L, D)
        ### END SOLUTION
