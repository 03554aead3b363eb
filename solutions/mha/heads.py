"""Step `split_heads` — 헤드 분할과 헤드 결합 / cut the model dimension into heads, and glue them back.

[한국어]
단계 `split_heads`: 헤드 분할과 헤드 결합.

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

[English]
Step `split_heads`: cut the model dimension into heads, and glue them back.

Cut D into H heads: each head gets d_k = D // H features, head h gets features
h*d_k ... (h+1)*d_k - 1 of every token. Raise a ValueError when D is not divisible by H.

split:  (B, L, D) --view--> (B, L, H, d_k) --transpose(1, 2)--> (B, H, L, d_k)
merge:  (B, H, L, d_k) --transpose(1, 2)--> (B, L, H, d_k) --view--> (B, L, H*d_k)

Transpose, do not just view (B, H, L, d_k) directly ("wrong" in the example below).

Call .contiguous() before the last view (or use .reshape, which copies when it has to).

Example: B = 1, L = 2 tokens, D = 4, H = 2, d_k = 2.

    >>> import torch
    >>> from mha.heads import merge_heads, split_heads
    >>> x = torch.arange(8.).view(1, 2, 4)   # (B, L, D): token 0 = [0, 1, 2, 3], 1 = [4, 5, 6, 7]
    >>> heads = split_heads(x, 2)
    >>> heads    # (B, H, L, d_k). head 0: features 0, 1 of both tokens; head 1: features 2, 3
    tensor([[[[0., 1.],
              [4., 5.]],
    <BLANKLINE>
             [[2., 3.],
              [6., 7.]]]])
    >>> x.view(1, 2, 2, 2)[0, 0]   # wrong: a bare view makes head 0 = all of token 0
    tensor([[0., 1.],
            [2., 3.]])
    >>> merge_heads(heads)                   # (B, L, D): x again
    tensor([[[0., 1., 2., 3.],
             [4., 5., 6., 7.]]])
"""


def split_heads(x, num_heads):  # x (B, L, D) -> (B, H, L, d_k)
    """[한국어] (B, L, D) -> (B, H, L, D // H). D가 num_heads로 나누어지지 않으면 ValueError.
    [English] (B, L, D) -> (B, H, L, D // H). Raises ValueError if D is not divisible by num_heads."""
    # TODO (split_heads)
    #   [한국어] 나누어지는지 확인한 뒤, 위 설명대로 view + transpose 하세요.
    #            (B, L, D) -> (B, L, H, d_k) -> (B, H, L, d_k).
    #   [English] check divisibility, then view + transpose as described above.
    #             (B, L, D) -> (B, L, H, d_k) -> (B, H, L, d_k).
    ### BEGIN SOLUTION
    B, L, D = x.shape  # x (B, L, D)
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_k = D // num_heads  # 헤드 하나의 크기 / the size of one head: (B, L, D) = (B, L, H * d_k)
    x = x.view(B, L, num_heads, d_k)  # (B, L, H, d_k)
    return x.transpose(1, 2)  # (B, H, L, d_k)
    ### END SOLUTION


def merge_heads(x):  # x (B, H, L, d_k) -> (B, L, H * d_k)
    """[한국어] (B, H, L, d_k) -> (B, L, H * d_k): split_heads의 역연산.
    [English] (B, H, L, d_k) -> (B, L, H * d_k): the inverse of split_heads."""
    # TODO (split_heads)
    #   [한국어] 다시 transpose 하고, contiguous로 만든 뒤, view 하세요.
    #            (B, H, L, d_k) -> (B, L, H, d_k) -> (B, L, H*d_k).
    #   [English] transpose back, make contiguous, view.
    #             (B, H, L, d_k) -> (B, L, H, d_k) -> (B, L, H*d_k).
    ### BEGIN SOLUTION
    B, H, L, d_k = x.shape  # x (B, H, L, d_k)
    x = x.transpose(1, 2).contiguous()  # (B, L, H, d_k)
    return x.view(B, L, H * d_k)  # (B, L, D)
    ### END SOLUTION
