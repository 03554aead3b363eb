"""Step `split_heads` — cut the model dimension into heads, and glue the heads back.

Multi-head attention runs H small attentions side by side. Each head looks at its own slice of
d_k = D // H features: head h gets features h*d_k ... (h+1)*d_k - 1 of every token.

split:  (B, L, D) --view--> (B, L, H, d_k) --transpose(1, 2)--> (B, H, L, d_k)
merge:  (B, H, L, d_k) --transpose(1, 2)--> (B, L, H, d_k) --view--> (B, L, H*d_k)

Why transpose and not just view (B, H, L, d_k) directly? view never moves numbers, it only
re-reads them. Reading (B, L, D) as (B, H, L, d_k) would hand each "head" a mix of several
tokens. The transpose moves the head axis in front of the token axis without mixing anything.

Why contiguous() before the last view? transpose only changes how memory is walked (strides);
view needs memory laid out in order, so call .contiguous() first (or use .reshape, which copies
when it has to).
"""


def split_heads(x, num_heads):
    """(B, L, D) -> (B, H, L, D // H). Raises ValueError if D is not divisible by num_heads."""
    # TODO: check divisibility, then view + transpose as described above.
    raise NotImplementedError("TODO")


def merge_heads(x):
    """(B, H, L, d_k) -> (B, L, H * d_k): the inverse of split_heads."""
    # TODO: transpose back, make contiguous, view.
    raise NotImplementedError("TODO")
