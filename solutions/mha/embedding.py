"""Step `embedding` — token ids -> vectors.

`nn.Embedding(vocab_size, d_model)` is a lookup table: row i of its weight (vocab_size, d_model)
is the vector of token i. Looking up a (B, L) tensor of ids gives (B, L, d_model).

Padding tokens carry no meaning, so their vector should be all zeros and should never be
trained. `nn.Embedding(..., padding_idx=pad_id)` does both: it zeroes that row at creation and
gives it no gradient.
"""
import torch.nn as nn


class TokenEmbedding(nn.Module):
    """Token ids (B, L) -> vectors (B, L, d_model); the pad vector is zero and never trained."""

    def __init__(self, vocab_size, d_model, pad_id=0):
        super().__init__()
        # TODO: create self.embedding, an nn.Embedding with vocab_size rows of size d_model
        # whose padding row is pad_id.
        ### BEGIN SOLUTION
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        ### END SOLUTION

    def forward(self, ids):
        # ids: int64 (B, L)
        # TODO: return the vectors of `ids`, shape (B, L, d_model).
        ### BEGIN SOLUTION
        return self.embedding(ids)  # (B, L, d_model)
        ### END SOLUTION
