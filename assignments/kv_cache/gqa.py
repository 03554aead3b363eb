"""단계 `grouped_query_attention`: 그룹 쿼리 어텐션, 쿼리 헤드보다 적은 키/밸류 헤드.

쿼리 헤드는 H개 그대로 두고, 키/밸류 헤드는 H_kv개만 둡니다: 키/밸류 헤드 하나가 이웃한 쿼리 헤드
n_rep = H // H_kv개의 그룹을 맡습니다 (H_kv == H: 보통의 멀티헤드 어텐션, H_kv == 1: 멀티 쿼리 어텐션).
H가 H_kv의 배수가 아니면 ValueError를 내세요.

쿼리 헤드 h는 어느 키/밸류 헤드를 쓸까요? 키/밸류 헤드 h // n_rep입니다 (H = 6, H_kv = 2이면 쿼리
헤드 0 1 2 | 3 4 5가 키/밸류 헤드 0 0 0 | 1 1 1을 씀).

가장 단순한 올바른 구현은 키/밸류 헤드마다 n_rep번 복사해서 자기 바로 옆에 두는 것입니다
(repeat_interleave의 순서 [0, 0, 0, 1, 1, 1]). repeat(타일처럼 통째로 반복)는 [0, 1, 0, 1, 0, 1]을
만들어 헤드의 짝이 틀립니다.

예시:

    >>> import torch
    >>> from kv_cache.gqa import grouped_query_attention, repeat_kv
    >>> kv = torch.tensor([[[[10.]], [[20.]]]])   # (B=1, H_kv=2, L=1, d=1): 헤드 0 = 10, 헤드 1 = 20
    >>> repeat_kv(kv, 3).flatten()                 # (B, H_kv * n_rep, L, d): 헤드 3j, 3j+1, 3j+2 <- j
    tensor([10., 10., 10., 20., 20., 20.])
    >>> kv.repeat(1, 3, 1, 1).flatten()            # 틀림: 쿼리 헤드 h가 h % 2를 받음
    tensor([10., 20., 10., 20., 10., 20.])
    >>> q = torch.ones(1, 4, 1, 1)                          # (B=1, H=4, Lq=1, d_k=1)
    >>> k = torch.zeros(1, 2, 2, 1)                         # (B=1, H_kv=2, Lk=2, d_k=1): 가중치 균등
    >>> v = torch.tensor([[[[0.], [2.]], [[10.], [20.]]]])  # (B=1, H_kv=2, Lk=2, d_v=1)
    >>> grouped_query_attention(q, k, v).flatten()  # 헤드 0, 1 <- 키/밸류 헤드 0 (평균 1), 2, 3 <- 1 (평균 15)
    tensor([ 1.,  1., 15., 15.])
    >>> grouped_query_attention(q, k, v, mask=torch.tensor([False, True])).flatten()  # 키 1 막힘
    tensor([ 0.,  0., 10., 10.])
"""
import math

import torch


def repeat_kv(x, n_rep):  # x (B, H_kv, L, d) -> (B, H_kv * n_rep, L, d)
    """(B, H_kv, L, d) -> (B, H_kv * n_rep, L, d): 키/밸류 헤드 j가 헤드
    j*n_rep ... j*n_rep + n_rep - 1이 됩니다.
    """
    # TODO (grouped_query_attention)
    #   헤드마다 n_rep번, 자기 바로 옆에 (repeat_interleave 순서).
    #   (B, H_kv, L, d) -> (B, H_kv * n_rep, L, d).
    raise NotImplementedError("TODO")


def grouped_query_attention(q, k, v, mask=None):  # -> (B, H, Lq, d_v)
    """q (B, H, Lq, d_k), k (B, H_kv, Lk, d_k), v (B, H_kv, Lk, d_v), mask: (B, H, Lq, Lk)로
    브로드캐스트되는 bool, True = 막힘. out (B, H, Lq, d_v)를 반환합니다. H가 H_kv의 배수가 아니면
    ValueError.
    """
    # TODO (grouped_query_attention)
    #   H가 H_kv의 배수인지 확인하고, 쿼리 헤드마다 자기 키/밸류 헤드를 주세요 (헤드 h는 키/밸류
    #   헤드 h // n_rep). k (B, H_kv, Lk, d_k) -> (B, H, Lk, d_k), v도 마찬가지.
    raise NotImplementedError("TODO")
    # TODO (grouped_query_attention)
    #   그다음은 보통의 어텐션: 스케일된 점수 (B, H, Lq, Lk), 마스크 (아주 큰 음수, 유한한
    #   값으로 채우기), 키 방향 소프트맥스, 밸류의 가중합 -> (B, H, Lq, d_v).
    scores = ...  # (B, H, Lq, Lk)
    # if mask is not None:
    scores = ...  # (B, H, Lq, Lk)
    weights = ...  # (B, H, Lq, Lk)
    raise NotImplementedError("TODO")  # return (B, H, Lq, d_v)
