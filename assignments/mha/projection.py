"""단계 `qkv_projection`: 쿼리/키/밸류 프로젝션, 벡터 -> q, k, v.

학습되는 선형 변환 세 개로 x를 세 번 바꾸세요:  q = x W_q^T + b_q,  k = x W_k^T + b_k,
v = x W_v^T + b_v. 셋 다 크기 d_model을 유지하므로 x (B, L, D)에서 q, k, v가 각각 (B, L, D)로
나옵니다.

실제로 쓰이는 두 가지 작성법을 모두 구현합니다:
  * 따로 있는 nn.Linear(D, D) 세 개: w_q, w_k, w_v;
  * 합친(fused) nn.Linear(D, 3*D) 하나, 이름은 c_attn (GPT-2 방식): 큰 행렬곱 한 번 뒤에 마지막 차원을
    크기 D인 연속된 세 조각으로 자릅니다 — 순서는 q, k, v.

흔한 버그: k와 v도 w_q로 계산하기. q, k, v는 각자 자기 가중치가 필요합니다.

채점기는 여러분의 층에 가중치를 넣습니다: 이름이 아니라 하는 일로 찾습니다 (받아들이는 방식은 모두
노트북의 설명에 있습니다).

예시: D = 2, bias 없음; W_q = I, W_k = 2I, W_v는 두 특성을 맞바꿈. 합친 층의 가중치 (3*D, D)는
W_q, W_k, W_v를 위에서 아래로 쌓은 것이라 두 클래스가 같은 q, k, v를 냅니다:

    >>> import torch
    >>> from mha.projection import FusedQKVProjection, QKVProjection
    >>> W_q, W_k, W_v = torch.eye(2), 2 * torch.eye(2), torch.tensor([[0., 1.], [1., 0.]])
    >>> x = torch.tensor([[[1., 2.], [3., 4.]]])      # (B=1, L=2, D=2)
    >>> proj = QKVProjection(2, bias=False).requires_grad_(False)   # grad_fn 없이 출력
    >>> _ = proj.w_q.weight.copy_(W_q), proj.w_k.weight.copy_(W_k), proj.w_v.weight.copy_(W_v)
    >>> q, k, v = proj(x)                             # 각각 (B, L, D)
    >>> k
    tensor([[[2., 4.],
             [6., 8.]]])
    >>> fused = FusedQKVProjection(2, bias=False).requires_grad_(False)
    >>> _ = fused.c_attn.weight.copy_(torch.cat([W_q, W_k, W_v]))
    >>> all(torch.equal(a, b) for a, b in zip(fused(x), proj(x)))   # 위와 같은 (q, k, v)
    True
"""
import torch.nn as nn


class QKVProjection(nn.Module):
    """따로 있는 프로젝션 세 개: forward(x (B, L, D)) -> (q, k, v), 각각 (B, L, D)."""

    def __init__(self, d_model, bias=True):
        super().__init__()
        # TODO (qkv_projection)
        #   self.w_q, self.w_k, self.w_v를 만드세요: 각각
        #   nn.Linear(d_model, d_model, bias=bias), 가중치 (D, D).
        raise NotImplementedError("TODO")

    def forward(self, x):  # x (B, L, D) -> q, k, v each (B, L, D)
        # x: (B, L, D)
        # TODO (qkv_projection)
        #   (q, k, v)를 반환하세요. 각각 (B, L, D)이고, 각자 자기 프로젝션으로 계산합니다.
        q = ...  # (B, L, D)
        k = ...  # (B, L, D)
        v = ...  # (B, L, D)
        raise NotImplementedError("TODO")  # return


class FusedQKVProjection(nn.Module):
    """합친 프로젝션 c_attn 하나: forward(x (B, L, D)) -> (q, k, v), 각각 (B, L, D)."""

    def __init__(self, d_model, bias=True):
        super().__init__()
        self.d_model = d_model
        # TODO (qkv_projection)
        #   self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)를 만드세요.
        #   가중치 (3*D, D).
        raise NotImplementedError("TODO")

    def forward(self, x):  # x (B, L, D) -> q, k, v each (B, L, D)
        # x: (B, L, D)
        # TODO (qkv_projection)
        #   c_attn을 한 번 호출하면 (B, L, 3*D)가 나옵니다. 마지막 차원을 크기 D인 연속된
        #   세 조각으로 잘라 q, k, v 순서로 반환하세요. 각각 (B, L, D).
        raise NotImplementedError("TODO")
