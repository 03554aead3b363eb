"""단계 `padding`: 토큰 id 리스트들을 오른쪽 패딩으로 하나의 배치로 만듭니다.

짧은 문장의 오른쪽(뒤)을 특별한 토큰 id인 `pad_id`로 채워 모든 행의 길이를 L로 맞추세요. 이것이
패딩입니다.

`pad_mask`는 어느 위치가 패딩으로 채워졌는지 기억합니다. 이 키트의 마스크 규칙은 True =
막힘(blocked)입니다. 여기서는 True = 패딩 위치입니다.

`max_len`을 주면 L = max_len이고, 그보다 긴 문장은 앞의 max_len개 토큰만 남깁니다.

예시:

    >>> from mha.padding import pad_batch
    >>> ids, pad_mask = pad_batch([[5, 2, 7], [3, 1]])
    >>> ids          # (B=2, L=3): 짧은 문장 뒤에 pad_id=0
    tensor([[5, 2, 7],
            [3, 1, 0]])
    >>> pad_mask     # (B, L): True = 패딩
    tensor([[False, False, False],
            [False, False,  True]])
    >>> pad_batch([[5, 2, 7], [3]], pad_id=9, max_len=2)[0]   # 잘라내기: (B=2, L=max_len=2)
    tensor([[5, 2],
            [3, 9]])
"""
import torch


def pad_batch(sequences, pad_id=0, max_len=None):  # -> ids (B, L), pad_mask (B, L)
    """토큰 id 리스트 B개 `sequences`(바꾸면 안 됨)를 오른쪽 패딩으로 하나의 텐서로 만듭니다.
    pad_id: 패딩 위치에 쓰는 id. max_len: 주어지면 L = max_len (더 긴 문장은 앞의 max_len개
    토큰만), None이면 L = 가장 긴 문장의 길이.
    반환: ids, int64 (B, L), 오른쪽이 pad_id로 채워짐; pad_mask, bool (B, L), 정확히 패딩
    위치에서만 True. `sequences`가 비어 있으면 ValueError (배치 안의 빈 *문장* 하나는 괜찮음).
    """
    # TODO (padding)
    #   위 설명대로 `ids` (B, L)와 `pad_mask` (B, L)를 만드세요. 복사본으로 작업하거나
    #   새 텐서를 만드세요: 호출한 쪽의 리스트는 바뀌지 않은 채로 돌아가야 합니다.
    raise NotImplementedError("TODO")
