"""Submissions that try to carry what hidden checks' inputs were into what a student reads.

Each is the reference with one of its functions wrapped: the wrapper remembers, in module
globals, every input it is given (shapes and sums, ids, lengths: what a student who reads the
checks would want to learn of the hidden ones), and says what it remembers back through one
channel: printing (stdout, stderr, warnings, at import), the values it returns (wrong values, a
NaN at a chosen index, rows that do not sum to 1, inputs written into, what it returned written
over later), the exceptions it raises
(their message, their type), the time it takes, the length of what it prints, the known mistake
it imitates, or another file's function that reads the memory (state across steps). Every
channel is deterministic given what was remembered (no hash(), no clock), so that two gradings
that differ only in the hidden checks' seed must show a student the same bytes.

`LEAKS`: {name: Leak}. `make(root, leak)` writes the submission. A leak that would change the
hidden checks' outcomes with the seed (the grade, the one thing a hidden check is for) is kept
out: each fails or passes them the same way whatever their inputs are.
"""

import shutil
from dataclasses import dataclass
from pathlib import Path

SOLUTIONS = Path(__file__).resolve().parent.parent / "solutions"

MEMORY = '''

import sys as _sys
import warnings as _warnings

import torch as _torch

_SEEN = []
_KEPT = []  # tensors it returned: the judge may still hold them


def _note(*values):
    """Remember what a call was given: shapes, sums, numbers, lengths."""
    for value in values:
        if isinstance(value, _torch.Tensor):
            _SEEN.append(tuple(value.shape))
            if value.numel() and not value.is_complex():
                _SEEN.append(round(float(value.double().sum()), 3))
        elif isinstance(value, (list, tuple)):
            _SEEN.append(len(value))
            _note(*value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            _SEEN.append(value)


def _code():
    """A number made of everything remembered (deterministic: no hash())."""
    return sum(map(ord, repr(_SEEN))) % 997
'''


@dataclass(frozen=True)
class Leak:
    file: str  # the reference file the wrapper is appended to
    function: str  # the function it wraps (a module-level def)
    body: str  # the wrapper's body: `_note(*args, *kwargs.values())` then `result = _inner(...)` already ran
    steps: tuple  # the steps to grade (where hidden checks feed it, then public code runs it)
    extra: dict = None  # {file: text appended}: another file that reads the memory


def wrapper(leak: Leak) -> str:
    return (
        MEMORY
        + f"\n\n_inner = {leak.function}\n\n\ndef {leak.function}(*args, **kwargs):\n"
        + "    _note(*args, *kwargs.values())\n"
        + "    result = _inner(*args, **kwargs)\n"
        + "".join(f"    {line}\n" if line else "\n" for line in leak.body.strip("\n").splitlines())
        + "    return result\n"
    )


ATTENTION = ("attention",)  # its hidden check, then its probes and smallest example

