"""Observers of step `masking`: the student's padding_mask and causal_mask, and the mask path of
their scaled_dot_product_attention.

The mask path is observed where the mask acts: on what enters the softmax. The student's
attention runs twice on the same q, k, v (same shapes: a view or reshape computes the same thing
in both runs), once with the mask and once without, and each time the input of its softmax is
recorded (torch.softmax, F.softmax, Tensor.softmax, nn.Softmax, log_softmax, and exp for a
softmax written out by hand). A mistake of the unmasked path (a wrong scale, a softmax over the
wrong dim, a missing transpose) changes both runs alike and leaves the mask's effect visible.
"""

import torch
from torch.overrides import TorchFunctionMode

from autograder.assignments.mha.observers.attention import attend
from autograder.harness.trace import traced_calls

# What a softmax is computed with, by the name a TorchFunctionMode sees (func.__name__).
SOFTMAX_CALLS = frozenset(
    {"softmax", "_softmax", "special_softmax", "log_softmax", "_log_softmax", "special_log_softmax", "exp", "exp_"}
)
# A shift written before exp (x - x.amax(dim, keepdim=True)): the scores are what it shifts.
SHIFT_CALLS = frozenset({"sub", "__sub__", "subtract"})
FLOOR = 1e4  # scores this far below their row's largest are reported as -FLOOR: all alike "blocked"


class SoftmaxInput(TorchFunctionMode):
    """Records the input of the last softmax-like call on a tensor of `shape`'s size whose last two
    dims are the scores' (Lq, Lk) (heads folded into the batch too). One tensor at most: student
    code may call exp a million times. Where exp's input is the scores minus a value constant
    along some of their axes (a max or logsumexp kept with keepdim), the scores are recorded: the
    shift is the student's softmax's own, along whichever axis it normalises (a softmax written
    over the wrong axis is the attention step's mistake, not the mask's)."""

    def __init__(self, shape):
        super().__init__()
        self.shape = tuple(shape)
        self.size = 1
        for n in self.shape:
            self.size *= n
        self.last = None
        self.shifted = None  # (the shifted tensor, the scores it was shifted from)

    def _scores_like(self, x) -> bool:
        return (
            isinstance(x, torch.Tensor)
            and x.is_floating_point()
            and x.dim() >= 2
            and tuple(x.shape[-2:]) == self.shape[-2:]
            and x.numel() == self.size
        )

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", None)
        if name in SOFTMAX_CALLS:
            x = args[0] if args else kwargs.get("input", kwargs.get("self"))
            if self._scores_like(x):
                source = self.shifted[1] if self.shifted is not None and self.shifted[0] is x else None
                self.last = source if source is not None else x.detach().clone()  # before an in-place exp_
        result = func(*args, **kwargs)
        shifts = name in SHIFT_CALLS and len(args) == 2 and self._scores_like(args[0]) and self._scores_like(result)
        if shifts and _reduction_of(args[1], args[0]):
            self.shifted = (result, args[0].detach().clone())
        return result


def _reduction_of(shift, x) -> bool:
    """Whether `shift` is x's largest entry or its logsumexp along the axes where shift has one
    entry (a keepdim reduction: what a softmax written out subtracts), not an additive mask."""
    if not isinstance(shift, torch.Tensor) or shift.dim() != x.dim() or not shift.is_floating_point():
        return False
    axes = [i for i in range(x.dim()) if shift.shape[i] == 1 and x.shape[i] > 1]
    if not axes or any(shift.shape[i] not in (1, x.shape[i]) for i in range(x.dim())):
        return False
    try:  # the observer's own arithmetic: whatever the student's tensors are, it never raises into their code
        with torch.no_grad():
            shift, x = shift.detach().to(torch.float64), x.detach().to(torch.float64)
            return any(
                reduced.shape == shift.shape and torch.allclose(shift, reduced, rtol=1e-6, atol=1e-6, equal_nan=True)
                for reduced in (x.amax(axes, keepdim=True), x.logsumexp(axes, keepdim=True))
            )
    except Exception:  # noqa: BLE001 - a tensor subclass, another device: no shift recognised
        return False


