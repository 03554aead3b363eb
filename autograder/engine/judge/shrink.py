"""The smallest failing example: shrink a check's inputs while the student's output stays wrong.

    shrunk = shrink(inputs, run, fails)            # None: the inputs given do not fail
    shrunk.inputs, shrunk.observation              # the smallest failing input found, what it gave

`inputs` is a check's inputs dict (tensors, numbers, lists, nested dicts and tuples of them);
`run(inputs)` runs the student's half on them and returns an observation; `fails(inputs,
observation)` judges it against an expectation computed afresh from the same inputs (True: still
wrong in the same way). Neither may be trusted to behave: an exception from either rejects that
candidate. The search is greedy, as property-based testing shrinks a counterexample, with a fixed
order of candidates, so that it is deterministic for given inputs (a check's seed):

1. sizes: every tensor axis longer than 1 belongs to a *dimension*, and a dimension shrinks as one
   (its first entries kept, else its last ones), to 1, 2, 3, half or one less, the smallest that
   still fails. Which axes
   are one dimension (q's and k's d_k, k's and v's Lk, a mask's Lq and Lk with the scores') is
   declared by the check (`dims`, see `dimensions`) or, where it declares nothing, read off the
   inputs as given: axes of the same length are one dimension. A check's own inputs give every
   dimension its own length (attention: B=2, H=3, Lq=5, Lk=7, d_k=4, d_v=6), so the rule finds
   the ties; two dimensions that share a length by chance shrink together, which keeps the
   inputs consistent, only less small. A candidate the oracle cannot take (a size that no longer
   divides, an index past a shrunk table) fails to judge and is passed over.
2. values: each floating tensor to zeros, else rounded to integers, else its signs, else entry by
   entry to 0; each bool tensor (a mask) to all False, else entry by entry (a single blocked key
   is what stays); integer tensors and whole numbers towards 0; list items (token ids, a batch's
   sequences) left out one at a time.
3. again from 1, until nothing shrinks, or `max_runs` runs: the bound, which keeps the result
   the same on every machine. `seconds` is only a guard against slow code (after it the best
   found so far is kept); most candidates are small, and a search takes a tenth of a second.

A check may opt out with `shrink = False` (a check on random behaviour, say dropout).
"""

import time
from dataclasses import dataclass

import torch

MAX_RUNS = 60  # what bounds the search (and keeps it deterministic)
# Only a guard against slow code: on a quiet machine 60 runs of small inputs take ~0.1 s. Generous,
# because a search cut short by a busy machine shows a different example for the same code.
SECONDS = 10.0
ENTRYWISE = 16  # tensors of at most this many entries are also simplified entry by entry


@dataclass
class Shrunk:
    """What `shrink` found."""

    inputs: dict  # the smallest failing inputs found
    observation: object  # what `run` gave on them
    runs: int  # how many times `run` was called
    size_before: int  # size() of the inputs as given
    size_after: int  # size() of `inputs`


def size(value) -> int:
    """How big an input is: the entries of its tensors, plus its list items and numbers."""
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, dict):
        return sum(size(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return len(value) + sum(size(item) for item in value)
    return 1 if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def complexity(value) -> tuple:
    """(size, entries that are not 0, entries that are not whole numbers, the sum of their
    magnitudes): smaller is simpler, compared in that order."""
    nonzero = fractional = 0
    magnitude = 0.0
    for _, leaf in leaves(value):
        if isinstance(leaf, torch.Tensor) and leaf.numel() and not leaf.is_complex():
            values = leaf.detach().to(torch.float64) if leaf.dtype != torch.bool else leaf.to(torch.float64)
            finite = values.nan_to_num(0.0, posinf=0.0, neginf=0.0)
            nonzero += int(torch.count_nonzero(values))
            fractional += int((finite != finite.round()).sum())
            magnitude += float(finite.abs().sum())
        elif isinstance(leaf, (int, float)) and not isinstance(leaf, bool):
            nonzero += leaf != 0
            fractional += isinstance(leaf, float) and leaf != round(leaf)
            magnitude += abs(leaf)
    return size(value), nonzero, fractional, magnitude


def leaves(value, path=()):
    """(path, leaf) of every tensor and number in `value`, in order; a path is a tuple of dict keys
    and list indices."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    else:
        yield path, value


def replaced(value, path, new):
    """A copy of `value` with the leaf at `path` replaced by `new` (containers copied, leaves shared)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, new)}
    items = list(value)
    items[head] = replaced(items[head], rest, new)
    return type(value)(items) if isinstance(value, tuple) else items


def get(value, path):
    for key in path:
        value = value[key]
    return value


def dimensions(inputs, dims=None) -> dict:
    """{dimension: [(path, axis), ...]}: the tensor axes that shrink together.

    `dims` (a check's declaration, optional): {input name: a tuple naming each axis of that tensor
    (None: an axis that never shrinks, such as a mask's broadcast axis), or, for a whole number,
    the one dimension it is the size of}. Nested inputs are named by their path joined with dots
    ("states.w_q.weight"). Without `dims`, axes of the same length (2 or more) are one dimension,
    named by that length."""
    found = {}
    for path, leaf in leaves(inputs):
        name = ".".join(map(str, path))
        if dims is not None:
            declared = dims.get(name)
            if isinstance(leaf, torch.Tensor) and isinstance(declared, (tuple, list)):
                for axis, dim in enumerate(declared[: leaf.dim()]):
                    if dim is not None:
                        found.setdefault(dim, []).append((path, axis))
            elif isinstance(declared, str) and isinstance(leaf, int) and not isinstance(leaf, bool):
                found.setdefault(declared, []).append((path, None))
        elif isinstance(leaf, torch.Tensor):
            for axis, length in enumerate(leaf.shape):
                if length > 1:
                    found.setdefault(length, []).append((path, axis))
    return found