LEAKS = {
    # printing
    "prints_inputs": Leak("attention.py", "scaled_dot_product_attention", "print('seen', _SEEN[-6:])", ATTENTION),
    "prints_at_import_and_stderr": Leak(
        "attention.py",
        "scaled_dot_product_attention",
        "_sys.stderr.write(f'seen {_SEEN[-4:]}\\n')\n_sys.stdout.write('#' * _code() + '\\n')",
        ATTENTION,
        extra={"padding.py": "\nprint('imported padding')\n"},
    ),
    "warns": Leak("attention.py", "scaled_dot_product_attention", "_warnings.warn(f'seen {_code()}')", ATTENTION),
    # values
    "wrong_values": Leak(
        "attention.py",
        "scaled_dot_product_attention",
        "result = (result[0] + 1e-3 * (1 + _code()), result[1])",
        ATTENTION,
    ),
    "rows_not_normalised": Leak(  # the masking step's public checks run attention after its hidden one
        "attention.py",
        "scaled_dot_product_attention",
        "result = (result[0], result[1] * (1.5 + _code() / 1000))",
        ("attention", "masking"),
    ),
    "nan_at_chosen_index": Leak(
        "attention.py",
        "scaled_dot_product_attention",
        "out = result[0].clone()\nout.view(-1)[_code() % out.numel()] = float('nan')\nresult = (out, result[1])",
        ATTENTION,
    ),
    "writes_into_inputs": Leak(
        "attention.py",
        "scaled_dot_product_attention",
        "if args:\n    args[0].add_(1e-3 * (1 + _code()))\nresult = (result[0] + 1e-3, result[1])",
        ATTENTION,
    ),
    # exceptions
    "raises_with_memory": Leak(
        "attention.py", "scaled_dot_product_attention", "raise ValueError(f'seen {_SEEN[-6:]} {_code()}')", ATTENTION
    ),
    "exception_type_by_memory": Leak(
        "attention.py",
        "scaled_dot_product_attention",
        "raise (KeyError, IndexError, ArithmeticError, LookupError)[_code() % 4](_code())",
        ATTENTION,
    ),
    "status_by_memory": Leak(  # a TODO in every public check; in the hidden one, by its d_k
        "attention.py",
        "scaled_dot_product_attention",
        "if tuple(args[0].shape) in ((2, 3, 5, 8), (2, 5, 8), (2, 4, 3, 6)):  # the public checks'\n"
        "    raise NotImplementedError\n"
        "raise (ValueError if args[0].shape[-1] % 2 else NotImplementedError)(f'{_code()}')",
        ATTENTION,
    ),
    # time and size
    "time_by_memory": Leak(  # (and prints what it remembers: what shows the instructor it ran)
        "attention.py",
        "scaled_dot_product_attention",
        "for _ in range(200 * _code()):\n    pass\nprint(_code())",
        ATTENTION,
    ),
    # which known mistake the code imitates
    # what it returned earlier (the public phase's values, which the judge holds), written over
    # once hidden inputs reached it: in the grader's own process, the same tensors
    "changes_what_it_returned": Leak(
        "attention.py",
        "scaled_dot_product_attention",
        "for _kept in _KEPT:\n"
        "    _kept.fill_(_code())\n"
        "result = (result[0] + 1e-3, result[1] * 1.5)\n"
        "_KEPT.extend(result)",
        ATTENTION,
    ),
    "mistake_by_memory": Leak(
        "attention.py",
        "scaled_dot_product_attention",
        "q, k, v = args[:3]\n"
        "if _code() % 2:\n"
        "    weights = _torch.softmax(q @ k.transpose(-2, -1), dim=-1)\n"
        "else:\n"
        "    weights = _torch.softmax(q @ k.transpose(-2, -1) / q.size(-1), dim=-1)\n"
        "if len(args) < 4 and 'mask' not in kwargs:\n"
        "    result = (weights @ v, weights)",
        ATTENTION,
    ),
    # state across steps: padding remembers the batches it padded, split_heads (a later step) says it
    "state_across_steps": Leak(
        "padding.py",
        "pad_batch",
        "",
        ("padding", "split_heads"),
        extra={
            "heads.py": "\n\nfrom . import padding as _padding\n_split = split_heads\n\n\n"
            "def split_heads(x, num_heads):\n"
            "    out = _split(x, num_heads)\n"
            "    return out + 1e-3 * (1 + _padding._code())\n"
        },
    ),
}


def make(root: Path, name: str) -> Path:
    """The submission of leak `name` under `root`: a directory holding mha/."""
    leak = LEAKS[name]
    path = root / name
    shutil.copytree(SOLUTIONS / "mha", path / "mha")
    target = path / "mha" / leak.file
    target.write_text(target.read_text() + wrapper(leak))
    for file, text in (leak.extra or {}).items():
        extra = path / "mha" / file
        extra.write_text(extra.read_text() + text)
    return path
