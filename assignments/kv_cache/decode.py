"""Step `incremental_decoding` — 증분 디코딩 / new tokens attend to everything cached.

[한국어]
새 청크에 대해서만 어텐션을 돌리세요: 청크의 쿼리 L_new개가 캐시된 키 L = L_past + L_new개 전부 (예전
키들과, 먼저 캐시에 붙인 청크 자신의 키들)를 봅니다. 결과는 글 전체에 인과 어텐션을 돌렸을 때 그 행들과
정확히 같아야 합니다 (부동소수점 오차 안에서).

까다로운 부분은 인과 마스크입니다. 전체 어텐션에서 쿼리 i는 키 0..i를 봅니다. 그런데 청크 안의 쿼리 i는
위치 i에 있지 않습니다. 캐시된 L_past개 토큰 뒤에 있으므로 절대 위치는

    p = L_past + i = (L - L_new) + i 이고, 키 0..p를 볼 수 있습니다.

청크의 마스크는 전체 (L, L) 인과 마스크의 오른쪽 아래 모서리, 즉 마지막 L_new개 행입니다 (오프셋
k_len - q_len = L - L_new = L_past). 보통의 왼쪽 위 마스크 triu(ones(L_new, L), diagonal=1)는 틀립니다
(아래 예시).

L_new == L이면 (아직 캐시가 없는 프롬프트) 이것은 보통의 (L, L) 인과 마스크입니다. torch에서
triu(ones(L_new, L), diagonal=d)는 열 - 행 >= d인 칸을 남깁니다. 여기서 막힘은
열 j > p = (L - L_new) + i, 즉 j - i >= L - L_new + 1입니다.

어텐션 자체는 mha 과제와 같습니다: scores = q K^T / sqrt(d_k), 막힌 점수는 아주 큰 음수(유한한 값)로
채우고, 키 방향(마지막 차원)으로 소프트맥스, 그다음 V를 곱합니다. 정밀도: float64 입력에 내부 계산을
float32로 해도 인정합니다. 단, 결과는 입력의 dtype으로 돌려주세요.

[English]
Run attention for the NEW chunk only: its L_new queries against all L = L_past + L_new cached keys
(the old ones and the chunk's own, appended first). The result must be exactly what full causal
attention over the whole text gives for those rows (up to float rounding).

The catch is the causal mask. In full attention query i may see keys 0..i. In a chunk, query i
is not at position i: it sits after the L_past cached tokens, at the absolute position

    p = L_past + i = (L - L_new) + i,       and may see keys 0..p.

The mask of a chunk is the bottom-right corner of the full (L, L) causal mask: its last L_new
rows (offset k_len - q_len = L - L_new = L_past). The usual top-left mask,
triu(ones(L_new, L), diagonal=1), is wrong (see the example below).

With L_new == L (no cache yet, the prompt) this is the ordinary (L, L) causal mask. In torch,
triu(ones(L_new, L), diagonal=d) keeps the entries with column - row >= d; here blocked means
column j > p = (L - L_new) + i, i.e. j - i >= L - L_new + 1.

The attention itself is the one of the mha assignment: scores = q K^T / sqrt(d_k), blocked
scores filled with a very negative finite number, softmax over the keys (the last dim), times V.
Precision: float32 arithmetic inside is accepted on float64 inputs, as long as the result comes
back in the input's dtype.

예시 / Example: 마스크 (True = 막힘) / the masks (True = blocked). 캐시된 토큰 3개 뒤의 토큰 2개짜리
청크, 그리고 캐시된 토큰 3개 뒤의 토큰 하나 / a 2-token chunk after 3 cached tokens, and one token after
3 cached tokens:

    >>> import torch
    >>> from kv_cache.cache import KVCache
    >>> from kv_cache.decode import cached_attention, offset_causal_mask
    >>> offset_causal_mask(2, 5)     # (L_new=2, L=5): 쿼리 0은 위치 3 / query 0 is at position 3
    tensor([[False, False, False, False,  True],
            [False, False, False, False, False]])
    >>> offset_causal_mask(1, 4)     # (1, 4): 새 토큰은 모든 키를 봄 / the new token sees every key
    tensor([[False, False, False, False]])
    >>> torch.triu(torch.ones(1, 4, dtype=torch.bool), diagonal=1)   # 틀림: 토큰 0만 봄 / wrong: token 0 only
    tensor([[False,  True,  True,  True]])

캐시로 나누어 계산해도 전체 인과 어텐션과 같습니다 / chunked with a cache, the same as full causal
attention. B = H = 1, d_k = 2, 토큰 3개, q = k = v (예시를 짧게 하려고) / three tokens, q = k = v
(to keep it short); cache.py를 먼저 완성하세요 / finish cache.py first:

    >>> x = torch.tensor([[[[1., 0.], [0., 1.], [2., 2.]]]])     # (B=1, H=1, L=3, d_k=2)
    >>> full = cached_attention(x, x, x, KVCache())     # 빈 캐시: 보통의 인과 어텐션 / empty cache: plain causal
    >>> full         # (B, H, L, d_v): 토큰 0은 자기 자신만 봄 / token 0 sees only itself
    tensor([[[[1.0000, 0.0000],
              [0.3302, 0.6698],
              [1.9581, 1.9581]]]])
    >>> cache = KVCache()
    >>> prompt = x[:, :, :2]                            # (1, 1, L_new=2, 2): 프리필 / prefill
    >>> first = cached_attention(prompt, prompt, prompt, cache)
    >>> token = x[:, :, 2:]                             # (1, 1, L_new=1, 2): 디코드 / decode
    >>> last = cached_attention(token, token, token, cache)
    >>> last         # (1, 1, 1, 2): full의 마지막 행과 같음 / the last row of full
    tensor([[[[1.9581, 1.9581]]]])
    >>> torch.allclose(torch.cat([first, last], dim=2), full), len(cache)
    (True, 3)

왼쪽 위 마스크를 쓰면 마지막 토큰은 토큰 0만 보고 [1, 0]이 나옵니다 / with the top-left mask the
last token would see token 0 only and come out as [1, 0].
"""
import math

