"""Step `masking` — 마스킹: 쿼리가 보면 안 되는 키는? / which keys may a query not look at?

[한국어]
단계 `masking`: 쿼리가 보면 안 되는 키는?

마스크 두 가지를 만드세요, 둘 다 bool이고 True = 막힘:

  * 패딩 마스크: 어떤 쿼리도 패딩 토큰을 보면 안 됩니다. ids (B, L)에서 ids == pad_id인 곳이
    True이고, 모양은 (B, 1, 1, L)입니다. 그래야 점수 (B, H, Lq, Lk)에 대해 헤드 축(dim 1)과 쿼리
    축(dim 2)으로 브로드캐스트됩니다. 패딩은 키 축(마지막 차원)에 있습니다.

  * 인과(causal) 마스크: 언어 모델에서 토큰 i는 토큰 0..i만 볼 수 있습니다. 점수 (L, L)에서
    대각선 위쪽을 모두 막습니다 (아래 예시의 causal_mask(4)).

    인과 마스크는 `device` 위에서 바로 만드세요: CPU에서 만든 마스크는 GPU에 있는 점수와 함께 쓸
    수 없습니다.

예시:

    >>> import torch
    >>> from mha.masking import causal_mask, padding_mask
    >>> ids = torch.tensor([[5, 2, 7], [3, 0, 0]])   # (B=2, L=3), pad_batch([[5, 2, 7], [3]])
    >>> padding_mask(ids).shape                      # (B, 1, 1, L)
    torch.Size([2, 1, 1, 3])
    >>> padding_mask(ids)[:, 0, 0]                   # (B, L)
    tensor([[False, False, False],
            [False,  True,  True]])
    >>> causal_mask(4)                               # (L, L): 대각선 위 = True
    tensor([[False,  True,  True,  True],
            [False, False,  True,  True],
            [False, False, False,  True],
            [False, False, False, False]])

[English]
Step `masking`: which keys may a query not look at?

Build two masks, both bool with True = BLOCKED:

  * padding mask: no query may attend to a padding token. From ids (B, L) it is True where
    ids == pad_id, shaped (B, 1, 1, L) so that it broadcasts over heads (dim 1) and over queries
    (dim 2) against scores of shape (B, H, Lq, Lk). The padding is on the KEY axis (the last).

  * causal mask: in a language model token i may only see tokens 0..i. For scores (L, L) this
    blocks everything above the diagonal (causal_mask(4) in the example below).

    Create it directly on `device`: a mask built on the CPU cannot be combined with scores that
    live on a GPU.

Example:

    >>> import torch
    >>> from mha.masking import causal_mask, padding_mask
    >>> ids = torch.tensor([[5, 2, 7], [3, 0, 0]])   # (B=2, L=3), pad_batch([[5, 2, 7], [3]])
    >>> padding_mask(ids).shape                      # (B, 1, 1, L)
    torch.Size([2, 1, 1, 3])
    >>> padding_mask(ids)[:, 0, 0]                   # (B, L)
    tensor([[False, False, False],
            [False,  True,  True]])
    >>> causal_mask(4)                               # (L, L): above the diagonal
    tensor([[False,  True,  True,  True],
            [False, False,  True,  True],
            [False, False, False,  True],
            [False, False, False, False]])
"""
import torch


def padding_mask(ids, pad_id=0):  # ids (B, L) -> (B, 1, 1, L)
    """[한국어] ids int64 (B, L) -> bool (B, 1, 1, L), ids == pad_id인 곳에서 True.
    [English] ids int64 (B, L) -> bool (B, 1, 1, L), True where ids == pad_id."""
    # TODO (masking)
    #   [한국어] 패딩 위치에서 True인 bool 마스크를 (B, 1, 1, L) 모양으로 반환하세요.
    #   [English] return the bool mask, True at the padding positions, shaped (B, 1, 1, L).
    ### BEGIN SOLUTION
    return (ids == pad_id)[:, None, None, :]  # (B, 1, 1, L)
    ### END SOLUTION


def causal_mask(seq_len, device=None):  # -> (L, L)
    """[한국어] -> bool (seq_len, seq_len), `device` 위에, 대각선 바로 위부터 True.
    [English] -> bool (seq_len, seq_len) on `device`, True strictly above the diagonal."""
    # TODO (masking)
    #   [한국어] 대각선 위쪽이 True인 (L, L) bool 마스크를 `device` 위에서 바로 만들어 반환하세요.
    #   [English] return the (L, L) bool mask, True strictly above the diagonal, created directly
    #             on `device`.
    ### BEGIN SOLUTION
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device)  # (L, L)
    return torch.triu(ones, diagonal=1)  # (L, L)
    ### END SOLUTION
