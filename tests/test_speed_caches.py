"""The caches that make grading fast (issue 17) give the answers the uncached code gives.

find_projections keeps the roles it traced per module class, constructor arguments and
layers; the forbidden-call watch works out what to look for once per forbidden list."""

import torch

from autograder.assignments.mha.observers import _projections as check_module
from autograder.assignments.mha.observers._projections import find_projections
from autograder.harness.watch import watching


class Swappable(torch.nn.Module):
    """Which layer projects the query depends on a constructor argument."""

    def __init__(self, d, swap=False, extra=False):
        super().__init__()
        self.swap = swap
        self.a, self.b, self.c, self.d = (torch.nn.Linear(d, d).double() for _ in range(4))
        if extra:
            self.e = torch.nn.Linear(d, d).double()

    def forward(self, query, key=None, value=None, pad_mask=None):
        key = query if key is None else key
        value = query if value is None else value
        first, second = (self.b, self.a) if self.swap else (self.a, self.b)
        q, k, v = first(query), second(key), self.c(value)
        w = torch.softmax(q @ k.transpose(-2, -1), -1)
        return self.d(w @ v)


def paths(roles):
    return {role: slot.path for role, slot in roles.items()}


def test_cached_roles_equal_traced_roles_and_other_arguments_are_traced_anew():
    plain = paths(find_projections(Swappable(6), 6))
    assert plain == {"w_q": "a", "w_k": "b", "w_v": "c", "w_o": "d"}
    assert paths(find_projections(Swappable(6), 6, key=(False,))) == plain
    assert paths(find_projections(Swappable(6), 6, key=(False,))) == plain  # from the cache
    swapped = paths(find_projections(Swappable(6, swap=True), 6, key=(True,)))
    assert swapped == {"w_q": "b", "w_k": "a", "w_v": "c", "w_o": "d"}


def test_the_cache_is_not_used_for_other_layers_or_another_class(monkeypatch):
    traced = []
    real = check_module.trace_projections
    monkeypatch.setattr(
        check_module, "trace_projections", lambda m, d, *lengths: traced.append(type(m)) or real(m, d, *lengths)
    )
    find_projections(Swappable(6), 6, key="k")
    find_projections(Swappable(6), 6, key="k")
    assert len(traced) == 1
    find_projections(Swappable(6, extra=True), 6, key="k")  # one more layer: traced again
    assert len(traced) == 2

    class Other(Swappable):
        pass

    find_projections(Other(6), 6, key="k")
    assert len(traced) == 3


def test_a_cached_result_is_a_copy():
    for _ in range(2):  # the second from the cache
        roles = find_projections(Swappable(6), 6, key="copy")
        roles["w_q"] = None
    assert find_projections(Swappable(6), 6, key="copy")["w_q"] is not None


def test_each_watch_has_its_own_record_of_calls():
    forbidden = ("torch.nn.functional.scaled_dot_product_attention",)
    q = torch.randn(1, 2, 3, 4)
    with watching(forbidden) as first:
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
    with watching(forbidden) as second:
        torch.softmax(q, -1)
    assert first == ["torch.nn.functional.scaled_dot_product_attention"]
    assert second == []


class SwappableQKV(torch.nn.Module):
    """QKVProjection-like: which layer gives q depends on a constructor argument."""

    def __init__(self, d, swap=False):
        super().__init__()
        self.swap = swap
        self.a, self.b, self.c = (torch.nn.Linear(d, d).double() for _ in range(3))

    def forward(self, x):
        first, second = (self.b, self.a) if self.swap else (self.a, self.b)
        return first(x), second(x), self.c(x)


def test_qkv_roles_are_kept_per_class_and_arguments_and_equal_the_traced_ones(monkeypatch):
    from autograder.assignments.mha.observers._projections import find_qkv

    traced = []
    real = check_module.trace_qkv
    monkeypatch.setattr(
        check_module, "trace_qkv", lambda m, d, *lengths: traced.append(type(m)) or real(m, d, *lengths)
    )
    plain = paths(find_qkv(SwappableQKV(4), 4))
    assert plain == {"w_q": "a", "w_k": "b", "w_v": "c"}
    assert paths(find_qkv(SwappableQKV(4), 4, key=(False,))) == plain
    assert paths(find_qkv(SwappableQKV(4), 4, key=(False,))) == plain  # from the cache
    assert len(traced) == 2
    assert paths(find_qkv(SwappableQKV(4, swap=True), 4, key=(True,))) == {"w_q": "b", "w_k": "a", "w_v": "c"}
    assert paths(find_qkv(SwappableQKV(5), 5, key=(False,))) == plain  # another size: traced anew
    assert len(traced) == 4
