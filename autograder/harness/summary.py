"""Tensors in student-facing text, summarised: their shape, dtype and a few values, never the
kilobytes of a full repr (a message, an exception from student code, a traceback line).

    tensor([[0.1000, 0.2000, ...]])  ->  tensor(shape=(2, 4, 8), dtype=torch.float32, values 0.1000, 0.2000, ...)

A summary holds parentheses (its shape), which no torch repr does, so summarising a text twice
gives what summarising it once gives: the pytest route summarises an exception's text and the
grader's `raised()` may summarise it again.
"""

import re

SHOWN_VALUES = 4
LONG_REPR = 80  # characters: a tensor repr longer than this is summarised
SUMMARY_START = "tensor(shape="

TENSOR_REPR = re.compile(r"tensor\([^()]*\)", re.S)  # torch's repr holds no parentheses inside
NUMBER = re.compile(r"[-+]?(?:nan|inf|\d+\.?\d*(?:e[-+]?\d+)?)|True|False", re.I)
OPTION = re.compile(r",\s*(dtype|device|requires_grad|grad_fn|size)=[^,)]*")
ELIDED = "..."


def repr_shape(data: str) -> str:
    """The shape of a tensor from the nested lists of its repr: '(2, 4, 8)'. Where torch left
    items out ('...', a size above 6), the size reads '7+': more than the items shown."""
    depth, sizes, open_first, elided = 0, [], [], []
    position = 0
    while position < len(data):
        char = data[position]
        if char == "[":
            depth += 1
            if depth > len(sizes):  # the first list at this depth: its items give the size
                sizes.append(1)
                open_first.append(True)
                elided.append(False)
        elif char == "]":
            if depth and open_first[depth - 1]:
                open_first[depth - 1] = False
            depth -= 1
        elif char == "," and depth and open_first[depth - 1]:
            sizes[depth - 1] += 1
        elif data.startswith(ELIDED, position) and depth and open_first[depth - 1]:
            elided[depth - 1] = True
            position += len(ELIDED)
            continue
        position += 1
    # torch elides the middle of a long axis: its items shown, plus '...' as one more, give at least the size
    shown = [f"{size}+" if cut else str(size) for size, cut in zip(sizes, elided, strict=True)]
    if not shown:
        return "()"
    return "(" + ", ".join(shown) + ("," if len(shown) == 1 else "") + ")"


def repr_dtype(options: dict, numbers: list) -> str:
    """The dtype the repr names, or the one torch leaves out of it (the defaults: bool, int64,
    float32)."""
    named = re.sub(r"^,\s*dtype=", "", options.get("dtype", ""))
    if named:
        return named
    if any(n in ("True", "False") for n in numbers):
        return "torch.bool"
    if any(re.search(r"[.e]|nan|inf", n, re.I) for n in numbers):
        return "torch.float32"
    return "torch.int64"


def summarise_text(text: str, shown: int = SHOWN_VALUES) -> str:
    """`text` with every long tensor repr in it replaced by its shape, dtype and first few
    values. Idempotent: an existing summary is left as it is."""

    def short(match):
        body = match.group(0)
        if len(body) <= LONG_REPR or body.startswith(SUMMARY_START):
            return body
        options = {m.group(1): m.group(0) for m in OPTION.finditer(body)}
        data = OPTION.sub("", body)[len("tensor(") : -1]
        numbers = NUMBER.findall(data)
        first = NUMBER.findall(data.split(ELIDED)[0])[:shown]  # the leading values, none from past a '...'
        more = ", ..." if len(numbers) > len(first) else ""
        device = re.sub(r"^,\s*", ", ", options.get("device", ""))
        return (
            f"{SUMMARY_START}{repr_shape(data)}, dtype={repr_dtype(options, numbers)}{device}, "
            f"values {', '.join(first)}{more})"
        )

    return TENSOR_REPR.sub(short, text)
