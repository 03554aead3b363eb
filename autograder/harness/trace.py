"""Record what student code computes: every torch call's result, in order, with the line that made
it, and, where the code raises, the call that raised and the shapes that met there.

    with tracing(student) as trace:
        out = module(x)
    trace.report()  # {"values": [tensor, ...], "ops": [...], "at": [[file, line] | None, ...],
                    #  "from": [[positions of the recorded values it was computed from], ...], "raised": None}

A localisation probe's observer runs the student's code on small public inputs inside `tracing`
and returns the report; the judge compares the recorded values with the reference's values stage
by stage (engine/mistakes/localise.py). The recorder only copies what it sees: student code gets
every result unchanged, and a result the recorder cannot copy is left out of the trace.

Bounded: at most MAX_RECORDS results and MAX_NUMBERS numbers in all (the trace travels to the
judge within a check's byte budget); what comes after is not kept, and the report says so.
"""

import sys
from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode, resolve_name

from autograder.harness.contract import ContractError

MAX_RECORDS = 400
MAX_NUMBERS = 24_000  # float64: under 200 KiB
MAX_TENSOR = 4_096  # numbers of one result (the probes' tensors are a few hundred)
# Calls that change their first argument in place and return nothing useful (or it).
IN_PLACE = {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ior__", "__iand__"}


def _name(func) -> str:
    try:
        name = resolve_name(func)
    except Exception:  # noqa: BLE001 - an unusual callable
        name = None
    name = name or getattr(func, "__name__", None) or type(func).__name__
    return str(name).removeprefix("torch.")[:60]


def _shapes(args, kwargs) -> list:
    """The shapes of the tensor arguments of a call, in order (keyword arguments after)."""
    return [shape for shape, _ in _tensors(args, kwargs)]


def _dtypes(args, kwargs) -> list:
    """The dtypes of the tensor arguments of a call, as _shapes orders them ("bool", "float64")."""
    return [dtype for _, dtype in _tensors(args, kwargs)]


def _arguments(args, kwargs) -> list:
    """The tensors among a call's arguments (one level into lists and tuples)."""
    found = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (tuple, list)):
            found += [item for item in value[:16] if isinstance(item, torch.Tensor)]
    return found


def _tensors(args, kwargs) -> list:
    found = []

    def visit(value, depth=0):
        if isinstance(value, torch.Tensor):
            found.append(([int(n) for n in value.shape], str(value.dtype).removeprefix("torch.")))
        elif isinstance(value, (tuple, list)) and depth < 2:
            for item in value[:8]:
                visit(item, depth + 1)

    for value in (*args, *kwargs.values()):
        visit(value)
    return found[:6]


class Known:
    """The tensors a run of several blocks has been given or has made: where the code's call
    that raised got a tensor that is neither, it kept it from before (a class attribute that
    outlives the object). Kept alive, so that no other tensor takes one of their ids."""

    def __init__(self, *given):
        self.ids, self.alive = set(), []
        self.add(*given)

    def add(self, *tensors):
        for tensor in tensors:
            if isinstance(tensor, torch.Tensor) and id(tensor) not in self.ids:
                self.ids.add(id(tensor))
                self.alive.append(tensor)