def length_of(inputs, members):
    path, axis = members[0]
    leaf = get(inputs, path)
    return leaf if axis is None else leaf.shape[axis]


def resized(inputs, members, length, last=False):
    """`inputs` with every axis of one dimension cut to its first `length` entries (its last ones
    if `last`), and a number that is the dimension's size set to `length`."""
    for path, axis in members:
        leaf = get(inputs, path)
        if axis is None:
            new = length
        else:
            kept = min(length, leaf.shape[axis])
            new = leaf.narrow(axis, leaf.shape[axis] - kept if last else 0, kept).clone()
        inputs = replaced(inputs, path, new)
    return inputs


def smaller_lengths(length):
    """The lengths tried for a dimension of `length`, smallest first."""
    return sorted({n for n in (1, 2, 3, length // 2, length - 1) if 1 <= n < length})


def value_candidates(leaf):
    """Simpler versions of one leaf, simplest first."""
    if isinstance(leaf, bool) or leaf is None:
        return
    if isinstance(leaf, int):
        yield from (n for n in sorted({0, 1, leaf // 2, leaf - 1}) if 0 <= n < leaf)
        return
    if not isinstance(leaf, torch.Tensor) or not leaf.numel():
        return
    if leaf.dtype == torch.bool:
        if leaf.any():
            yield torch.zeros_like(leaf)
        yield from entrywise(leaf, False)
    elif leaf.is_floating_point():
        for simpler in (torch.zeros_like(leaf), leaf.round(), leaf.sign()):
            if not torch.equal(simpler, leaf):
                yield simpler
        yield from entrywise(leaf, 0)
    elif not leaf.is_complex():
        if leaf.any():
            yield torch.zeros_like(leaf)
        yield from entrywise(leaf, 0)


def entrywise(leaf, simplest):
    """`leaf` with one entry set to `simplest`, for each entry that is not already (small tensors)."""
    if leaf.numel() > ENTRYWISE:
        return
    flat = leaf.reshape(-1)
    for index in range(flat.numel()):
        if flat[index].item() != simplest:
            candidate = flat.clone()
            candidate[index] = simplest
            yield candidate.reshape(leaf.shape)


def lists(value, path=()):
    """(path, list) of every list in `value` that holds no tensor (token ids, a batch of them)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from lists(item, (*path, key))
    elif isinstance(value, (list, tuple)):
        if isinstance(value, list) and not any(isinstance(leaf, torch.Tensor) for _, leaf in leaves(value)):
            yield path, value
        for index, item in enumerate(value):
            yield from lists(item, (*path, index))


def shrink(inputs, run, fails, dims=None, max_runs=MAX_RUNS, seconds=None, observation=None):
    """A Shrunk: the smallest failing inputs found from `inputs` (module docstring), or None when
    `inputs` themselves do not fail (or cannot be run). `observation`: what `run(inputs)` gave
    already, where the caller has it (saves running the largest input once more). `seconds`:
    the guard (default SECONDS, read when the search starts)."""
    search = _Search(run, fails, max_runs, SECONDS if seconds is None else seconds)
    if not search.accepts(inputs, first=True, observation=observation):
        return None
    members = dimensions(inputs, dims)
    sizes = {path for group in members.values() for path, axis in group if axis is None}
    progress = True
    while progress and search.budget_left():
        progress = False
        for dim in sorted(members, key=lambda d: -length_of(search.best, members[d])):  # the longest first
            for length in smaller_lengths(length_of(search.best, members[dim])):
                # the first entries, else the last ones (where a padding mask blocks its keys)
                if search.accepts(resized(search.best, members[dim], length)) or search.accepts(
                    resized(search.best, members[dim], length, last=True)
                ):
                    progress = True
                    break
        # inner lists first, each from its end: a removal moves no path still to be tried
        for path, _ in reversed(list(lists(search.best))):
            for index in reversed(range(len(get(search.best, path)))):
                items = get(search.best, path)
                if search.accepts(replaced(search.best, path, items[:index] + items[index + 1 :])):
                    progress = True
        for path, _ in list(leaves(search.best)):
            if path in sizes:  # a number that is a dimension's size shrinks with it
                continue
            for candidate in value_candidates(get(search.best, path)):
                if search.accepts(replaced(search.best, path, candidate)):
                    progress = True
                    if not isinstance(candidate, torch.Tensor):
                        break
    return Shrunk(search.best, search.observation, search.runs, size(inputs), size(search.best))


class _Search:
    """The best failing inputs so far, and the runs spent finding them."""

    def __init__(self, run, fails, max_runs, seconds):
        self.run, self.fails, self.max_runs, self.seconds = run, fails, max_runs, seconds
        self.started, self.runs = time.monotonic(), 0
        self.best = self.observation = self.key = None

    def budget_left(self) -> bool:
        return self.runs < self.max_runs and time.monotonic() - self.started < self.seconds

    def accepts(self, candidate, first=False, observation=None) -> bool:
        """True (and `candidate` is the best now) if it is simpler than the best and still fails."""
        key = complexity(candidate)
        if not first and (key >= self.key or not self.budget_left()):
            return False
        try:
            if observation is None:
                self.runs += 1
                observation = self.run(candidate)
            still = bool(self.fails(candidate, observation))
        except Exception:  # noqa: BLE001 - student code, or an oracle given inputs it cannot take
            return False
        if still:
            self.best, self.observation, self.key = candidate, observation, key
        return still
