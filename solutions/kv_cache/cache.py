"""Step `kv_cache` — 키-밸류 캐시: 글을 한 토큰씩 생성할 때 씁니다 / a key-value cache, for generating text one token at a time.

[한국어]
단계 `kv_cache`: 키-밸류 캐시, 글을 한 토큰씩 생성할 때 씁니다.

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

[English]
Step `kv_cache`: a key-value cache, for generating text one token at a time.

Keep the keys and values of every token seen so far: update(k, v) appends the new chunk's k and v
to what is kept and returns the whole cache (K, V). Queries are not cached.

Shapes (per head, batch-first, the sequence on dim 2 as in the mha assignment):

    k of a new chunk           (B, H_kv, L_new, d_k)      H_kv = key/value heads (see gqa.py)
    v of a new chunk           (B, H_kv, L_new, d_v)      d_v may differ from d_k
    cached K after update      (B, H_kv, L_past + L_new, d_k)
    cached V after update      (B, H_kv, L_past + L_new, d_v)

Appending is torch.cat along dim 2, the SEQUENCE axis (dim 1 holds the heads, dim 3 the features).

A chunk may be several tokens (the prompt at once: "prefill") or one token ("decode"). len(cache) is
the number of cached positions (tokens), not of calls.

Example: B = 1, H_kv = 1, d_k = d_v = 2. A two-token prompt, then one token:

    >>> import torch
    >>> from kv_cache.cache import KVCache
    >>> cache = KVCache()
    >>> k = torch.tensor([[[[1., 1.], [2., 2.]]]])    # (B=1, H_kv=1, L_new=2, d_k=2): tokens 0, 1
    >>> K, V = cache.update(k, 10 * k)                # prefill
    >>> new = torch.tensor([[[[3., 3.]]]])            # (1, 1, 1, 2): one more token
    >>> K, V = cache.update(new, 10 * new)            # decode
    >>> K[0, 0]      # (L=3, d_k=2): the old rows, then the new one
    tensor([[1., 1.],
            [2., 2.],
            [3., 3.]])
    >>> len(cache)   # tokens, not calls (2)
    3
    >>> cache.reset(); len(cache)          # ready for the next text
    0
"""
import torch


class KVCache:
    """[한국어]
    지금까지 본 모든 위치의 키와 밸류, 헤드별: (B, H_kv, L, d_k / d_v). update(k, v)는 청크를 뒤에
    붙이고 캐시 전체 (K, V)를 반환합니다; len(cache)는 캐시된 위치 수 L (비었으면 0); reset()은
    캐시를 비웁니다.

    [English]
    The keys and values of every position seen so far, per head: (B, H_kv, L, d_k / d_v).
    update(k, v) appends a chunk and returns the whole cache (K, V); len(cache) is the number of
    cached positions L (0 when empty); reset() empties the cache.
    """

    def __init__(self):
        # TODO (kv_cache)
        #   [한국어] 빈 캐시로 시작하세요 (예: self.k = self.v = None). 클래스 본문이 아니라 self에
        #            만들어야 캐시 두 개가 내용을 공유하지 않습니다.
        #   [English] start empty (e.g. self.k = self.v = None), on self and not in the class body,
        #             so that two caches share nothing.
        ### BEGIN SOLUTION
        self.k = None  # (B, H_kv, L, d_k) once something is cached
        self.v = None  # (B, H_kv, L, d_v)
        ### END SOLUTION

    def update(self, k, v):
        """[한국어] k (B, H_kv, L_new, d_k), v (B, H_kv, L_new, d_v) -> (K, V): 이것들을 붙인 뒤의
        캐시 전체, K (B, H_kv, L_past + L_new, d_k), V (B, H_kv, L_past + L_new, d_v).
        [English] k (B, H_kv, L_new, d_k), v (B, H_kv, L_new, d_v) -> (K, V): the whole cache after
        appending them, K (B, H_kv, L_past + L_new, d_k), V (B, H_kv, L_past + L_new, d_v)."""
        # TODO (kv_cache)
        #   [한국어] 첫 청크는 그대로 캐시가 되고, 그 뒤 청크는 시퀀스 축(dim 2)을 따라 뒤에 붙입니다.
        #            (B, H_kv, L_past, d_k) + (B, H_kv, L_new, d_k) -> (B, H_kv, L_past + L_new, d_k).
        #            캐시 전체 (K, V)를 반환하세요.
        #   [English] the first chunk becomes the cache; later chunks are appended along the
        #             sequence axis (dim 2).
        #             (B, H_kv, L_past, d_k) + (B, H_kv, L_new, d_k) -> (B, H_kv, L_past + L_new, d_k).
        #             Return the whole cache (K, V).
        ### BEGIN SOLUTION
        if self.k is None:
            self.k, self.v = k, v  # (B, H_kv, L_new, d_k), (B, H_kv, L_new, d_v)
        else:
            self.k = torch.cat([self.k, k], dim=2)  # (B, H_kv, L_past + L_new, d_k)
            self.v = torch.cat([self.v, v], dim=2)  # (B, H_kv, L_past + L_new, d_v)
        return self.k, self.v  # (B, H_kv, L, d_k), (B, H_kv, L, d_v)
        ### END SOLUTION

    def __len__(self):
        """[한국어] 캐시된 위치(토큰) 수, 비었으면 0. [English] The number of cached positions (tokens), 0 when empty."""
        # TODO (kv_cache)
        #   [한국어] 캐시된 K (B, H_kv, L, d_k)의 L, 즉 dim 2의 크기를 반환하세요 (비었으면 0).
        #   [English] return L of the cached K (B, H_kv, L, d_k), the size of dim 2 (0 when empty).
        ### BEGIN SOLUTION
        return 0 if self.k is None else self.k.size(2)  # L of self.k (B, H_kv, L, d_k)
        ### END SOLUTION

    def reset(self):
        """[한국어] 모두 잊습니다: 다음 update가 새 시퀀스를 시작합니다.
        [English] Forget everything: the next update starts a new sequence."""
        # TODO (kv_cache)
        #   [한국어] 캐시된 키와 밸류를 지워 처음 상태로 돌려놓으세요.
        #   [English] drop the cached keys and values, back to the empty state.
        ### BEGIN SOLUTION
        self.k = None
        self.v = None
        ### END SOLUTION
