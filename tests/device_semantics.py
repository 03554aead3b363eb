"""What PyTorch does with tensors on a CUDA device, one small operation at a time: which mixes of
CPU and cuda tensors run and which raise, where the results land, which values can be read.

The same snippets run on a real GPU (`python tests/device_semantics.py` on a machine with one
prints their outcomes as JSON; needs nothing but torch) and on the simulated device
(tests/test_cuda.py compares the two): the simulation must agree with the GPU wherever a
student's attention code could go.

Each snippet takes `t`, a namespace of tensors: x, y (float64 (2, 3)), mask (bool (2, 3)), ids
(int64 (2,)) on the device; cx, cmask, cids (the same on the CPU), cscalar (a 0-dim CPU float64)
and cids2 (an int64 (2, 1) CPU index).
"""

import json
import sys
from types import SimpleNamespace

import torch
import torch.nn.functional as F


def _assign(target, index, value):
    target = target.clone()
    target[index] = value
    return target


SNIPPETS = {
    # elementwise ops: a CPU tensor with dimensions is refused, a 0-dim one is taken as a scalar
    "add_cpu": lambda t: t.x + t.cx,
    "add_cpu_scalar_tensor": lambda t: t.x + t.cscalar,
    "add_cpu_one_element": lambda t: t.x + t.cx[:1, :1].reshape(1),
    "cpu_plus_cuda_scalar_tensor": lambda t: t.cx + t.x.sum(),
    "add_inplace_cpu": lambda t: t.x.clone().add_(t.cx),
    "lt_cpu": lambda t: t.x < t.cx,
    "clamp_cpu_scalar_tensor": lambda t: t.x.clamp(min=t.cscalar),
    "clamp_max_cpu_scalar_tensor": lambda t: t.x.clamp(max=t.cscalar),
    "div_by_cpu_sqrt": lambda t: t.x / torch.sqrt(torch.tensor(4.0, dtype=torch.float64)),
    "pow_cpu_scalar_tensor": lambda t: t.x**t.cscalar,
    "maximum_cpu_scalar_tensor": lambda t: torch.maximum(t.x, t.cscalar),
    "eq_cpu_scalar_tensor": lambda t: t.ids == torch.tensor(0),
    "fill_cpu_scalar_tensor": lambda t: t.x.clone().fill_(t.cscalar),
    # masks
    "masked_fill_cpu_mask": lambda t: t.x.masked_fill(t.cmask, 0.0),
    "masked_fill_inplace_cpu_mask": lambda t: t.x.clone().masked_fill_(t.cmask, 0.0),
    "masked_fill_cpu_scalar_value": lambda t: t.x.masked_fill(t.mask, torch.tensor(-1e9, dtype=torch.float64)),
    "masked_fill_cuda_mask": lambda t: t.x.masked_fill(t.mask, float("-inf")),
    "where_cpu_condition": lambda t: torch.where(t.cmask, t.x, t.y),
    "where_cpu_scalar_tensor": lambda t: torch.where(t.mask, t.x, t.cscalar),
    "where_cpu_scalar_condition": lambda t: torch.where(t.cmask[0, 0], t.x, t.y),
    "masked_fill_cpu_scalar_mask": lambda t: t.x.masked_fill(t.cmask[0, 1], 0.0),
    "mask_made_on_cpu": lambda t: t.x.masked_fill(torch.ones(2, 3, dtype=torch.bool).triu(1), 0.0),
    "mask_made_on_device": lambda t: t.x.masked_fill(torch.ones(2, 3, dtype=torch.bool, device=t.x.device).triu(1), 0),
    "additive_mask_on_cpu": lambda t: (t.x + torch.zeros(2, 3, dtype=torch.float64)).softmax(-1),
    "masked_select_cpu_mask": lambda t: t.x.masked_select(t.cmask),
    # indexing
    "index_cpu_ids": lambda t: t.x[t.cids],
    "index_cpu_bool": lambda t: t.x[t.cmask],
    "index_cpu_scalar_tensor": lambda t: t.x[t.cids[0]],
    "index_cuda_ids_into_cpu": lambda t: t.cx[t.ids],
    "index_put_cpu_ids": lambda t: _assign(t.x, t.cids, 0.0),
    "index_put_cpu_values": lambda t: _assign(t.x, t.ids, t.cx),
    "index_put_cpu_scalar_value": lambda t: _assign(t.x, t.ids, t.cscalar),
    "index_cuda_bool_into_cpu": lambda t: t.cx[t.mask],
    "index_select_cpu_ids": lambda t: t.x.index_select(0, t.cids),
    "index_select_cpu_scalar_id": lambda t: t.x.index_select(0, t.cids[0]),
    "gather_cpu_ids": lambda t: t.x.gather(1, t.cids2),
    "embedding_cpu_ids": lambda t: F.embedding(t.cids, t.x),
    "embedding_cpu_weight": lambda t: F.embedding(t.ids, t.cx),
    "embedding_cpu_scalar_id": lambda t: F.embedding(t.cids[0], t.x),
    "embedding_cuda": lambda t: F.embedding(t.ids, t.x),
    # matrix products and joins
    "matmul_cpu": lambda t: t.x @ t.cx.T,
    "linear_cpu_weight": lambda t: F.linear(t.x, t.cx),
    "einsum_cpu": lambda t: torch.einsum("ij,kj->ik", t.x, t.cx),
    "cat_cpu": lambda t: torch.cat([t.x, t.cx]),
    "stack_cpu": lambda t: torch.stack([t.x, t.cx]),
    "sdpa_cpu_mask": lambda t: F.scaled_dot_product_attention(
        t.x[None], t.y[None], t.y[None], attn_mask=t.cmask[:, :2]
    ),
    # copies and where results land
    "copy_from_cpu": lambda t: t.x.clone().copy_(t.cx),
    "copy_into_cpu": lambda t: t.cx.clone().copy_(t.x),
    "to_cpu": lambda t: t.x.to("cpu"),
    "cpu_method": lambda t: t.x.cpu(),
    "to_other_cpu_tensor": lambda t: t.x.to(t.cx),
    "cpu_to_other_cuda_tensor": lambda t: t.cx.to(t.x),
    "cuda_method": lambda t: t.cx.cuda(),
    "type_as_cpu": lambda t: t.x.type_as(t.cx),
    "double_keeps_device": lambda t: t.x.float().double(),
    "new_tensor": lambda t: t.x.new_tensor([1.0, 2.0]),
    "new_zeros": lambda t: t.x.new_zeros(2),
    "new_zeros_on_cpu": lambda t: t.x.new_zeros(2, device="cpu"),
    "tensor_with_device": lambda t: torch.tensor([1.0, 2.0], device=t.x.device),
    "as_tensor_with_device": lambda t: torch.as_tensor(t.cx, device=t.x.device),
    "ones_like": lambda t: torch.ones_like(t.x),
    "zeros_like_on_cpu": lambda t: torch.zeros_like(t.x, device="cpu"),
    "full_like_scalar_tensor": lambda t: torch.full_like(t.x, t.cscalar),
    "arange_with_device": lambda t: torch.arange(3, device=t.x.device) < 2,
    "randn_with_device": lambda t: torch.randn(2, device=t.x.device).shape,
    "tensor_without_device": lambda t: torch.tensor([1.0]),
    # values read back
    "item": lambda t: t.x.sum().item(),
    "bool_of_any": lambda t: bool(t.mask.any()),
    "if_on_tensor": lambda t: 1 if t.mask.any() else 0,
    "int_of_argmax": lambda t: int(t.x.flatten().argmax()),
    "float_format": lambda t: f"{t.x.sum():.3f}" and None,
    "tolist": lambda t: t.mask.tolist(),
    "numpy": lambda t: t.x.numpy(),
    "nonzero": lambda t: t.mask.nonzero(),
    "max_with_indices": lambda t: t.x.max(dim=1),
    "repr": lambda t: repr(t.x) and None,
    # in-place shape changes and views
    "unsqueeze_inplace": lambda t: t.mask.clone().unsqueeze_(1).shape,
    "transpose_view_then_contiguous": lambda t: t.x.t().contiguous().view(-1),
    "view_of_transpose": lambda t: t.x.t().view(-1),
    "is_contiguous_after_transpose": lambda t: t.x.t().is_contiguous(),
    "expand_then_add_cpu": lambda t: t.x.expand(4, 2, 3) + t.cx,
    "dropout": lambda t: F.dropout(t.x, 0.5, training=True).shape,
    # device questions
    "is_cuda": lambda t: t.x.is_cuda,
    "device_type": lambda t: t.x.device.type,
    "device_string": lambda t: str(t.x.device),
    "get_device": lambda t: t.x.get_device(),
}


