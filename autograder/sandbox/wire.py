"""What crosses the socket between the judge and a worker: plain data in a typed, bounded form.

A message is a JSON header followed by one payload of raw bytes:

    [4 bytes: header length, big-endian][header: UTF-8 JSON][payload: tensor and bytes data, in order]

The header holds the value as a tree of JSON scalars (None, bool, int, float, str), lists and
tagged nodes: {"(": [...]} a tuple, {"{": [[key, value], ...]} a dict (string keys), {"T": [dtype,
shape]} a tensor and {"B": n} a bytes value, whose bytes come next in the payload, and {"U": [dtype,
shape, device]} a tensor that could not be sent (on a device the judge cannot read). Every byte of
the payload belongs to exactly one tensor or bytes node, in the order the header names them, so
nothing can be shared or repeated: the decoded size is the message's size. `loads` checks the
whole header (its size, depth, number of nodes, string lengths, dtypes and shapes) against the
payload's length before it makes a single tensor; no code runs while decoding (no pickle).

    data = dumps({"out": torch.ones(2, 3)})       # either side
    value = loads(data)                            # WireError for anything malformed
"""

import json
import struct

import torch

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
HEADER_LIMIT = 256 * 1024  # bytes of JSON header
MAX_MESSAGE = 64 * 1024 * 1024  # bytes in all; a reader may ask for less (see loads and worker.read_message)
MAX_NODES = 20_000  # nodes in one header (an observation has hundreds)
MAX_DEPTH = 24  # nesting of lists, tuples and dicts
MAX_DIMS = 8  # dimensions of one tensor
MAX_TEXT = 4_000  # characters of one string
SENT_TEXT = 1_000  # characters of a string this side sends (longer ones are cut here)
ALIGN = 8  # the payload starts at a multiple of this in a message dumps makes (no dtype needs more)


class WireError(Exception):
    """A message is malformed or too large."""


class TooLarge(WireError):
    """A message over the reader's limit (refused before it is read)."""

    def __init__(self, size: int, limit: int):
        super().__init__(f"a message of {size} bytes, over the limit of {limit}")
        self.size, self.limit = size, limit


# ---------------------------------------------------------------------------- encoding


def dumps(value) -> bytes:
    """The message for `value` (tensors, numbers, strings, bytes, None and lists, tuples and dicts
    of them, and Encoded parts; any other object travels as a short repr). The header is padded
    with spaces to a multiple of 8 bytes, so that the payload, and every tensor after tensors
    whose sizes are multiples of 8 bytes, starts aligned for loads to take in place."""
    chunks = []
    header = json.dumps(_encode(value, chunks), separators=(",", ":"), allow_nan=True).encode()
    header += b" " * (-(4 + len(header)) % ALIGN)
    return struct.pack("!I", len(header)) + header + b"".join(chunks)


class Encoded:
    """A value encoded once, to be sent many times as part of other values (a batch sends the
    same inputs to every worker): dumps splices it in."""

    __slots__ = ("tree", "chunks", "size")

    def __init__(self, value):
        self.chunks = []
        self.tree = _encode(value, self.chunks)
        self.size = sum(len(chunk) for chunk in self.chunks) + len(json.dumps(self.tree))  # about its bytes on the wire


