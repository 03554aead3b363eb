"""단계 `multi_head_attention`: 멀티헤드 어텐션, 지금까지의 단계를 하나의 nn.Module로 묶으세요.

    x -> w_q, w_k, w_v -> 헤드 분할 -> scores = q k^T / sqrt(d_k) -> 마스킹 -> 소프트맥스
      -> 드롭아웃 -> weights @ v -> 헤드 결합 -> w_o

같은 가중치를 주면 torch.nn.MultiheadAttention과 결과가 같아야 합니다 (batch_first=True, .eval()).

query (B, Lq, D)가 key/value (B, Lk, D)를 봅니다 (셀프 어텐션: key = value = query). pad_mask (B,
Lk)는 패딩 키에서 True입니다. causal=True이면 쿼리 i에 대해 j > i인 키 j를 막습니다 (Lq != Lk여도
왼쪽 위에 맞춤). 드롭아웃은 소프트맥스 뒤, @ v 전의 어텐션 가중치에 적용합니다.

채점기가 여러분의 프로젝션을 찾는 방법: 이름이 아니라 하는 일로 찾습니다 (받아들이는 방식은 모두
노트북의 설명에 있습니다).

예시: D = 2, H = 2 (d_k = 1), 네 층 모두 항등 가중치와 bias 0, 그래서 q = k = v = x:

    >>> import torch
    >>> from mha.mha import MultiHeadAttention
    >>> m = MultiHeadAttention(d_model=2, num_heads=2, causal=True).requires_grad_(False)
    >>> for layer in (m.w_q, m.w_k, m.w_v, m.w_o):          # 항등 가중치
    ...     _ = layer.weight.copy_(torch.eye(2)), layer.bias.zero_()
    >>> x = torch.tensor([[[1., 2.], [3., 4.], [0., 1.]]])  # (B=1, L=3, D=2)
    >>> m(x)         # (B, L, D): 토큰 0은 자기 자신만 봄 -> 자기 값 [1, 2]
    tensor([[[1.0000, 2.0000],
             [2.9951, 3.9993],
             [1.3333, 3.6456]]])
"""
import math

import torch
import torch.nn as nn

from .heads import merge_heads, split_heads


class MultiHeadAttention(nn.Module):
    """멀티헤드 어텐션: forward(query (B, Lq, D), key (B, Lk, D), value (B, Lk, D),
    pad_mask (B, Lk)) -> (B, Lq, D).
    """

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True, causal=False):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.causal = causal
        # TODO (multi_head_attention)
        #   w_q, w_k, w_v, w_o를 만드세요: 각각 nn.Linear(d_model, d_model, bias=bias),
        #   가중치 (D, D). 그리고 드롭아웃 층 self.dropout = nn.Dropout(dropout).
        raise NotImplementedError("TODO")

    def forward(self, query, key=None, value=None, pad_mask=None):  # -> (B, Lq, D)
        # query: (B, Lq, D); key, value: (B, Lk, D); pad_mask: bool (B, Lk), True = padding
        key = query if key is None else key
        value = key if value is None else value
        # TODO (multi_head_attention)
        #   한 줄에 모양 하나: 각 줄의 오른쪽(...)을 채우세요. 프로젝션 뒤 헤드 분할, 스케일된
        #   점수, 인과 마스크와 패딩 마스크 (True = 막힘), 소프트맥스, 드롭아웃, 헤드 결합, w_o.
        q = ...  # (B, H, Lq, d_k)
        k = ...  # (B, H, Lk, d_k)
        v = ...  # (B, H, Lk, d_k)

        scores = ...  # (B, H, Lq, Lk)
        Lq, Lk = ..., ...  # query and key lengths
        blocked = ...  # (Lq, Lk)
        # if self.causal:
        blocked = ...  # (Lq, Lk)
        # if pad_mask is not None:
        blocked = ...  # (B, 1, Lq, Lk)
        scores = ...  # (B, H, Lq, Lk)

        weights = ...  # (B, H, Lq, Lk)
        weights = ...  # (B, H, Lq, Lk)
        out = ...  # (B, Lq, D)
        raise NotImplementedError("TODO")  # return (B, Lq, D)
