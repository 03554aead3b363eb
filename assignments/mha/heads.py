"""단계 `split_heads`: 헤드 분할과 헤드 결합.

D를 헤드 H개로 자르세요: 각 헤드는 d_k = D // H개의 특성을 받고, 헤드 h는 모든 토큰의 특성
h*d_k ... (h+1)*d_k - 1을 받습니다. D가 H로 나누어지지 않으면 ValueError를 내세요.

분할:  (B, L, D) --view--> (B, L, H, d_k) --transpose(1, 2)--> (B, H, L, d_k)
결합:  (B, H, L, d_k) --transpose(1, 2)--> (B, L, H, d_k) --view--> (B, L, H*d_k)

(B, H, L, d_k)로 바로 view하지 말고 transpose하세요 (아래 예시의 "틀림").

마지막 view 전에 .contiguous()를 호출하세요 (또는 필요할 때 복사하는 .reshape를 쓰세요).

예시: B = 1, L = 2 토큰, D = 4, H = 2, d_k = 2.

    >>> import torch
    >>> from mha.heads import merge_heads, split_heads
    >>> x = torch.arange(8.).view(1, 2, 4)   # (B, L, D): 토큰 0 = [0, 1, 2, 3], 1 = [4, 5, 6, 7]
    >>> heads = split_heads(x, 2)
    >>> heads    # (B, H, L, d_k). 헤드 0: 두 토큰의 특성 0, 1; 헤드 1: 특성 2, 3
    tensor([[[[0., 1.],
              [4., 5.]],
    <BLANKLINE>
             [[2., 3.],
              [6., 7.]]]])
    >>> x.view(1, 2, 2, 2)[0, 0]   # 틀림: view만 하면 헤드 0 = 토큰 0 전체
    tensor([[0., 1.],
            [2., 3.]])
    >>> merge_heads(heads)                   # (B, L, D): x 그대로
    tensor([[[0., 1., 2., 3.],
             [4., 5., 6., 7.]]])
"""


def split_heads(x, num_heads):  # x (B, L, D) -> (B, H, L, d_k)
    """(B, L, D) -> (B, H, L, D // H). D가 num_heads로 나누어지지 않으면 ValueError."""
    # TODO (split_heads)
    #   나누어지는지 확인한 뒤, 위 설명대로 view + transpose 하세요.
    #   (B, L, D) -> (B, L, H, d_k) -> (B, H, L, d_k).
    raise NotImplementedError("TODO")


def merge_heads(x):  # x (B, H, L, d_k) -> (B, L, H * d_k)
    """(B, H, L, d_k) -> (B, L, H * d_k): split_heads의 역연산."""
    # TODO (split_heads)
    #   다시 transpose 하고, contiguous로 만든 뒤, view 하세요.
    #   (B, H, L, d_k) -> (B, L, H, d_k) -> (B, L, H*d_k).
    raise NotImplementedError("TODO")
