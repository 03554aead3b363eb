"""Step `grouped_query_attention` — 그룹 쿼리 어텐션 / fewer key/value heads than query heads.

[한국어]
쿼리 헤드는 H개 그대로 두고, 키/밸류 헤드는 H_kv개만 둡니다: 키/밸류 헤드 하나가 이웃한 쿼리 헤드
n_rep = H // H_kv개의 그룹을 맡습니다. H_kv == H이면 보통의 멀티헤드 어텐션이고, H_kv == 1이면 멀티
쿼리 어텐션(MQA, 모든 쿼리 헤드가 키/밸류 하나를 같이 씀)입니다.

쿼리 헤드 h는 어느 키/밸류 헤드를 쓸까요? 키/밸류 헤드 h // n_rep입니다. H = 6, H_kv = 2 (n_rep = 3)이면:

    쿼리 헤드      0 1 2 | 3 4 5
    키/밸류 헤드   0 0 0 | 1 1 1

가장 단순한 올바른 구현은 키/밸류 헤드마다 n_rep번 복사해서 자기 바로 옆에 두는 것입니다. 그러면
K/V 텐서의 헤드가 다시 H개가 되고, 보통의 어텐션을 그대로 쓸 수 있습니다. 복사한 뒤 헤드 h 자리에는
키/밸류 헤드 h // n_rep가 와야 하고, 그것이 바로 repeat_interleave가 만드는 순서 [0, 0, 0, 1, 1, 1]입니다.
repeat(타일처럼 통째로 반복)는 [0, 1, 0, 1, 0, 1]을 만들어 쿼리 헤드 h에 키/밸류 헤드 h % H_kv를 줍니다:
모양이 같아서 에러는 나지 않지만 헤드의 짝이 틀립니다.

[English]
Keep H query heads but only H_kv key/value heads: each K/V head serves a GROUP of
n_rep = H // H_kv consecutive query heads. H_kv == H is ordinary multi-head attention; H_kv == 1
is multi-query attention (MQA), one K/V for all.

Which K/V head does query head h use?  kv head h // n_rep.  With H = 6, H_kv = 2 (n_rep = 3):

    query heads   0 1 2 | 3 4 5
    kv head       0 0 0 | 1 1 1

The simplest correct implementation copies each K/V head n_rep times, next to itself, so that
the K/V tensor has H heads again and ordinary attention applies. After the copy, slot h must hold
kv head h // n_rep, and that is exactly the order repeat_interleave makes, [0, 0, 0, 1, 1, 1].
repeat (tiling) makes [0, 1, 0, 1, 0, 1] and gives query head h the kv head h % H_kv: same shape,
so no error, but the wrong pairs.

예시 / Example: repeat_interleave와 repeat의 순서 / the order of repeat_interleave and repeat:

    >>> import torch
    >>> from kv_cache.gqa import grouped_query_attention, repeat_kv
    >>> kv = torch.tensor([[[[10.]], [[20.]]]])   # (B=1, H_kv=2, L=1, d=1): 헤드 0 = 10, 헤드 1 = 20
    >>> repeat_kv(kv, 3).shape                     # (B, H_kv * n_rep, L, d)
    torch.Size([1, 6, 1, 1])
    >>> repeat_kv(kv, 3).flatten()                 # 키/밸류 헤드 / kv head j -> 헤드 / heads 3j, 3j+1, 3j+2
    tensor([10., 10., 10., 20., 20., 20.])
    >>> kv.repeat(1, 3, 1, 1).flatten()            # 틀림: 쿼리 헤드 h가 h % 2를 받음 / wrong: head h gets h % 2
    tensor([10., 20., 10., 20., 10., 20.])

H = 4 쿼리 헤드, H_kv = 2 (n_rep = 2). 키가 모두 0이라 가중치는 균등하고, 각 헤드의 출력은 자기
키/밸류 헤드의 밸류 평균입니다 / H = 4 query heads, H_kv = 2 (n_rep = 2). All keys are zero, so the
weights are uniform and each head's output is the mean of its kv head's values:

    >>> q = torch.ones(1, 4, 1, 1)                          # (B=1, H=4, Lq=1, d_k=1)
    >>> k = torch.zeros(1, 2, 2, 1)                         # (B=1, H_kv=2, Lk=2, d_k=1)
    >>> v = torch.tensor([[[[0.], [2.]], [[10.], [20.]]]])  # (B=1, H_kv=2, Lk=2, d_v=1)
    >>> out = grouped_query_attention(q, k, v)
    >>> out.shape                                           # (B, H, Lq, d_v)
    torch.Size([1, 4, 1, 1])
    >>> out.flatten()     # 헤드 0, 1 <- 키/밸류 헤드 0 (평균 1), 헤드 2, 3 <- 키/밸류 헤드 1 (평균 15)
    tensor([ 1.,  1., 15., 15.])
    >>> grouped_query_attention(q, k, v, mask=torch.tensor([False, True])).flatten()  # 키 1 막힘 / key 1 blocked
    tensor([ 0.,  0., 10., 10.])
    >>> grouped_query_attention(torch.ones(1, 3, 1, 1), k, v)  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
        ...
    ValueError: n_heads=3 is not a multiple of n_kv_heads=2

마지막 예: H = 3은 H_kv = 2의 배수가 아니므로 ValueError (메시지는 자유) / the last one: H = 3 is not a
multiple of H_kv = 2, so ValueError (any message).
"""
import math