def make_tensors(to_device):
    """The namespace the snippets take; `to_device` puts a CPU tensor on the device."""
    rng = torch.Generator().manual_seed(0)
    cx = torch.randn(2, 3, generator=rng, dtype=torch.float64)
    cy = torch.randn(2, 3, generator=rng, dtype=torch.float64)
    cmask = torch.tensor([[False, True, True], [False, False, True]])
    cids = torch.tensor([1, 0])
    return SimpleNamespace(
        x=to_device(cx),
        y=to_device(cy),
        mask=to_device(cmask),
        ids=to_device(cids),
        cx=cx,
        cmask=cmask,
        cids=cids,
        cids2=torch.tensor([[2], [0]]),
        cscalar=torch.tensor(0.5, dtype=torch.float64),
    )


def is_device_mismatch(error):
    return "Expected all tensors to be on the same device" in str(error)


def describe(value):
    """A result in words that do not depend on the device's numbers: where tensors are, and plain values."""
    if isinstance(value, torch.Tensor):
        return f"tensor on {value.device.type}"
    if isinstance(value, (tuple, list)) and not isinstance(value, torch.Size):
        return [describe(item) for item in value]
    if isinstance(value, (bool, int, str, torch.Size, type(None))):
        return str(value)
    return type(value).__name__


def outcome(snippet, tensors, messages=None):
    """describe(result), or 'raises <type>' (with ' (device mismatch)' for PyTorch's own message);
    `messages`: a list that gets the error's first line."""
    try:
        return describe(snippet(tensors))
    except Exception as error:  # noqa: BLE001 - the outcome is what is asked
        if messages is not None:
            messages.append(str(error).strip().splitlines()[0][:200] if str(error).strip() else "")
        return f"raises {type(error).__name__}" + (" (device mismatch)" if is_device_mismatch(error) else "")


def outcomes(to_device, wrap=None, messages=None):
    """{snippet name: outcome}; `wrap`: a context each snippet runs in (the simulation);
    `messages`: a dict that gets {snippet name: the error's first line} where one raised."""
    found = {}
    for name, snippet in SNIPPETS.items():
        tensors = make_tensors(to_device)
        said = []
        if wrap is None:
            found[name] = outcome(snippet, tensors, said)
        else:
            with wrap():
                found[name] = outcome(snippet, tensors, said)
        if messages is not None and said:
            messages[name] = said[0]
    return found


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA device")
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(0)}))
    messages = {}
    print(json.dumps(outcomes(lambda value: value.to("cuda"), messages=messages), indent=1))
    print(json.dumps(messages, indent=1))
