"""Step `multi_head_attention` — 멀티헤드 어텐션 모듈 전체 / the whole module.

[한국어]
지금까지의 단계를 하나의 nn.Module로 묶으세요. PyTorch의 torch.nn.MultiheadAttention과 같은 계산을
합니다:

    x -> w_q, w_k, w_v -> 헤드 분할 -> scores = q k^T / sqrt(d_k) -> 마스킹 -> 소프트맥스
      -> 드롭아웃 -> weights @ v -> 헤드 결합 -> w_o

같은 가중치를 주면 torch.nn.MultiheadAttention과 결과가 같아야 합니다 (batch_first=True, 두 모듈
모두 .eval()).

query (B, Lq, D)가 key/value (B, Lk, D)를 봅니다. 셀프 어텐션에서는 key = value = query입니다.
pad_mask (B, Lk)는 패딩 키에서 True이고, 패딩은 pad_batch가 만드는 것처럼 실제 토큰 뒤에 옵니다
(그래서 길이로부터 다시 만든 마스크도 괜찮습니다). causal=True이면 쿼리 i에 대해 j > i인 키 j를
막습니다 (인과 마스크; Lq != Lk일 때도 왼쪽 위에 맞춤). 드롭아웃은 어텐션 가중치에 적용하고
(소프트맥스 뒤, @ v 전), nn.Dropout은 .eval() 뒤에 자동으로 꺼집니다.

채점기가 여러분의 프로젝션을 찾는 방법: 이름이 아니라 하는 일로 찾습니다. 아래 방식은 모두
인정됩니다. nn.Linear나 nn.LazyLinear 층은 모듈 안 어디에 있어도 됩니다 (여러분의 QKVProjection /
OutputProjection 안도 괜찮습니다): query, key, value, 결합된 헤드에 각각 적용하는 (D -> D) 층
네 개; 또는 출력을 q, k, v 순서로 D씩 자르는 합친 (D -> 3*D) 층 하나 (FusedQKVProjection처럼;
q 층 옆에 k, v용 D -> 2*D 층도 됩니다). 층의 가중치나 nn.Parameter를 (또는 그 행을 잘라) F.linear로
적용해도 됩니다. 드롭아웃도 이름과 상관없이 (nn.Dropout, 또는 F.dropout(..., training=self.training))
하는 일로 찾습니다. 아래 이름들은 TODO가 제안하는 이름입니다.

정밀도: float64 입력에 내부 계산을 float32로 해도 (float32 소프트맥스, float32 스케일) 인정합니다.
단, 결과는 입력의 dtype으로 돌려주세요.

[English]
Put the steps so far into one nn.Module, computing what PyTorch's torch.nn.MultiheadAttention
computes:

    x -> w_q, w_k, w_v -> split_heads -> scores = q k^T / sqrt(d_k) -> mask -> softmax
      -> dropout -> weights @ v -> merge_heads -> w_o

It must agree with torch.nn.MultiheadAttention given the same weights (with batch_first=True, both
in .eval()).

query (B, Lq, D) attends to key/value (B, Lk, D); for self-attention key = value = query.
pad_mask (B, Lk) is True at padding keys; the padding comes after the real tokens, as pad_batch
makes it (so a mask rebuilt from the lengths is fine). causal=True blocks key j for query i when
j > i (top-left aligned, also when Lq != Lk). Dropout acts on the attention weights (after the
softmax, before @ v), and nn.Dropout is automatically off after .eval().

How the grader finds your projections: by what they do, not by their names. Any of these works,
with nn.Linear or nn.LazyLinear layers, anywhere inside the module (in your own QKVProjection /
OutputProjection too): four (D -> D) layers applied to the query, the key, the value and the
merged heads; one fused (D -> 3*D) layer whose output is cut into q, k, v blocks of D in that
order (as FusedQKVProjection does; D -> 2*D for k, v next to a q layer works too). A layer's
weight or an nn.Parameter applied with F.linear (whole, or cut into blocks of rows) works too.
Dropout is found the same way, whatever its name (an nn.Dropout, or F.dropout(...,
training=self.training)). The names below are the suggestion the TODO makes.

Precision: float32 arithmetic inside (a float32 softmax, a float32 scale) is accepted on float64
inputs, as long as the result comes back in the input's dtype.

예시 / Example: D = 2, H = 2 (d_k = 1), 네 층 모두 항등 가중치와 bias 0, 그래서 q = k = v = x /
all four layers identity with zero bias, so q = k = v = x (이 예시는 TODO가 제안하는 이름을 씁니다 /
the example uses the names the TODO suggests):

    >>> import torch
    >>> from mha.mha import MultiHeadAttention
    >>> causal = MultiHeadAttention(d_model=2, num_heads=2, causal=True).requires_grad_(False)
    >>> plain = MultiHeadAttention(d_model=2, num_heads=2).requires_grad_(False)
    >>> for m in (causal, plain):
    ...     for layer in (m.w_q, m.w_k, m.w_v, m.w_o):      # 항등 가중치 / identity weights
    ...         _ = layer.weight.copy_(torch.eye(2)), layer.bias.zero_()
    >>> x = torch.tensor([[[1., 2.], [3., 4.], [0., 1.]]])  # (B=1, L=3, D=2)
    >>> causal(x)    # (B, L, D): 토큰 0은 자기 자신만 봄 -> 자기 값 [1, 2] / token 0 sees only itself
    tensor([[[1.0000, 2.0000],
             [2.9951, 3.9993],
             [1.3333, 3.6456]]])

패딩 키는 결과를 바꾸지 않습니다: 토큰 2를 패딩으로 막으면 토큰 0, 1의 출력은 토큰 2가 아예 없을 때와
같습니다 / a padding key changes nothing: with token 2 blocked as padding, tokens 0 and 1 come out
as if token 2 were not there at all:

    >>> pad_mask = torch.tensor([[False, False, True]])     # (B, Lk): 토큰 2 = 패딩 / token 2 = padding
    >>> plain(x, pad_mask=pad_mask)[:, :2]
    tensor([[[2.7616, 3.9640],
             [2.9951, 3.9993]]])
    >>> plain(x[:, :2])                                     # 토큰 2 없이 / without token 2
    tensor([[[2.7616, 3.9640],
             [2.9951, 3.9993]]])
"""
import math

import torch
import torch.nn as nn

from .heads import merge_heads, split_heads


class MultiHeadAttention(nn.Module):
    """멀티헤드 어텐션 / multi-head attention:
    forward(query (B, Lq, D), key (B, Lk, D), value (B, Lk, D), pad_mask (B, Lk)) -> (B, Lq, D)."""

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
        raise NotImplementedError("TODO")

    def forward(self, query, key=None, value=None, pad_mask=None):  # -> (B, Lq, D)
        # query: (B, Lq, D); key, value: (B, Lk, D); pad_mask: bool (B, Lk), True = padding
        key = query if key is None else key
        value = key if value is None else value
        # TODO (multi_head_attention)
        #   [한국어] 프로젝션 (B, L, D) -> 헤드 분할 (B, H, L, d_k) -> 어텐션 (패딩 마스크와
        #            인과 마스크, 가중치 (B, H, Lq, Lk)에 드롭아웃) -> 헤드 결합 (B, Lq, D) -> w_o.
        #            (B, Lq, D)를 반환하세요.
        #   [English] project (B, L, D) -> split into heads (B, H, L, d_k) -> attend (with the pad and
        #             causal masks, dropout on the weights (B, H, Lq, Lk)) -> merge the heads (B, Lq, D)
        #             -> apply w_o. Return (B, Lq, D).
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
