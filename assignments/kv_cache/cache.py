"""단계 `kv_cache`: 키-밸류 캐시, 글을 한 토큰씩 생성할 때 씁니다.

지금까지 본 모든 토큰의 키와 밸류를 저장하세요: update(k, v)는 새 청크의 k, v를 저장된 것 뒤에 붙이고
캐시 전체 (K, V)를 반환합니다. 쿼리는 캐시하지 않습니다.

모양 (헤드별, 배치 먼저, mha 과제처럼 시퀀스는 dim 2):

    새 청크의 k               (B, H_kv, L_new, d_k)      H_kv = 키/밸류 헤드 수 (gqa.py 참고)
    새 청크의 v               (B, H_kv, L_new, d_v)      d_v는 d_k와 다를 수 있음
    update 뒤 캐시된 K        (B, H_kv, L_past + L_new, d_k)
    update 뒤 캐시된 V        (B, H_kv, L_past + L_new, d_v)

새 청크는 dim 2, 즉 시퀀스 축을 따라 torch.cat으로 이어 붙입니다 (dim 1은 헤드, dim 3은 특성).

청크는 여러 토큰일 수도 있고 (프롬프트를 한 번에: "프리필"), 토큰 하나일 수도 있습니다 ("디코드").
len(cache)는 update 호출 횟수가 아니라 캐시된 위치(토큰) 수입니다.

예시: B = 1, H_kv = 1, d_k = d_v = 2. 두 토큰짜리 프롬프트, 그다음 토큰 하나:

    >>> import torch
    >>> from kv_cache.cache import KVCache
    >>> cache = KVCache()
    >>> k = torch.tensor([[[[1., 1.], [2., 2.]]]])    # (B=1, H_kv=1, L_new=2, d_k=2): 토큰 0, 1
    >>> K, V = cache.update(k, 10 * k)                # 프리필
    >>> new = torch.tensor([[[[3., 3.]]]])            # (1, 1, 1, 2): 토큰 하나 더
    >>> K, V = cache.update(new, 10 * new)            # 디코드
    >>> K[0, 0]      # (L=3, d_k=2): 예전 행들 뒤에 새 행
    tensor([[1., 1.],
            [2., 2.],
            [3., 3.]])
    >>> len(cache)   # 호출 횟수(2)가 아니라 토큰 수
    3
    >>> cache.reset(); len(cache)          # 다음 글을 위해 비움
    0
"""
import torch


class KVCache:
    """지금까지 본 모든 위치의 키와 밸류, 헤드별: (B, H_kv, L, d_k / d_v). update(k, v)는 청크를 뒤에
    붙이고 캐시 전체 (K, V)를 반환합니다; len(cache)는 캐시된 위치 수 L (비었으면 0); reset()은
    캐시를 비웁니다.
    """

    def __init__(self):
        # TODO (kv_cache)
        #   빈 캐시로 시작하세요 (예: self.k = self.v = None). 클래스 본문이 아니라 self에
        #   만들어야 캐시 두 개가 내용을 공유하지 않습니다.
        raise NotImplementedError("TODO")

    def update(self, k, v):
        """k (B, H_kv, L_new, d_k), v (B, H_kv, L_new, d_v) -> (K, V): 이것들을 붙인 뒤의
        캐시 전체, K (B, H_kv, L_past + L_new, d_k), V (B, H_kv, L_past + L_new, d_v).
        """
        # TODO (kv_cache)
        #   첫 청크는 그대로 캐시가 되고, 그 뒤 청크는 시퀀스 축(dim 2)을 따라 뒤에 붙입니다.
        #   (B, H_kv, L_past, d_k) + (B, H_kv, L_new, d_k) -> (B, H_kv, L_past + L_new, d_k).
        #   캐시 전체 (K, V)를 반환하세요.
        # if self.k is None:
        self.k, self.v = ..., ...  # (B, H_kv, L_new, d_k), (B, H_kv, L_new, d_v)
        # else:
        self.k = ...  # (B, H_kv, L_past + L_new, d_k)
        self.v = ...  # (B, H_kv, L_past + L_new, d_v)
        raise NotImplementedError("TODO")  # return (B, H_kv, L, d_k), (B, H_kv, L, d_v)

    def __len__(self):
        """캐시된 위치(토큰) 수, 비었으면 0."""
        # TODO (kv_cache)
        #   캐시된 K (B, H_kv, L, d_k)의 L, 즉 dim 2의 크기를 반환하세요 (비었으면 0).
        raise NotImplementedError("TODO")

    def reset(self):
        """모두 잊습니다: 다음 update가 새 시퀀스를 시작합니다."""
        # TODO (kv_cache)
        #   캐시된 키와 밸류를 지워 처음 상태로 돌려놓으세요.
        raise NotImplementedError("TODO")
