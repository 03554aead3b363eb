"""Steps `attention` and `masking` — 스케일드 닷-프로덕트 어텐션 / scaled dot-product attention.

[한국어]
왜 필요한가: 토큰 하나의 의미는 문장의 다른 토큰들에 달려 있습니다. 어텐션은 각 토큰(쿼리)이 어느
토큰(키)을 얼마나 참고할지 스스로 정하고, 그 비율대로 다른 토큰의 내용(밸류)을 섞어 옵니다.

쿼리마다 모든 키와 비교하고(내적), 그 점수를 키 방향으로 0 이상이고 합이 1인 가중치로 바꾼 뒤
(소프트맥스), 밸류의 가중합을 반환합니다:

    scores  = q @ k^T / sqrt(d_k)      (..., Lq, Lk)
    weights = softmax(scores, 키 방향, 즉 마지막 차원)
    out     = weights @ v              (..., Lq, d_v)

왜 sqrt(d_k)로 나눌까요 (스케일링)? 분산이 1인 성분을 가진 d_k차원 무작위 벡터 두 개의 내적은
분산이 d_k입니다. 점수가 크면 소프트맥스가 포화됩니다: 가중치 하나는 거의 1, 나머지는 거의 0이
되고 그래디언트는 아주 작아집니다 (아래 예시의 [8, 0, -8]). sqrt(d_k)로 나누면 분산이 다시 1이
됩니다. 주의: d_k는 헤드 하나의 크기(q.size(-1))이지 d_model이 아닙니다.

마스킹 (이 부분은 `masking` 단계에서 채점합니다): `mask`는 (..., Lq, Lk)로 브로드캐스트되는 bool
텐서이고 True = 막힘입니다. 막힌 키의 가중치는 정확히 0이어야 하고, 그 행의 나머지 가중치 합은
여전히 1이어야 합니다. 그래서 마스크는 소프트맥스 전에 점수에 적용합니다. 막힌 점수는 아주 큰
음수로 채우세요. -inf를 쓰면 키가 모두 막힌 행이 NaN(0 / 0)이 됩니다 — 그런 행도 유한한 값으로
나와야 합니다. (F.scaled_dot_product_attention은 반대 마스크 규칙, True = 볼 수 있음을 쓰고, 여기서는
사용할 수 없습니다: 바로 이 함수를 여러분이 작성하는 것입니다.)

정밀도: 채점은 float64 입력을 쓰고, float32 계산만큼 가까운 결과도 인정합니다
(softmax(..., dtype=torch.float32), float32 스케일 텐서). 단, out과 weights는 입력의 dtype으로
돌려주세요. 이때 채우는 값에 주의하세요: float64의 가장 작은 음수는 float32에서 -inf입니다.

[English]
Why: what a token means depends on the other tokens of the sentence. Attention lets each token
(a query) decide how much to draw on each token (a key), and mixes in their content (the values)
in those proportions.

For every query, compare it with every key (a dot product), turn the scores into weights that
are >= 0 and sum to 1 over the keys (softmax), and return the weighted sum of the values:

    scores  = q @ k^T / sqrt(d_k)      (..., Lq, Lk)
    weights = softmax(scores, over keys, i.e. the LAST dim)
    out     = weights @ v              (..., Lq, d_v)

Why divide by sqrt(d_k)? A dot product of two random d_k-dim vectors with unit-variance entries
has variance d_k. Big scores push softmax into saturation (one weight ~1, the rest ~0, tiny
gradients; see [8, 0, -8] in the example below). Dividing by sqrt(d_k) brings the variance back
to 1. Note: d_k is the size of ONE head (q.size(-1)), not d_model.

Masking (the `masking` step grades this part): `mask` is a bool tensor that broadcasts to
(..., Lq, Lk), True = BLOCKED. A blocked key must get weight exactly 0 and the remaining weights
of the row must still sum to 1, so the mask goes on the scores BEFORE the softmax. Fill blocked
scores with a very negative number; if you use -inf, a row whose keys are ALL blocked turns into
NaN (0 / 0) — it must come out finite. (F.scaled_dot_product_attention uses the opposite mask
convention, True = may attend, and is not allowed here: this is the function you write.)

Precision: the checks use float64 inputs, and a result as close as float32 arithmetic gets is
accepted (softmax(..., dtype=torch.float32), a float32 scale tensor), as long as out and weights
come back in the input's dtype. Mind the fill then: float64's most negative number is -inf in
float32.

예시 / Example: d_k = 4 이므로 sqrt(d_k) = 2 / so sqrt(d_k) = 2. 쿼리 0은 키 0과 닮았고, 쿼리 1은
0 벡터라 어느 키와도 점수가 같습니다 / query 0 resembles key 0; query 1 is zero, so it scores every key
the same.

    >>> import torch
    >>> from mha.attention import scaled_dot_product_attention
    >>> q = torch.tensor([[2., 0., 0., 0.], [0., 0., 0., 0.]])                      # (Lq=2, d_k=4)
    >>> k = torch.tensor([[2., 0., 0., 0.], [0., 2., 0., 0.], [0., 0., 2., 0.]])    # (Lk=3, d_k=4)
    >>> v = torch.tensor([[1., 0.], [0., 1.], [5., 5.]])                            # (Lk=3, d_v=2)
    >>> out, weights = scaled_dot_product_attention(q, k, v)
    >>> weights      # (Lq, Lk): 점수 / scores [2, 0, 0], [0, 0, 0]의 소프트맥스 / softmax
    tensor([[0.7870, 0.1065, 0.1065],
            [0.3333, 0.3333, 0.3333]])
    >>> out          # (Lq, d_v): 밸류의 가중합 / weighted sum of the values
    tensor([[1.3195, 0.6390],
            [2.0000, 2.0000]])

마스킹 / Masking: 키 2를 막으면 그 가중치는 0이 되고 각 행의 합은 여전히 1입니다 / block key 2:
its weight becomes 0 and every row still sums to 1. 모든 키가 막힌 행도 유한합니다 / a row with
every key blocked stays finite.

    >>> out, weights = scaled_dot_product_attention(q, k, v, mask=torch.tensor([False, False, True]))
    >>> weights      # mask (Lk,)가 (Lq, Lk)로 브로드캐스트 / the mask broadcasts to (Lq, Lk)
    tensor([[0.8808, 0.1192, 0.0000],
            [0.5000, 0.5000, 0.0000]])
    >>> out
    tensor([[0.8808, 0.1192],
            [0.5000, 0.5000]])
    >>> all_blocked = torch.tensor([[False, False, True], [True, True, True]])   # (Lq, Lk)
    >>> out, weights = scaled_dot_product_attention(q, k, v, mask=all_blocked)
    >>> torch.isfinite(out).all()
    tensor(True)

스케일링 / Scaling: d_k = 64이면 무작위 점수의 표준편차가 약 8입니다 / with d_k = 64 random scores have
a standard deviation of about 8. 나누지 않은 점수와 sqrt(64) = 8로 나눈 점수 / scores as they are, and
divided by sqrt(64) = 8:

    >>> torch.softmax(torch.tensor([8., 0., -8.]), dim=-1)       # 포화 / saturated
    tensor([9.9966e-01, 3.3535e-04, 1.1250e-07])
    >>> torch.softmax(torch.tensor([8., 0., -8.]) / 8, dim=-1)
    tensor([0.6652, 0.2447, 0.0900])
"""
import math

