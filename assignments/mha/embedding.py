"""단계 `embedding`: 임베딩, 토큰 id -> 벡터, (B, L) -> (B, L, d_model).

`nn.Embedding(vocab_size, d_model)`은 조회 테이블(lookup table)입니다. 가중치 (vocab_size,
d_model)의 i번째 행이 토큰 i의 벡터입니다.

패딩 토큰은 의미가 없으므로 그 벡터는 0이어야 하고, 학습되어서도 안 됩니다. `nn.Embedding(...,
padding_idx=pad_id)`가 두 가지를 모두 해 줍니다: 만들 때 그 행을 0으로 채우고, 그 행에는
그래디언트(gradient)를 주지 않습니다. 채점기는 테이블을 이름이 아니라 forward가 id를 조회하는 곳으로
찾습니다 (어떤 이름의 nn.Embedding이든, 모듈의 파라미터에 적용한 F.embedding이든).

예시 (TODO가 정한 이름 `self.embedding`을 씁니다):

    >>> import torch
    >>> from mha.embedding import TokenEmbedding
    >>> emb = TokenEmbedding(vocab_size=4, d_model=2, pad_id=0)
    >>> ids = torch.tensor([[1, 0, 0]])   # (B=1, L=3): 토큰 1, 패딩 두 개
    >>> vectors = emb(ids)
    >>> vectors.shape                     # (B, L, d_model)
    torch.Size([1, 3, 2])
    >>> vectors[0, 1:]                    # 패딩 벡터는 0
    tensor([[0., 0.],
            [0., 0.]], grad_fn=<SliceBackward0>)
    >>> vectors.sum().backward()
    >>> emb.embedding.weight.grad[0]      # 0번 행(패딩)은 두 번 쓰였어도 그래디언트 0
    tensor([0., 0.])
"""
import torch.nn as nn


class TokenEmbedding(nn.Module):
    """토큰 id (B, L) -> 벡터 (B, L, d_model); 패딩 벡터는 0이고 학습되지 않습니다."""

    def __init__(self, vocab_size, d_model, pad_id=0):
        super().__init__()
        # TODO (embedding)
        #   self.embedding을 만드세요: 크기 d_model인 행이 vocab_size개이고, 패딩 행이
        #   pad_id인 nn.Embedding. 가중치 모양 (vocab_size, d_model).
        raise NotImplementedError("TODO")

    def forward(self, ids):  # ids (B, L) -> (B, L, d_model)
        # ids: int64 (B, L)
        # TODO (embedding)
        #   `ids`의 벡터를 반환하세요. 모양 (B, L, d_model).
        raise NotImplementedError("TODO")