class _Recorder(TorchFunctionMode):
    def __init__(self, directory, known=None):
        super().__init__()
        self.directory, self.known = directory, known
        self.values, self.ops, self.at, self.inputs = [], [], [], []
        self.numbers, self.full, self.failed, self.failed_error = 0, False, None, None
        self.seen = {}  # a tensor's key -> the position of its record
        self.position = {}  # id(tensor) -> the position of the record of its values
        self.alive = []  # the recorded tensors themselves: no later result reuses their memory, id or key

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            output = func(*args, **kwargs)
        except Exception as error:
            self.failed = {
                "op": _name(func),
                "shapes": _shapes(args, kwargs),
                "dtypes": _dtypes(args, kwargs),
                "at": self.place(),
                # the recorded values it was given: the stage it was computing is one made from them
                "inputs": sorted({self.position[id(t)] for t in _arguments(args, kwargs) if id(t) in self.position})[
                    :8
                ],
            }
            if self.known is not None:
                outside = [t for t in _arguments(args, kwargs) if id(t) not in self.known.ids]
                self.failed["outside"] = [[int(n) for n in t.shape] for t in outside[:4]]
            self.failed_error = error
            raise
        if self.known is not None:
            self.known.add(*(output if isinstance(output, (tuple, list)) else (output,)))
        try:
            name = _name(func)
            short = name.rsplit(".", 1)[-1]
            sources = [self.position[id(t)] for t in _arguments(args, kwargs) if id(t) in self.position]
            if short in IN_PLACE or (short.endswith("_") and not short.endswith("__")):
                target = args[0] if args else None
                self.keep(target, name, sources)
            if isinstance(output, torch.Tensor):
                self.keep(output, name, sources)
            elif isinstance(output, (tuple, list)) and len(output) <= 16:
                for item in output:
                    if isinstance(item, torch.Tensor):
                        self.keep(item, name, sources)
        except Exception:  # noqa: BLE001 - a result the recorder cannot copy is left out
            pass
        return output

    def keep(self, tensor, name, sources=()):
        if not isinstance(tensor, torch.Tensor) or self.full:
            return
        if tensor.is_complex() or tensor.device.type == "meta" or tensor.numel() > MAX_TENSOR:
            return
        if not (tensor.is_floating_point() or tensor.dtype in (torch.bool, torch.int64, torch.int32)):
            return
        try:
            key = (
                tensor.untyped_storage().data_ptr(),
                tensor.storage_offset(),
                tuple(tensor.shape),
                tuple(tensor.stride()),
                tensor._version,
                tensor.dtype,
            )
        except Exception:  # noqa: BLE001 - a tensor without storage (a subclass, a fake)
            return
        if key in self.seen and name != "returned":  # the same view of the same values (x.contiguous() of x)
            self.position[id(tensor)] = self.seen[key]
            self.alive.append(tensor)
            return
        size = tensor.numel() if tensor.dtype != torch.bool else (tensor.numel() + 7) // 8
        if len(self.values) >= MAX_RECORDS or self.numbers + size > MAX_NUMBERS:
            self.full = True
            return
        copy = tensor.detach().to("cpu", copy=True)
        if type(copy) is not torch.Tensor:  # a subclass: its plain values only
            copy = torch.Tensor._make_subclass(torch.Tensor, copy)
        self.seen[key] = self.position[id(tensor)] = len(self.values)
        self.alive.append(tensor)
        self.numbers += size
        self.values.append(copy)
        self.ops.append(name)
        self.at.append(self.place())
        self.inputs.append(sorted(set(sources))[:8])

    def place(self):
        """[file relative to the package folder, line] of the innermost frame in the student's
        files, or None."""
        if not self.directory:
            return None
        prefix = self.directory + "/"
        frame = sys._getframe(1)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(prefix):
                return [filename[len(prefix) :], frame.f_lineno]
            frame = frame.f_back
        return None


class Trace:
    """What one `tracing` block recorded."""

    def __init__(self, recorder):
        self._recorder = recorder
        self.raised = None

    def report(self, returned=()) -> dict:
        """What was recorded; `returned`: values the block gave back, recorded last (a cache's
        first update may return the chunk it was given: no call of the block made it)."""
        r = self._recorder
        for value in returned:
            if isinstance(value, torch.Tensor):
                r.keep(value, "returned")
        return {"values": r.values, "ops": r.ops, "at": r.at, "from": r.inputs, "full": r.full, "raised": self.raised}


@contextmanager
def tracing(student, catch=True, known=None):
    """Record every torch call's result inside the block (see the module docstring). With `catch`,
    an exception of the student's code ends the block quietly and is described in the report's
    "raised": {"type", "message", "op", "shapes", "at"} (the call that raised and the shapes of its
    tensors, where the recorder saw it). With `known` (a Known: what the run was given and made so
    far), the call that raised also says which of its tensors came from neither ("outside").
    NotImplementedError (a TODO), a ContractError and BaseExceptions (a time limit) propagate."""
    directory = str(getattr(student, "_directory", "") or "")
    recorder = _Recorder(directory, known)
    trace = Trace(recorder)
    try:
        with recorder:
            yield trace
    except (NotImplementedError, ContractError):  # a TODO, or the contract's own report
        raise
    except Exception as error:
        if not catch:
            raise
        text = str(error).strip().splitlines()
        trace.raised = {
            "type": type(error).__name__[:60],
            "message": (text[0] if text else "")[:300],
            **(
                recorder.failed
                if recorder.failed_error is error
                else {"op": None, "shapes": [], "at": _where(error, directory)}
            ),
        }


def _where(error, directory):
    found, tb = None, error.__traceback__
    while tb is not None and directory:
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith(directory + "/"):
            found = [filename[len(directory) + 1 :], tb.tb_lineno]
        tb = tb.tb_next
    return found


def traced_calls(student, calls, known=None) -> dict:
    """{"calls": [per call: what the recorder saw, ending with the tensors it returned],
    "outputs": [per call: its first tensor returned]}: each of `calls` (functions of no
    argument that run the student's code) in a block of its own, in order; after one that
    raises, none. The shape of a localisation probe's report (engine/mistakes/localise.py)."""
    reports, outputs = [], []
    for call in calls:
        result = None
        with tracing(student, known=known) as trace:
            result = call()
        returned = [
            r for r in (result if isinstance(result, (tuple, list)) else (result,)) if isinstance(r, torch.Tensor)
        ]
        reports.append(trace.report(returned if trace.raised is None else ()))
        if trace.raised is not None:
            break
        if returned:
            outputs.append(returned[0].detach())
    return {"calls": reports, "outputs": outputs}
