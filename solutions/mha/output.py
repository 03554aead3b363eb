"""Step `output_projection` — glue the heads back together and mix them.

Attention leaves one result per head: (B, H, L, d_k). Put the heads next to each other again,
(B, H, L, d_k) -> (B, L, H, d_k) -> (B, L, H*d_k = D), then apply one more learned linear map
w_o (D -> D) so that the heads' results can be combined.

This file does its own merge (transpose, contiguous, view) so that it can be graded on its own.
The grader loads its weights into w_o, or into the class's only layer, whatever its name
(nn.LazyLinear works too).
"""
import torch.nn as nn


class OutputProjection(nn.Module):
    """forward(heads (B, H, L, d_k)) -> (B, L, d_model): merge heads, then w_o."""

    def __init__(self, d_model, bias=True):
        super().__init__()
        # TODO: create self.w_o = nn.Linear(d_model, d_model, bias=bias).
        ### BEGIN SOLUTION
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        ### END SOLUTION

    def forward(self, heads):
        # heads: (B, H, L, d_k)
        # TODO: merge the heads into (B, L, D), then apply w_o.
        ### BEGIN SOLUTION
        B, H, L, d_k = heads.shape
        merged = heads.transpose(1, 2).contiguous().view(B, L, H * d_k)  # (B, L, D)
        return self.w_o(merged)  # (B, L, D)
        ### END SOLUTION
