"""What crosses the pipe between a worker (runs student code) and the judge: plain data only.

Tensors travel as ("__tensor__", dtype name, shape, raw bytes); everything else must be None,
bool, int, float, str, bytes, or a list, tuple or dict of those. The judge decodes with an
unpickler that refuses every global, so a hostile worker can send wrong data but can never make
the judge run code, and the decoded tensors are checked against their declared dtype and shape.
"""

import io
import pickle

import torch

TENSOR = "__tensor__"
DTYPES = {
    name: getattr(torch, name)
    for name in (
        "float64",
        "float32",
        "float16",
        "bfloat16",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
        "complex64",
        "complex128",
    )
}
MAX_MESSAGE = 64 * 1024 * 1024  # bytes; a bigger message is refused
MAX_VALUES = 1_000_000  # values in one decoded message (an observation has hundreds)


class WireError(Exception):
    """A message from a worker is malformed or too large."""


def encode(value):
    """Plain-data form of `value` (tensors become tagged tuples); other objects become their repr."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach()
        if tensor.device.type != "cpu" or tensor.is_meta:
            return (TENSOR + "_unavailable", str(tensor.dtype), tuple(tensor.shape), str(tensor.device))
        tensor = tensor.contiguous()
        dtype = str(tensor.dtype).removeprefix("torch.")
        raw = tensor.view(torch.int16) if tensor.dtype == torch.bfloat16 else tensor
        return (TENSOR, dtype, tuple(tensor.shape), raw.numpy().tobytes() if tensor.numel() else b"")
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (
            type(value)(encode(v) for v in value) if type(value) in (list, tuple) else tuple(encode(v) for v in value)
        )
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    return repr(value)[:200]


def decode(value, budget=None):
    """The inverse of encode, validating every tensor. At most MAX_VALUES values are decoded:
    a pickle can share one list many times over, and a few bytes would expand beyond memory."""
    budget = budget or [MAX_VALUES]
    budget[0] -= 1
    if budget[0] < 0:
        raise WireError("message too large once decoded")
    if isinstance(value, tuple) and len(value) == 4 and value[0] == TENSOR:
        _, dtype, shape, raw = value
        if dtype not in DTYPES or not isinstance(raw, bytes) or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise WireError("malformed tensor")
        torch_dtype = DTYPES[dtype]
        count = 1
        for n in shape:
            count *= n
        itemsize = torch.empty((), dtype=torch_dtype).element_size()
        if len(raw) != count * itemsize:
            raise WireError("tensor size does not match its shape")
        if count == 0:
            return torch.empty(tuple(shape), dtype=torch_dtype)
        storage_dtype = torch.int16 if torch_dtype == torch.bfloat16 else torch_dtype
        tensor = torch.frombuffer(bytearray(raw), dtype=storage_dtype).reshape(tuple(shape))
        return tensor.view(torch.bfloat16) if torch_dtype == torch.bfloat16 else tensor
    if isinstance(value, dict):
        return {k: decode(v, budget) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v, budget) for v in value]
    if isinstance(value, tuple):
        return tuple(decode(v, budget) for v in value)
    return value


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise WireError(f"refused a global in a worker message: {module}.{name}")


def dumps(value):
    return pickle.dumps(encode(value), protocol=5)


def dumps_encoded(value):
    """dumps() of a value whose tensors are already encode()d."""
    return pickle.dumps(value, protocol=5)


def loads(data):
    if len(data) > MAX_MESSAGE:
        raise WireError("message too large")
    try:
        return decode(_PlainUnpickler(io.BytesIO(data)).load())
    except WireError:
        raise
    except Exception as error:  # noqa: BLE001 - any malformed pickle
        raise WireError(f"malformed message: {type(error).__name__}") from None
