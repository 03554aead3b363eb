"""What an observer keeps of student code's results while it calls student code again: a copy.

A value is judged as it was when the student's code returned it. Real code returns views of its own
buffers (a static KV cache hands back slices of a preallocated tensor, and writes over them after a
reset); an observer that kept the view would judge what the buffer holds later, and charge values
that were right when they were returned (issue 32). So an observer that calls the student's code
more than once keeps kept(result) of each call, never the result itself.

    seen.append(kept(cache.update(k, v)))      # (K, V) as they were, whatever happens to the cache
"""

import torch


def kept(value):
    """`value` with every tensor in it (in tuples, lists and dicts, nested) replaced by a detached
    copy of its own; anything else as it is."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, tuple):
        return tuple(kept(item) for item in value)
    if isinstance(value, list):
        return [kept(item) for item in value]
    if isinstance(value, dict):
        return {key: kept(item) for key, item in value.items()}
    return value
