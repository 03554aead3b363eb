"""Step `kv_cache` — a key-value cache (키-값 캐시) for generating text one token at a time.

Why a cache? A decoder-only language model writes a sentence token by token. To choose token t
it runs causal attention in which the NEW query (token t's) meets the keys and values of ALL
tokens 0..t. Without a cache every step projects the whole prefix again: step t costs t
projections, a text of n tokens about n^2 / 2. Yet the key and the value of an old token never
change: under a causal mask a token's k and v depend only on that token and the ones before it,
never on what comes later. So keep them. Each step computes k and v of the new token(s) only
and appends them to what is kept; the prefix is never projected twice.

Shapes (per head, batch-first, the sequence on dim 2 as in the mha assignment):

    k of a new chunk           (B, H_kv, L_new, d_k)      H_kv = key/value heads (see gqa.py)
    v of a new chunk           (B, H_kv, L_new, d_v)      d_v may differ from d_k
    cached K after update      (B, H_kv, L_past + L_new, d_k)
    cached V after update      (B, H_kv, L_past + L_new, d_v)

Appending is torch.cat along dim 2, the SEQUENCE axis. dim 1 holds the heads and dim 3 the
features; concatenating there also "works" (no error) but builds a tensor of the wrong shape:
more heads, or longer vectors, instead of more tokens.

A chunk may be several tokens (the prompt, processed at once: "prefill") or one token (each
generated token: "decode"). Worked example, B = 1, H_kv = 1, d_k = d_v = 2:

    >>> cache = KVCache()
    >>> len(cache)                                    # nothing cached yet
    0
    >>> prompt = torch.tensor([[[[1., 1.], [2., 2.]]]])       # (1, 1, 2, 2): two tokens
    >>> K, V = cache.update(prompt, prompt)
    >>> K
    tensor([[[[1., 1.],
              [2., 2.]]]])
    >>> new = torch.tensor([[[[3., 3.]]]])                    # (1, 1, 1, 2): one more token
    >>> K, V = cache.update(new, new)
    >>> K                                             # (1, 1, 3, 2): the old rows, then the new
    tensor([[[[1., 1.],
              [2., 2.],
              [3., 3.]]]])
    >>> len(cache)                                    # tokens (positions), not calls
    3
    >>> cache.reset(); len(cache)                     # ready for the next text
    0

Real inference engines preallocate one buffer of the maximum length and write into it (a
"static cache"), because torch.cat copies everything kept at every step. Concatenating is
simpler and computes the same values; it is what this step asks for.
"""
import torch


class KVCache:
    """The keys and values of every position seen so far, per head: (B, H_kv, L, d_k / d_v).

    update(k, v) appends a chunk and returns the whole cache (K, V); len(cache) is the number of
    cached positions L (0 when empty); reset() empties the cache.
    """

    def __init__(self):
        # TODO: start empty (e.g. self.k = self.v = None).
        raise NotImplementedError("TODO")

    def update(self, k, v):
        """k (B, H_kv, L_new, d_k), v (B, H_kv, L_new, d_v) -> (K, V), the whole cache after
        appending them: K (B, H_kv, L_past + L_new, d_k), V (B, H_kv, L_past + L_new, d_v)."""
        # TODO: the first chunk becomes the cache; later chunks are appended along the
        # sequence axis (dim 2). Return the whole cache.
        raise NotImplementedError("TODO")

    def __len__(self):
        """The number of cached positions (tokens), 0 when empty."""
        # TODO
        raise NotImplementedError("TODO")

    def reset(self):
        """Forget everything: the next update starts a new sequence."""
        # TODO
        raise NotImplementedError("TODO")