def relative_to_row(x, shape):
    """x (float64, of `shape`) minus the largest entry of its row (the last dim), cut off at
    -FLOOR: the same for every way of writing a mask fill (-1e9, finfo.min, -inf, an additive
    -1e4) and for a softmax written with a max or logsumexp subtracted. A row whose entries are
    all -inf comes out NaN (a softmax of it is NaN)."""
    y = x.detach().to(device="cpu", dtype=torch.float64).reshape(shape)
    top = y.amax(-1, keepdim=True) if y.numel() else y
    return (y - top).clamp(min=-FLOOR)


def _attend_recording(mha, q, k, v, mask):
    """attend(), and the input of the softmax it ran (relative_to_row), or None if none was seen."""
    shape = (*q.shape[:-1], k.shape[-2])  # (B, H, Lq, Lk)
    recorder = SoftmaxInput(shape)
    with recorder:
        got = attend(mha, q, k, v) if mask is None else attend(mha, q, k, v, mask=mask)
    seen = None if recorder.last is None else relative_to_row(recorder.last, shape)
    return {**got, "softmax_in": seen}


def square(q, k, v, mask):
    """(q, k, v, mask) with every size equal to Lk: each axis longer than 1 taken cyclically
    (index i % its length) up to Lk entries. A transposition mistake (q @ k, k.transpose(1, 2))
    runs there; the judge rebuilds the same inputs to judge them."""
    n = k.shape[-2]

    def cut(x):
        for axis, length in enumerate(x.shape):
            if length > 1 and length != n:
                x = x.index_select(axis, torch.arange(n, device=x.device) % length)
        return x

    return cut(q), cut(k), cut(v), cut(mask)


def masked_and_unmasked(mha, q, k, v, mask):
    """{"out", "weights", "softmax_in"} of masked attention; "free": the same of unmasked attention
    on the same q, k, v (None if it raised); "square": whether both ran on square(q, k, v, mask)
    instead (they do when the unmasked attention raises on the check's own sizes)."""
    on_square = False
    try:
        free = _attend_recording(mha, q, k, v, None)
    except Exception:  # noqa: BLE001 - student code: the unmasked path is step attention's
        try:
            free = _attend_recording(mha, *square(q, k, v, mask)[:3], None)
            q, k, v, mask = square(q, k, v, mask)
            on_square = True
        except Exception:  # noqa: BLE001 - student code: then the masked run alone, on the check's sizes
            free = None
    masked = _attend_recording(mha, q, k, v, mask)
    return {**masked, "free": free, "square": on_square}


def padding_mask(mha, ids, pad_id=None):
    """{"mask"}: padding_mask(ids) (with pad_id when given)."""
    mask = mha.masking.padding_mask(ids) if pad_id is None else mha.masking.padding_mask(ids, pad_id=pad_id)
    return {"mask": mask}


def causal_masks(mha, lengths):
    """{"mask_<L>"}: causal_mask(L) for each length."""
    return {f"mask_{length}": mha.masking.causal_mask(length) for length in lengths}


def traced_masks(mha, ids, length):
    """Localisation: padding_mask(ids), then causal_mask(length), each recorded (harness/trace.py)."""
    return traced_calls(mha, [lambda: mha.masking.padding_mask(ids), lambda: mha.masking.causal_mask(length)])


# ### BEGIN HIDDEN CHECKS (observers only hidden checks use: left out of a student release)


def causal_mask_on(mha, length, device):
    """The device, shape and dtype of causal_mask(length, device=torch.device(device))."""
    mask = mha.masking.causal_mask(length, device=torch.device(device))
    return {
        "device": str(getattr(mask, "device", None)),
        "shape": tuple(getattr(mask, "shape", ())),
        "dtype": str(getattr(mask, "dtype", None)),
    }


def both_masks(mha, ids, pad_id, length):
    """{"padding", "causal"}: padding_mask(ids, pad_id=pad_id) and causal_mask(length)."""
    return {"padding": mha.masking.padding_mask(ids, pad_id=pad_id), "causal": mha.masking.causal_mask(length)}
