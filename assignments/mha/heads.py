"""Step `split_heads` — 헤드 분할과 헤드 결합 / cut the model dimension into heads, and glue them back.

[한국어]
D를 헤드 H개로 자르세요: 각 헤드는 d_k = D // H개의 특성을 받고, 헤드 h는 모든 토큰의 특성
h*d_k ... (h+1)*d_k - 1을 받습니다. D가 H로 나누어지지 않으면 ValueError를 내세요.

분할 / split:  (B, L, D) --view--> (B, L, H, d_k) --transpose(1, 2)--> (B, H, L, d_k)
결합 / merge:  (B, H, L, d_k) --transpose(1, 2)--> (B, L, H, d_k) --view--> (B, L, H*d_k)

(B, H, L, d_k)로 바로 view하지 말고 transpose하세요: 곧바로 view하면 "헤드" 하나가 모든 토큰의 d_k개
조각 대신, 메모리에 이어진 몇몇 토큰의 특성 전체를 받습니다 (아래 예시에서 head 0이 토큰 0 전체를 받는
것을 보세요). 결합할 때도 먼저 transpose로 헤드 축을 토큰 축 뒤로 되돌려야 한 토큰의 헤드들이 나란히
붙습니다.

마지막 view 전에 .contiguous()를 호출하세요 (또는 필요할 때 복사하는 .reshape를 쓰세요).

[English]
Cut D into H heads: each head gets d_k = D // H features, head h gets features
h*d_k ... (h+1)*d_k - 1 of every token. Raise a ValueError when D is not divisible by H.

split:  (B, L, D) --view--> (B, L, H, d_k) --transpose(1, 2)--> (B, H, L, d_k)
merge:  (B, H, L, d_k) --transpose(1, 2)--> (B, L, H, d_k) --view--> (B, L, H*d_k)

Transpose, do not just view (B, H, L, d_k) directly: a bare view hands each "head" whole tokens (all
features of a few consecutive tokens) instead of a d_k slice of every token (in the example below
head 0 gets all of token 0). Merging is the same in reverse: transpose the head axis back behind the
token axis first, so that the heads of one token end up side by side.

Call .contiguous() before the last view (or use .reshape, which copies when it has to).

예시 / Example: B = 1, L = 2 토큰 / tokens, D = 4, H = 2, d_k = 2.

    >>> import torch
    >>> from mha.heads import merge_heads, split_heads
    >>> x = torch.arange(8.).view(1, 2, 4)   # (B, L, D): 토큰 / token 0 = [0, 1, 2, 3], 1 = [4, 5, 6, 7]
    >>> heads = split_heads(x, 2)
    >>> heads.shape                          # (B, H, L, d_k)
    torch.Size([1, 2, 2, 2])
    >>> heads    # head 0: 두 토큰의 특성 0, 1 / features 0, 1 of both tokens; head 1: 특성 2, 3
    tensor([[[[0., 1.],
              [4., 5.]],
    <BLANKLINE>
             [[2., 3.],
              [6., 7.]]]])
    >>> x.view(1, 2, 2, 2)   # 틀림: view만 하면 head 0 = 토큰 0 전체 / wrong: head 0 = token 0
    tensor([[[[0., 1.],
              [2., 3.]],
    <BLANKLINE>
             [[4., 5.],
              [6., 7.]]]])
    >>> y = heads.contiguous()   # 어텐션 출력처럼 순서대로 놓인 텐서 / in order, like attention's output
    >>> y.transpose(1, 2).is_contiguous()   # 그래서 view 전에 contiguous() / hence contiguous() first
    False
    >>> y.transpose(1, 2).view(1, 2, 4)   # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    RuntimeError: view size is not compatible with input tensor's size and stride ...
    >>> merge_heads(heads)                   # (B, L, D): x 그대로 / x again
    tensor([[[0., 1., 2., 3.],
             [4., 5., 6., 7.]]])
    >>> split_heads(x, 3)   # D = 4는 3으로 나누어지지 않음 (메시지는 자유) / not divisible (any message)
    Traceback (most recent call last):
        ...
    ValueError: d_model=4 is not divisible by num_heads=3
"""


def split_heads(x, num_heads):  # x (B, L, D) -> (B, H, L, d_k)
    """(B, L, D) -> (B, H, L, D // H). D가 num_heads로 나누어지지 않으면 ValueError.
    Raises ValueError if D is not divisible by num_heads."""
    # TODO (split_heads)
    #   [한국어] 나누어지는지 확인한 뒤, 위 설명대로 view + transpose 하세요.
    #            (B, L, D) -> (B, L, H, d_k) -> (B, H, L, d_k).
    #   [English] check divisibility, then view + transpose as described above.
    #             (B, L, D) -> (B, L, H, d_k) -> (B, H, L, d_k).
    raise NotImplementedError("TODO")


def merge_heads(x):  # x (B, H, L, d_k) -> (B, L, H * d_k)
    """(B, H, L, d_k) -> (B, L, H * d_k): split_heads의 역연산 / the inverse of split_heads."""
    # TODO (split_heads)
    #   [한국어] 다시 transpose 하고, contiguous로 만든 뒤, view 하세요.
    #            (B, H, L, d_k) -> (B, L, H, d_k) -> (B, L, H*d_k).
    #   [English] transpose back, make contiguous, view.
    #             (B, H, L, d_k) -> (B, L, H, d_k) -> (B, L, H*d_k).
    raise NotImplementedError("TODO")
