"""Step `multi_head_attention` — 멀티헤드 어텐션 모듈 전체 / the whole module.

[한국어]
단계 `multi_head_attention`: 멀티헤드 어텐션, 지금까지의 단계를 하나의 nn.Module로 묶으세요.

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

[English]
Step `multi_head_attention`: put the steps so far into one nn.Module.

    x -> w_q, w_k, w_v -> split_heads -> scores = q k^T / sqrt(d_k) -> mask -> softmax
      -> dropout -> weights @ v -> merge_heads -> w_o

It must agree with torch.nn.MultiheadAttention given the same weights (batch_first=True, .eval()).

query (B, Lq, D) attends to key/value (B, Lk, D) (self-attention: key = value = query). pad_mask (B,
Lk) is True at padding keys. causal=True blocks key j for query i when j > i (top-left aligned, also
when Lq != Lk). Dropout acts on the attention weights, after the softmax and before @ v.

How the grader finds your projections: by what they do, not by their names (the notebook's notes
list every accepted way).

Example: D = 2, H = 2 (d_k = 1), all four layers identity with zero bias, so q = k = v = x; a
padding key changes nothing:

    >>> import torch
    >>> from mha.mha import MultiHeadAttention
    >>> m = MultiHeadAttention(d_model=2, num_heads=2).requires_grad_(False)
    >>> for layer in (m.w_q, m.w_k, m.w_v, m.w_o):          # identity weights
    ...     _ = layer.weight.copy_(torch.eye(2)), layer.bias.zero_()
    >>> x = torch.tensor([[[1., 2.], [3., 4.], [0., 1.]]])  # (B=1, L=3, D=2)
    >>> m(x, pad_mask=torch.tensor([[False, False, True]]))[:, :2]   # token 2 = padding
    tensor([[[2.7616, 3.9640],
             [2.9951, 3.9993]]])
    >>> m(x[:, :2])                                         # without token 2
    tensor([[[2.7616, 3.9640],
             [2.9951, 3.9993]]])
"""
import math

import torch
import torch.nn as nn

from .heads import merge_heads, split_heads


class MultiHeadAttention(nn.Module):
    """[한국어] 멀티헤드 어텐션: forward(query (B, Lq, D), key (B, Lk, D), value (B, Lk, D),
    pad_mask (B, Lk)) -> (B, Lq, D).
    [English] Multi-head attention: forward(query (B, Lq, D), key (B, Lk, D), value (B, Lk, D),
    pad_mask (B, Lk)) -> (B, Lq, D)."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True, causal=False):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.causal = causal
        # TODO (multi_head_attention)
        #   [한국어] w_q, w_k, w_v, w_o를 만드세요: 각각 nn.Linear(d_model, d_model, bias=bias),
        #            가중치 (D, D). 그리고 드롭아웃 층 self.dropout = nn.Dropout(dropout).
        #   [English] create w_q, w_k, w_v, w_o: each nn.Linear(d_model, d_model, bias=bias), weight
        #             (D, D). And the dropout layer self.dropout = nn.Dropout(dropout).
        ### BEGIN SOLUTION
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, query, key=None, value=None, pad_mask=None):  # -> (B, Lq, D)
        # query: (B, Lq, D); key, value: (B, Lk, D); pad_mask: bool (B, Lk), True = padding
        key = query if key is None else key
        value = key if value is None else value
        # TODO (multi_head_attention)
        #   [한국어] 한 줄에 모양 하나: 각 줄의 오른쪽(...)을 채우세요. 프로젝션 뒤 헤드 분할, 스케일된
        #            점수, 인과 마스크와 패딩 마스크 (True = 막힘), 소프트맥스, 드롭아웃, 헤드 결합, w_o.
        #   [English] one shape per line: fill in each right-hand side (...). Project then split into
        #             heads, the scaled scores, the causal and pad masks (True = blocked), softmax,
        #             dropout, merge the heads, w_o.
        ### BEGIN SOLUTION
        q = split_heads(self.w_q(query), self.num_heads)  # (B, H, Lq, d_k)
        k = split_heads(self.w_k(key), self.num_heads)  # (B, H, Lk, d_k)
        v = split_heads(self.w_v(value), self.num_heads)  # (B, H, Lk, d_k)

        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)
        Lq, Lk = scores.shape[-2:]  # query and key lengths
        blocked = torch.zeros(Lq, Lk, dtype=torch.bool, device=scores.device)  # (Lq, Lk)
        if self.causal:
            blocked = torch.ones_like(blocked).triu(diagonal=1)  # (Lq, Lk)
        if pad_mask is not None:
            blocked = blocked | pad_mask[:, None, None, :]  # (B, 1, Lq, Lk)
        scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)

        weights = torch.softmax(scores, dim=-1)  # (B, H, Lq, Lk)
        weights = self.dropout(weights)  # (B, H, Lq, Lk)
        out = merge_heads(weights @ v)  # (B, Lq, D)
        return self.w_o(out)  # (B, Lq, D)
        ### END SOLUTION
