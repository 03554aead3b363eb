"""단계 `incremental_decoding`: 증분 디코딩, 새 토큰이 캐시된 모든 것을 봅니다.

새 청크에 대해서만 어텐션을 돌리세요: 청크의 쿼리 L_new개가 캐시된 키 L = L_past + L_new개 전부 (예전
키들과, 먼저 캐시에 붙인 청크 자신의 키들)를 봅니다. 결과는 글 전체에 인과 어텐션을 돌렸을 때 그 행들과
같아야 합니다.

까다로운 부분은 인과 마스크입니다: 청크 안의 쿼리 i는 절대 위치 p = L_past + i = (L - L_new) + i에
있고, 키 0..p를 볼 수 있습니다.

청크의 마스크는 전체 (L, L) 인과 마스크의 오른쪽 아래 모서리, 즉 마지막 L_new개 행입니다 (오프셋
L - L_new). 보통의 왼쪽 위 마스크는 틀립니다 (아래 예시).

L_new == L이면 (아직 캐시가 없는 프롬프트) 이것은 보통의 (L, L) 인과 마스크입니다.

어텐션 자체는 mha 과제와 같습니다: 스케일된 점수, 아주 큰 음수(유한한 값)로 마스킹, 키 방향
소프트맥스, V의 가중합. 결과는 입력의 dtype으로 돌려주세요.

예시: 마스크 (True = 막힘), 그리고 캐시로 나누어 계산해도 같은 결과 (cache.py를 먼저 완성하세요):

    >>> import torch
    >>> from kv_cache.cache import KVCache
    >>> from kv_cache.decode import cached_attention, offset_causal_mask
    >>> offset_causal_mask(2, 5)     # (L_new=2, L=5): 캐시된 토큰 3개 뒤, 쿼리 0은 위치 3
    tensor([[False, False, False, False,  True],
            [False, False, False, False, False]])
    >>> torch.triu(torch.ones(1, 4, dtype=torch.bool), diagonal=1)   # 틀림: 왼쪽 위 마스크
    tensor([[False,  True,  True,  True]])
    >>> x = torch.tensor([[[[1., 0.], [0., 1.], [2., 2.]]]])     # (B=1, H=1, L=3, d_k=2)
    >>> full = cached_attention(x, x, x, KVCache())     # 빈 캐시: 보통의 인과 어텐션
    >>> cache = KVCache()
    >>> first = cached_attention(x[:, :, :2], x[:, :, :2], x[:, :, :2], cache)   # 프리필
    >>> last = cached_attention(x[:, :, 2:], x[:, :, 2:], x[:, :, 2:], cache)    # 디코드
    >>> torch.allclose(torch.cat([first, last], dim=2), full), len(cache)      # full과 같음, 캐시된 토큰 3개
    (True, 3)
"""
import math

import torch


def offset_causal_mask(q_len, k_len, device=None):  # -> (q_len, k_len)
    """-> `device` 위의 bool (q_len, k_len), True = 막힘. 쿼리 q_len개는 위치 k_len개 중
    마지막 q_len개입니다: 쿼리 i (절대 위치 k_len - q_len + i)는 키 0..그 위치까지 봅니다.
    """
    # TODO (incremental_decoding)
    #   j > (k_len - q_len) + i이면 쿼리 i의 키 j를 막으세요. 결과 모양 (q_len, k_len).
    raise NotImplementedError("TODO")


def cached_attention(q, k, v, cache):  # -> (B, H, L_new, d_v)
    """캐시 전체에 대한 새 청크의 인과 어텐션. q (B, H, L_new, d_k), k (B, H, L_new, d_k),
    v (B, H, L_new, d_v): 청크의 프로젝션. cache: update(k, v) -> (K, V)로 캐시 전체를 돌려주는 것
    (예: KVCache). k, v를 캐시에 붙인 뒤 out (B, H, L_new, d_v)를 반환합니다.
    """
    # TODO (incremental_decoding)
    #   먼저 청크를 캐시에 붙이세요 (청크 자신의 키도 볼 수 있는 키입니다).
    #   K (B, H, L, d_k), V (B, H, L, d_v), L = L_past + L_new.
    raise NotImplementedError("TODO")
    # TODO (incremental_decoding)
    #   새 쿼리와 캐시된 모든 키의 스케일된 점수 (B, H, L_new, L), 오프셋 인과 마스크
    #   (L_new, L) (아주 큰 음수, 유한한 값으로 채우기), 키 방향 소프트맥스, V의 가중합
    #   -> (B, H, L_new, d_v).
    L_new, L = ..., ...  # q (B, H, L_new, d_k), K (B, H, L, d_k)
    scores = ...  # (B, H, L_new, L)
    blocked = ...  # (L_new, L)
    scores = ...  # (B, H, L_new, L)
    weights = ...  # (B, H, L_new, L)
    raise NotImplementedError("TODO")  # return (B, H, L_new, d_v)
