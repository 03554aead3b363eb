"""Step `padding` — 패딩: 토큰 id 리스트를 하나의 배치로 / pad token-id lists into one batch.

[한국어]
짧은 문장의 오른쪽(뒤)을 특별한 토큰 id인 `pad_id`로 채워 모든 행의 길이를 L로 맞추세요. 이것이
패딩입니다.

`pad_mask`는 어느 위치가 패딩으로 채워졌는지 기억합니다. 이 키트의 마스크 규칙은 True = 막힘(blocked)
입니다. 여기서는 True = 패딩 위치입니다.

`max_len`을 주면 L = max_len이고, 그보다 긴 문장은 앞의 max_len개 토큰만 남깁니다.

[English]
Fill the shorter sentences up on the RIGHT with a special token id, `pad_id`, until every row has
length L. This is padding.

`pad_mask` remembers which positions were added. Mask convention in this kit: True = blocked
(here: True = padding).

With `max_len`, L = max_len and longer sentences keep only their first max_len tokens.

예시 / Example:

    >>> from mha.padding import pad_batch
    >>> ids, pad_mask = pad_batch([[5, 2, 7], [3]])
    >>> ids          # (B=2, L=3): 짧은 문장 뒤에 pad_id=0 / pad_id=0 after the short one
    tensor([[5, 2, 7],
            [3, 0, 0]])
    >>> pad_mask     # (B, L): True = 패딩 / padding
    tensor([[False, False, False],
            [False,  True,  True]])
    >>> ids, pad_mask = pad_batch([[5, 2, 7], [3]], pad_id=9, max_len=2)   # 잘라내기 / truncate
    >>> ids          # (B=2, L=max_len=2)
    tensor([[5, 2],
            [3, 9]])
    >>> pad_mask
    tensor([[False, False],
            [False,  True]])
"""
import torch


def pad_batch(sequences, pad_id=0, max_len=None):  # -> ids (B, L), pad_mask (B, L)
    """토큰 id 리스트들을 오른쪽 패딩으로 하나의 텐서로 만듭니다.
    Right-pad a list of token-id lists into one tensor.

    인자 / Args:
        sequences: 정수(토큰 id) 리스트 B개. 바꾸면 안 됩니다.
                   list of B lists of ints (token ids). Must not be modified.
        pad_id:    패딩 위치에 쓰는 id. / the id written into padding positions.
        max_len:   주어지면 L = max_len이고 더 긴 문장은 앞의 max_len개 토큰만 남깁니다;
                   None이면 L = 가장 긴 문장의 길이.
                   if given, L = max_len and longer sequences keep only their first max_len
                   tokens; if None, L = length of the longest sequence.

    반환 / Returns:
        ids:      int64 텐서 (B, L), 오른쪽이 pad_id로 채워짐.
                  int64 tensor (B, L), right-padded with pad_id.
        pad_mask: bool 텐서 (B, L), 정확히 패딩 위치에서만 True.
                  bool tensor (B, L), True exactly at the padding positions.

    예외 / Raises:
        ValueError: `sequences`가 비어 있을 때 (배치 안의 빈 *문장* 하나는 괜찮습니다).
                    if `sequences` is empty (an empty *sequence* inside the batch is fine).
    """
    # TODO (padding)
    #   [한국어] 위 설명대로 `ids` (B, L)와 `pad_mask` (B, L)를 만드세요. 복사본으로 작업하거나
    #            새 텐서를 만드세요: 호출한 쪽의 리스트는 바뀌지 않은 채로 돌아가야 합니다.
    #   [English] build `ids` (B, L) and `pad_mask` (B, L) as described above. Work on copies (or
    #             build new tensors): the caller's lists must come back unchanged.
    ### BEGIN SOLUTION
    if len(sequences) == 0:
        raise ValueError("pad_batch needs at least one sequence")
    lengths = [len(seq) if max_len is None else min(len(seq), max_len) for seq in sequences]  # B ints
    L = max(lengths) if max_len is None else max_len  # ids (B, L)의 L / the L of ids (B, L)
    ids = torch.full((len(sequences), L), pad_id, dtype=torch.long)  # (B, L)
    pad_mask = torch.ones(len(sequences), L, dtype=torch.bool)  # (B, L)
    for b, (seq, n) in enumerate(zip(sequences, lengths)):
        ids[b, :n] = torch.tensor(list(seq[:n]), dtype=torch.long)  # (n,)
        pad_mask[b, :n] = False  # (n,): 행 b의 실제 토큰 / the real tokens of row b
    return ids, pad_mask  # (B, L), (B, L)
    ### END SOLUTION
