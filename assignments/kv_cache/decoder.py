"""단계 `decoder`: 디코더 어텐션 블록, GQA와 KV 캐시를 쓰는 인과 셀프 어텐션을 모듈 하나로.

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
"""
import torch.nn as nn

from .decode import offset_causal_mask
from .gqa import grouped_query_attention


class CachedSelfAttention(nn.Module):
    """GQA와 선택적 KV 캐시를 쓰는 인과 셀프 어텐션. n_kv_heads=None이면 n_heads (보통의
    멀티헤드 어텐션). n_heads가 n_kv_heads의 배수가 아니면 ValueError.
    """

    def __init__(self, d_model, n_heads, n_kv_heads=None, bias=False):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.d_k = d_model // n_heads
        # TODO (decoder)
        #   n_heads가 n_kv_heads의 배수가 아니면 ValueError를 내세요. 그다음 w_q (D -> H * d_k),
        #   w_k와 w_v (D -> H_kv * d_k), w_o (D -> D)를 만드세요. 모두 nn.Linear(..., bias=bias).
        raise NotImplementedError("TODO")

    def forward(self, x, cache=None):  # x (B, L, D) -> (B, L, D)
        """x (B, L, D): 글 전체, 또는 `cache`가 있으면 다음 청크. (B, L, D)를 반환합니다."""
        B, L, d_model = x.shape  # (B, L, D)
        # TODO (decoder)
        #   프로젝션하고 헤드로 나누세요: q (B, H, L, d_k), k와 v (B, H_kv, L, d_k).
        raise NotImplementedError("TODO")
        # TODO (decoder)
        #   캐시가 있으면 k, v를 붙이고 캐시 전체 (B, H_kv, L_past + L, d_k)에 어텐션하세요.
        #   그다음 오프셋 인과 마스크 (L, L_past + L), 그룹 쿼리 어텐션 (B, H, L, d_k),
        #   헤드 결합 (B, L, D), w_o.
        # if cache is not None:
        k, v = ..., ...  # (B, H_kv, L_past + L, d_k) each
        blocked = ...  # (L, L_past + L)
        out = ...  # (B, H, L, d_k)
        out = ...  # (B, L, D)
        raise NotImplementedError("TODO")  # return (B, L, D)