def _encode(value, chunks):
    if isinstance(value, Encoded):
        chunks.extend(value.chunks)
        return value.tree
    if isinstance(value, torch.Tensor):
        tensor = value.detach()
        dtype = str(tensor.dtype).removeprefix("torch.")
        if tensor.device.type != "cpu" or tensor.is_meta or dtype not in DTYPES or type(tensor) is not torch.Tensor:
            try:
                shape = [int(n) for n in tensor.shape]
            except (TypeError, RuntimeError):  # symbolic sizes
                shape = []
            return {"U": [dtype, shape, str(tensor.device)]}
        tensor = tensor.contiguous()
        raw = tensor.view(torch.int16) if tensor.dtype == torch.bfloat16 else tensor
        chunks.append(raw.numpy().tobytes() if tensor.numel() else b"")
        return {"T": [dtype, list(tensor.shape)]}
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)[:SENT_TEXT]
    if isinstance(value, (bytes, bytearray)):
        chunks.append(bytes(value))
        return {"B": len(value)}
    if isinstance(value, dict):
        return {"{": [[str(k)[:SENT_TEXT], _encode(v, chunks)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"(": [_encode(v, chunks) for v in value]}
    if isinstance(value, list):
        return [_encode(v, chunks) for v in value]
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a student's object whose repr raises
        text = f"<{type(value).__name__}>"
    return text[:200]


# ---------------------------------------------------------------------------- decoding


def loads(data, limit: int = MAX_MESSAGE):
    """The value of message `data`; WireError if it is malformed or larger than `limit` bytes.

    Given a bytearray (what worker.read_message reads into), the tensors are made in place: each
    is a view of its own bytes of `data`, which they keep alive, and nothing is copied (a tensor
    whose bytes are not aligned for its dtype is copied alone). `data` is then theirs: the caller
    must not change it. Bytes (read-only) are copied once, whole, not once per tensor."""
    if len(data) > min(limit, MAX_MESSAGE):
        raise TooLarge(len(data), min(limit, MAX_MESSAGE))
    if len(data) < 4:
        raise WireError("message without a header")
    (size,) = struct.unpack_from("!I", data)
    if size > HEADER_LIMIT or 4 + size > len(data):
        raise WireError("header too large or cut short")
    try:
        tree = json.loads(bytes(memoryview(data)[4 : 4 + size]).decode("utf-8"))
    except (ValueError, RecursionError, UnicodeDecodeError) as error:
        raise WireError(f"malformed header ({type(error).__name__})") from None
    plan = _Plan()
    plan.check(tree, 0)
    if plan.payload_bytes != len(data) - 4 - size:
        raise WireError(
            f"the header describes {plan.payload_bytes} payload bytes, the message has {len(data) - 4 - size}"
        )
    if plan.payload_bytes and not isinstance(data, bytearray):
        data = bytearray(data)  # tensors are writable: they need memory of their own
    return _Decoder(data, 4 + size).build(tree)


class _Plan:
    """Walks a header once, without building anything: counts nodes, checks depth, strings,
    dtypes and shapes, and adds up the payload bytes the tensor and bytes nodes take."""

    def __init__(self):
        self.nodes = 0
        self.payload_bytes = 0

    def check(self, node, depth):
        stack = [(node, depth)]
        while stack:
            node, depth = stack.pop()
            self.nodes += 1
            if self.nodes > MAX_NODES:
                raise WireError("too many values in one message")
            if depth > MAX_DEPTH:
                raise WireError("values nested too deep")
            if node is None or isinstance(node, (bool, int, float)):
                continue
            if isinstance(node, str):
                if len(node) > MAX_TEXT:
                    raise WireError("a string too long")
                continue
            if isinstance(node, list):
                stack.extend((child, depth + 1) for child in node)
                continue
            if not isinstance(node, dict) or len(node) != 1:
                raise WireError("an unknown node")
            ((tag, body),) = node.items()
            if tag == "T":
                self.payload_bytes += _tensor_bytes(body)
            elif tag == "B":
                if not isinstance(body, int) or isinstance(body, bool) or body < 0:
                    raise WireError("a malformed bytes node")
                self.payload_bytes += body
            elif tag == "U":
                if not (isinstance(body, list) and len(body) == 3 and all(isinstance(p, (str, list)) for p in body)):
                    raise WireError("a malformed unavailable tensor")
                _shape(body[1])
                if len(body[0]) > 40 or len(body[2]) > 40:
                    raise WireError("a malformed unavailable tensor")
            elif tag == "(":
                if not isinstance(body, list):
                    raise WireError("a malformed tuple")
                stack.extend((child, depth + 1) for child in body)
            elif tag == "{":
                if not isinstance(body, list):
                    raise WireError("a malformed dict")
                for pair in body:
                    if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                        raise WireError("a malformed dict entry")
                    if len(pair[0]) > MAX_TEXT:
                        raise WireError("a key too long")
                    stack.append((pair[1], depth + 1))
            else:
                raise WireError("an unknown node")


def _shape(shape):
    if not isinstance(shape, list) or len(shape) > MAX_DIMS:
        raise WireError("a malformed shape")
    count = 1
    for n in shape:
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise WireError("a malformed shape")
        count *= n
        if count > MAX_MESSAGE:
            raise WireError("a tensor too large")
    return count


def _tensor_bytes(body):
    if not (isinstance(body, list) and len(body) == 2 and body[0] in DTYPES):
        raise WireError("a malformed tensor")
    return _shape(body[1]) * _itemsize(body[0])


_ITEMSIZE = {}


def _itemsize(dtype: str) -> int:
    if dtype not in _ITEMSIZE:
        _ITEMSIZE[dtype] = torch.empty((), dtype=DTYPES[dtype]).element_size()
    return _ITEMSIZE[dtype]


class _Decoder:
    """Builds the value of a header _Plan has checked, taking the payload's bytes (those of
    `data` from `start` on) in order."""

    def __init__(self, data, start):
        self.view = memoryview(data)
        self.position = start
        # Where the buffer itself starts, modulo 8 (a bytearray's memory is aligned; a view of
        # one need not be): tensors whose bytes are aligned for their dtype are taken in place.
        self.skew = torch.frombuffer(data, dtype=torch.uint8, count=1).data_ptr() % ALIGN if start < len(data) else 0

    def take(self, count):
        chunk = self.view[self.position : self.position + count]
        self.position += count
        return chunk

    def build(self, node):
        # Recursion is bounded: _Plan has checked the depth.
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.build(child) for child in node]
        ((tag, body),) = node.items()
        if tag == "T":
            return self.tensor(body[0], tuple(body[1]))
        if tag == "B":
            return bytes(self.take(body))
        if tag == "U":
            return Unavailable(body[0], tuple(body[1]), body[2])
        if tag == "(":
            return tuple(self.build(child) for child in body)
        return {key: self.build(value) for key, value in body}

    def tensor(self, dtype, shape):
        torch_dtype = DTYPES[dtype]
        count = 1
        for n in shape:
            count *= n
        size = _itemsize(dtype)
        aligned = (self.skew + self.position) % size == 0
        raw = self.take(count * size)
        if count == 0:
            return torch.empty(shape, dtype=torch_dtype)
        storage = torch.int16 if torch_dtype == torch.bfloat16 else torch_dtype
        # In place: a tensor over the message's own bytes (its storage is those bytes alone),
        # which it keeps alive; where they are not aligned for its dtype, over a copy of them.
        tensor = torch.frombuffer(raw if aligned else bytearray(raw), dtype=storage).reshape(shape)
        return tensor.view(torch.bfloat16) if torch_dtype == torch.bfloat16 else tensor


class Unavailable(tuple):
    """A tensor the sender could not send (it lives on a device the judge cannot read):
    (dtype, shape, device)."""

    __slots__ = ()

    def __new__(cls, dtype, shape, device):
        return super().__new__(cls, (dtype, shape, device))

    @property
    def device(self):
        return self[2]