import torch


def scaled_dot_product_attention(q, k, v, mask=None):  # -> out (..., Lq, d_v), weights (..., Lq, Lk)
    """q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), mask: (..., Lq, Lk)로 브로드캐스트되는
    bool, True = 막힘 / bool broadcastable to (..., Lq, Lk) with True = blocked.

    (out, weights)를 반환 / Returns (out, weights): out (..., Lq, d_v), weights (..., Lq, Lk).
    """
    # TODO (attention)
    #   [한국어] 스케일된 점수 q k^T / sqrt(d_k)를 계산하세요. 모양 (..., Lq, Lk).
    #   [English] compute the scaled scores q k^T / sqrt(d_k), shape (..., Lq, Lk).
    raise NotImplementedError("TODO")
    if mask is not None:
        # TODO (masking)
        #   [한국어] 막힌(True) 점수마다 아주 큰 음수(유한한 값)를 넣으세요. 모양은 그대로
        #            (..., Lq, Lk).
        #   [English] give every blocked (True) score a very negative (finite) value. Shape stays
        #             (..., Lq, Lk).
        raise NotImplementedError("TODO")
    # TODO (attention)
    #   [한국어] 키 방향(마지막 차원)으로 소프트맥스 -> weights (..., Lq, Lk), 그다음 밸류의 가중합
    #            -> out (..., Lq, d_v). (out, weights)를 반환하세요.
    #   [English] softmax over the keys (the last dim) -> weights (..., Lq, Lk), then the weighted
    #             sum of the values -> out (..., Lq, d_v). Return (out, weights).
    raise NotImplementedError("TODO")
