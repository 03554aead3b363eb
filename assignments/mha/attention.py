"""단계 `attention`, `masking`: 스케일드 닷-프로덕트 어텐션.

쿼리마다 모든 키와 비교하고(내적), 점수를 키 방향(마지막 차원)으로 소프트맥스한 뒤 밸류의 가중합을
반환하세요:

    scores  = q @ k^T / sqrt(d_k)      (..., Lq, Lk)
    weights = softmax(scores)          (..., Lq, Lk), 키 방향으로
    out     = weights @ v              (..., Lq, d_v)

sqrt(d_k)로 나누세요: d_k는 헤드 하나의 크기(q.size(-1))이지 d_model이 아닙니다.

마스킹 (이 부분은 `masking` 단계에서 채점합니다): `mask`는 (..., Lq, Lk)로 브로드캐스트되는 bool,
True = 막힘. 막힌 키의 가중치는 정확히 0, 각 행의 합은 1, 키가 모두 막힌 행도 유한해야 합니다.
F.scaled_dot_product_attention은 쓸 수 없습니다.

정밀도: 채점은 float64 입력을 쓰고 float32 계산만큼 가까운 결과도 인정합니다. 단, out과 weights는
입력의 dtype으로 돌려주세요.

예시: d_k = 4이므로 sqrt(d_k) = 2. 쿼리 0은 키 0과 닮았고, 쿼리 1은 0 벡터라 어느 키와도 점수가
같습니다. 키 2를 막으면 그 가중치는 0이 되고 각 행의 합은 여전히 1입니다.

    >>> import torch
    >>> from mha.attention import scaled_dot_product_attention
    >>> q = torch.tensor([[2., 0., 0., 0.], [0., 0., 0., 0.]])                      # (Lq=2, d_k=4)
    >>> k = torch.tensor([[2., 0., 0., 0.], [0., 2., 0., 0.], [0., 0., 2., 0.]])    # (Lk=3, d_k=4)
    >>> v = torch.tensor([[1., 0.], [0., 1.], [5., 5.]])                            # (Lk=3, d_v=2)
    >>> out, weights = scaled_dot_product_attention(q, k, v)
    >>> weights      # (Lq, Lk): 점수 [2, 0, 0], [0, 0, 0]의 소프트맥스
    tensor([[0.7870, 0.1065, 0.1065],
            [0.3333, 0.3333, 0.3333]])
    >>> out, weights = scaled_dot_product_attention(q, k, v, mask=torch.tensor([False, False, True]))
    >>> weights      # 마스크 (Lk,)가 (Lq, Lk)로 브로드캐스트
    tensor([[0.8808, 0.1192, 0.0000],
            [0.5000, 0.5000, 0.0000]])
"""
import math

import torch


def scaled_dot_product_attention(q, k, v, mask=None):  # -> out (..., Lq, d_v), weights (..., Lq, Lk)
    """q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), mask: (..., Lq, Lk)로
    브로드캐스트되는 bool, True = 막힘. (out, weights)를 반환: out (..., Lq, d_v), weights (..., Lq, Lk).
    """
    # TODO (attention)
    #   스케일된 점수 q k^T / sqrt(d_k)를 계산하세요. 모양 (..., Lq, Lk).
    raise NotImplementedError("TODO")
    if mask is not None:
        # TODO (masking)
        #   막힌(True) 점수마다 아주 큰 음수(유한한 값)를 넣으세요. 모양은 그대로
        #   (..., Lq, Lk).
        raise NotImplementedError("TODO")
    # TODO (attention)
    #   키 방향(마지막 차원)으로 소프트맥스 -> weights (..., Lq, Lk), 그다음 밸류의 가중합
    #   -> out (..., Lq, d_v). (out, weights)를 반환하세요.
    raise NotImplementedError("TODO")