import torch


def offset_causal_mask(q_len, k_len, device=None):  # -> (q_len, k_len)
    """-> `device` 위의 bool (q_len, k_len), True = 막힘 / bool (q_len, k_len) on `device`, True =
    blocked. 쿼리 q_len개는 위치 k_len개 중 마지막 q_len개입니다: 쿼리 i (절대 위치 k_len - q_len + i)는
    키 0..그 위치까지 봅니다 / The q_len queries are the LAST q_len of k_len positions: query i
    (absolute position k_len - q_len + i) may see keys 0..that."""
    # TODO (incremental_decoding)
    #   [한국어] j > (k_len - q_len) + i이면 쿼리 i의 키 j를 막으세요. 결과 모양 (q_len, k_len).
    #   [English] block key j for query i when j > (k_len - q_len) + i. Result shape (q_len, k_len).
    raise NotImplementedError("TODO")


def cached_attention(q, k, v, cache):  # -> (B, H, L_new, d_v)
    """캐시 전체에 대한 새 청크의 인과 어텐션 / Causal attention of a new chunk over the cache.

    q (B, H, L_new, d_k), k (B, H, L_new, d_k), v (B, H, L_new, d_v): 청크의 프로젝션 / the chunk's
    projections. cache: update(k, v) -> (K, V)로 캐시 전체를 돌려주는 것, 예: KVCache / anything
    with update(k, v) -> (K, V) returning the whole cache, such as KVCache.
    k, v를 캐시에 붙인 뒤 out (B, H, L_new, d_v)를 반환 / Appends k, v to the cache, then returns
    out (B, H, L_new, d_v).
    """
    # TODO (incremental_decoding)
    #   [한국어] 먼저 청크를 캐시에 붙이세요 (청크 자신의 키도 볼 수 있는 키입니다).
    #            K (B, H, L, d_k), V (B, H, L, d_v), L = L_past + L_new.
    #   [English] append the chunk to the cache first (its own keys are among those it may see).
    #             K (B, H, L, d_k), V (B, H, L, d_v), L = L_past + L_new.
    raise NotImplementedError("TODO")
    # TODO (incremental_decoding)
    #   [한국어] 새 쿼리와 캐시된 모든 키의 스케일된 점수 (B, H, L_new, L), 오프셋 인과 마스크
    #            (L_new, L) (아주 큰 음수, 유한한 값으로 채우기), 키 방향 소프트맥스, V의 가중합
    #            -> (B, H, L_new, d_v).
    #   [English] scaled scores of the new queries against all cached keys (B, H, L_new, L), the
    #             offset causal mask (L_new, L) (a very negative finite fill), softmax over the
    #             keys, the weighted sum of V -> (B, H, L_new, d_v).
    L_new, L = ..., ...  # q (B, H, L_new, d_k), K (B, H, L, d_k)
    scores = ...  # (B, H, L_new, L)
    blocked = ...  # (L_new, L)
    scores = ...  # (B, H, L_new, L)
    weights = ...  # (B, H, L_new, L)
    raise NotImplementedError("TODO")  # return (B, H, L_new, d_v)