import torch


def repeat_kv(x, n_rep):  # x (B, H_kv, L, d) -> (B, H_kv * n_rep, L, d)
    """(B, H_kv, L, d) -> (B, H_kv * n_rep, L, d): 키/밸류 헤드 j가 헤드 j*n_rep ... j*n_rep + n_rep - 1이
    됩니다 / kv head j becomes heads j*n_rep ... j*n_rep + n_rep - 1."""
    # TODO (grouped_query_attention)
    #   [한국어] 헤드마다 n_rep번, 자기 바로 옆에 (repeat_interleave 순서).
    #            (B, H_kv, L, d) -> (B, H_kv * n_rep, L, d).
    #   [English] each head n_rep times, next to itself (repeat_interleave order).
    #             (B, H_kv, L, d) -> (B, H_kv * n_rep, L, d).
    raise NotImplementedError("TODO")


def grouped_query_attention(q, k, v, mask=None):  # -> (B, H, Lq, d_v)
    """q (B, H, Lq, d_k), k (B, H_kv, Lk, d_k), v (B, H_kv, Lk, d_v), mask: (B, H, Lq, Lk)로
    브로드캐스트되는 bool, True = 막힘 / bool broadcastable to (B, H, Lq, Lk) with True = blocked.
    out (B, H, Lq, d_v)를 반환 / Returns out (B, H, Lq, d_v).

    H가 H_kv의 배수가 아니면 ValueError / Raises ValueError when H is not a multiple of H_kv."""
    # TODO (grouped_query_attention)
    #   [한국어] H가 H_kv의 배수인지 확인하고, 쿼리 헤드마다 자기 키/밸류 헤드를 주세요 (헤드 h는 키/밸류
    #            헤드 h // n_rep). k (B, H_kv, Lk, d_k) -> (B, H, Lk, d_k), v도 마찬가지.
    #   [English] check that H is a multiple of H_kv, and give every query head its K/V head (head
    #             h uses kv head h // n_rep). k (B, H_kv, Lk, d_k) -> (B, H, Lk, d_k), v likewise.
    raise NotImplementedError("TODO")
    # TODO (grouped_query_attention)
    #   [한국어] 그다음은 보통의 어텐션: 스케일된 점수 (B, H, Lq, Lk), 마스크 (아주 큰 음수, 유한한
    #            값으로 채우기), 키 방향 소프트맥스, 밸류의 가중합 -> (B, H, Lq, d_v).
    #   [English] then attention as usual: scaled scores (B, H, Lq, Lk), the mask (a very negative
    #             finite fill), softmax over the keys, the weighted sum of the values
    #             -> (B, H, Lq, d_v).
    scores = ...  # (B, H, Lq, Lk)
    # if mask is not None:
    scores = ...  # (B, H, Lq, Lk)
    weights = ...  # (B, H, Lq, Lk)
    raise NotImplementedError("TODO")  # return (B, H, Lq, d_v)
