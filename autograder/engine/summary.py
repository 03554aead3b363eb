"""Tensors in student-facing text, summarised: their dimensions, dtype and a few values, never
the kilobytes of a full repr (a message, an exception from student code, a traceback line)."""
import re

SHOWN_VALUES = 4
LONG_REPR = 80  # characters: a tensor repr longer than this is summarised

TENSOR_REPR = re.compile(r"tensor\([^()]*\)", re.S)  # torch's repr holds no parentheses inside
NUMBER = re.compile(r"[-+]?(?:nan|inf|\d+\.?\d*(?:e[-+]?\d+)?)", re.I)
OPTION = re.compile(r",\s*(dtype|device|requires_grad|grad_fn)=[^,)]*")


def summarise_text(text: str, shown: int = SHOWN_VALUES) -> str:
    """`text` with every long tensor repr in it replaced by its size and first few values."""
    def short(match):
        body = match.group(0)
        if len(body) <= LONG_REPR:
            return body
        options = {m.group(1): m.group(0) for m in OPTION.finditer(body)}
        data = OPTION.sub("", body)[len("tensor("):-1]
        numbers = NUMBER.findall(data)
        more = ", ..." if len(numbers) > shown or "..." in data else ""
        ndim = re.match(r"[\[\s]*", data).group(0).count("[")  # the opening brackets: one per dimension
        dtype = re.sub(r"^,\s*", "", options.get("dtype", ""))
        return (f"tensor(<{ndim}-d, values {', '.join(numbers[:shown])}{more}>"
                f"{', ' + dtype if dtype else ''})")
    return TENSOR_REPR.sub(short, text)
