"""Step `output_projection` — 헤드 결합과 출력 프로젝션 / glue the heads back together and mix them.

[한국어]
단계 `output_projection`: 헤드 결합과 출력 프로젝션.

헤드들을 다시 토큰마다 벡터 하나로 나란히 붙이고 (헤드 결합), 학습되는 선형 변환 w_o로 섞으세요:

(B, H, L, d_k) -> (B, L, H, d_k) -> (B, L, H*d_k = D), 그다음 w_o (D -> D).

먼저 transpose하는 이유: 한 토큰의 헤드 결과들이 나란히 붙어야 합니다 (아래 예시에서 토큰 0 = [1, 10]).

이 파일은 따로 채점될 수 있도록 결합(transpose, contiguous, view)을 직접 합니다. 채점기는 가중치를
w_o에, 또는 이름과 상관없이 클래스의 유일한 층에 넣습니다 (nn.LazyLinear도 됩니다).

예시: B = 1, H = 2, L = 2, d_k = 1; w_o = 항등 행렬, bias 없음, 그래서 출력은 결합된 헤드 그대로:

    >>> import torch
    >>> from mha.output import OutputProjection
    >>> heads = torch.tensor([[[[1.], [2.]], [[10.], [20.]]]])   # (B, H, L, d_k): head 0: [1, 2], head 1: [10, 20]
    >>> proj = OutputProjection(2, bias=False).requires_grad_(False)   # grad_fn 없이
    >>> _ = proj.w_o.weight.copy_(torch.eye(2))
    >>> proj(heads)                                              # (B, L, D): 토큰 0 = [1, 10]
    tensor([[[ 1., 10.],
             [ 2., 20.]]])

[English]
Step `output_projection`: merge the heads back together and mix them.

Put the heads next to each other again, one vector per token (merging), then mix them with the
learned linear map w_o:

(B, H, L, d_k) -> (B, L, H, d_k) -> (B, L, H*d_k = D), then w_o (D -> D).

Why transpose first: one token's heads must end up side by side (token 0 = [1, 10] below).

This file does its own merge (transpose, contiguous, view) so that it can be graded on its own. The
grader loads its weights into w_o, or into the class's only layer, whatever its name (nn.LazyLinear
works too).

Example: B = 1, H = 2, L = 2, d_k = 1; w_o = identity, no bias, so the output is the merged heads
as they are:

    >>> import torch
    >>> from mha.output import OutputProjection
    >>> heads = torch.tensor([[[[1.], [2.]], [[10.], [20.]]]])   # (B, H, L, d_k): head 0: [1, 2], head 1: [10, 20]
    >>> proj = OutputProjection(2, bias=False).requires_grad_(False)   # no grad_fn
    >>> _ = proj.w_o.weight.copy_(torch.eye(2))
    >>> proj(heads)                                              # (B, L, D): token 0 = [1, 10]
    tensor([[[ 1., 10.],
             [ 2., 20.]]])
"""
import torch.nn as nn


class OutputProjection(nn.Module):
    """[한국어] forward(heads (B, H, L, d_k)) -> (B, L, d_model): 헤드 결합 후 w_o.
    [English] forward(heads (B, H, L, d_k)) -> (B, L, d_model): merge the heads, then w_o."""

    def __init__(self, d_model, bias=True):
        super().__init__()
        # TODO (output_projection)
        #   [한국어] self.w_o = nn.Linear(d_model, d_model, bias=bias)를 만드세요. 가중치 (D, D).
        #   [English] create self.w_o = nn.Linear(d_model, d_model, bias=bias). Weight (D, D).
        ### BEGIN SOLUTION
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        ### END SOLUTION

    def forward(self, heads):  # heads (B, H, L, d_k) -> (B, L, D)
        # heads: (B, H, L, d_k)
        # TODO (output_projection)
        #   [한국어] 헤드를 (B, H, L, d_k) -> (B, L, H, d_k) -> (B, L, D)로 결합한 뒤 w_o를 적용하세요.
        #   [English] merge the heads (B, H, L, d_k) -> (B, L, H, d_k) -> (B, L, D), then apply w_o.
        ### BEGIN SOLUTION
        B, H, L, d_k = heads.shape
        merged = heads.transpose(1, 2).contiguous().view(B, L, H * d_k)  # (B, L, D)
        return self.w_o(merged)  # (B, L, D)
        ### END SOLUTION
