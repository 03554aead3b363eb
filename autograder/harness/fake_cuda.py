"""A simulated CUDA device for machines without one: tensors on a `cuda:0` that compute on the CPU.

A CPU-only PyTorch can put a tensor on "cuda" only if a CUDA device guard is registered. A few
lines of C++ register c10's FakeGuardImpl for CUDA; they are compiled once per machine and torch
version (about 2 s with only c10's headers) into a cache directory and loaded with ctypes, with
the C++ standard torch's headers need (cxx_standard: C++20 from torch 2.14).

With the guard, a tensor on the simulated device is a SimulatedCudaTensor: a tensor subclass whose
device is cuda:0 and whose values are a CPU tensor inside it. Every op on it checks devices the way
CUDA kernels do (a CPU tensor with dimensions meeting a cuda one raises PyTorch's own "Expected all
tensors to be on the same device"; a 0-dim CPU tensor is allowed, as on a GPU), computes on the CPU
values and wraps what comes out. While a Simulation is entered, a dispatch mode also puts what is
created or copied "on cuda" (torch.ones(..., device=x.device), x.to("cuda"), x.cuda(),
torch.tensor(..., device=...)) there, and `.cpu()` gives a plain CPU tensor. So `.item()`, `if
mask.any():` and `.tolist()` work, and the values can be compared with a CPU run of the same code.

Backward does not run on the simulated device: the autograd engine asks for the machine's
accelerator as soon as a graph holds a CUDA tensor, and a CPU-only build has none (faking one would
make every computation in the process believe a CUDA runtime is present). A real GPU checks
gradients.

Without a C++ compiler, or when the build fails (`python -m autograder.harness.fake_cuda` prints
why), the simulation falls back to fake tensors on the `meta` device, which have no values: it
catches CPU-created masks and attributes, misses a few ops (e.g. F.embedding with a CPU index),
and stops at an op that needs values (is_data_dependent).

    with Simulation() as sim:
        module = sim.module(student_module)   # module.to("cuda"): parameters and buffers move
        out = module(sim.tensor(x))           # out.device == torch.device("cuda:0")
        sim.cpu_values(out)                   # its values, a plain CPU tensor

One module, though long: the guard, the tensor subclass and the dispatch mode make one device
together and are meaningless apart; the simulation is loaded as one unit by the worker server.
"""

import ctypes
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

from autograder import cache_base

GUARD_SOURCE = r"""
// Registers c10's fake device guard for CUDA in a CPU-only PyTorch (see autograder/harness/fake_cuda.py).
#include <c10/core/impl/FakeGuardImpl.h>
namespace {
struct RegisterFakeCudaGuard {
  RegisterFakeCudaGuard() {
    static c10::impl::FakeGuardImpl<c10::DeviceType::CUDA> impl;
    auto& slot = c10::impl::device_guard_impl_registry[static_cast<size_t>(c10::DeviceType::CUDA)];
    if (slot.load() == nullptr) slot.store(&impl);
  }
} register_fake_cuda_guard;
}
extern "C" int mha_lab_fake_cuda_guard() { return 1; }
"""

_state = {}  # "device" -> "cuda" | "meta", ("simulation", device) -> the shared Simulation; once per process
# A batch's judge threads may ask at once; separate locks, so that asking for the device never
# waits for a simulation being set up (seconds).
_device_lock, _simulation_lock, _setup_lock = threading.Lock(), threading.Lock(), threading.Lock()


def cache_dir():
    return cache_base() / f"torch-{torch.__version__}"


def compiler():
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def cxx_standard(version=None):
    """The C++ standard torch's headers need: C++20 from torch 2.14 on (its c10 headers use
    C++20 features), C++17 before. `version`: a torch version string (default: this torch's)."""
    numbers = []
    for part in (version or torch.__version__).split("+")[0].split(".")[:2]:
        digits = "".join(c for c in part if c.isdigit())
        numbers.append(int(digits) if digits else 0)
    return "c++20" if tuple(numbers) >= (2, 14) else "c++17"


def build_error():
    """Why the guard library could not be built in this process (None: it was not tried or it
    built): no compiler, or the compiler's own message."""
    return _state.get("build_error")


def build_guard(target):
    """Compile the guard library into `target` (atomically); False if that is not possible, with
    the reason in build_error()."""
    cxx = compiler()
    if cxx is None:
        _state["build_error"] = "no C++ compiler found (c++, g++, clang++ or $CXX)"
        return False
    torch_dir = Path(torch.__file__).parent
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        source = Path(tmp) / "fake_cuda_guard.cpp"
        source.write_text(GUARD_SOURCE)
        built = Path(tmp) / target.name
        command = [
            cxx,
            "-O1",
            "-shared",
            "-fPIC",
            f"-std={cxx_standard()}",
            f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
            f"-I{torch_dir / 'include'}",
            str(source),
            f"-L{torch_dir / 'lib'}",
            "-lc10",
            f"-Wl,-rpath,{torch_dir / 'lib'}",
            "-o",
            str(built),
        ]
        try:
            subprocess.run(command, check=True, capture_output=True, timeout=300)
        except subprocess.CalledProcessError as error:
            detail = (error.stderr or b"").decode("utf-8", "replace").strip().splitlines()
            _state["build_error"] = f"{' '.join(command)} failed:\n" + "\n".join(detail[-20:])
            return False
        except (OSError, subprocess.SubprocessError) as error:
            _state["build_error"] = f"{cxx} could not run: {error}"
            return False
        os.replace(built, target)  # atomic: a concurrent build never sees half a file
    return True


def simulated_device():
    """'cuda' if the fake CUDA guard is (or can be) loaded, else 'meta'. Decided once per process."""
    with _device_lock:
        if "device" not in _state:
            _state["device"] = _find_device()
    return _state["device"]


def _find_device():
    if os.environ.get("MHA_LAB_FAKE_CUDA", "cuda") == "meta":
        return "meta"
    # The autograd engine starts a thread per device of every registered device type on its
    # first backward (once per process, inherited by forks). Start it now, while no CUDA guard
    # exists: a thread for the fake device would abort or hang the process.
    torch.ones(1, requires_grad=True).sum().backward()
    # A read-only cache (the sandboxed worker server sees the judge's that way) without the
    # library: build it in the temporary directory instead.
    for directory in (cache_dir(), Path(tempfile.gettempdir()) / "mha-lab" / cache_dir().name):
        library = directory / "fake_cuda_guard.so"
        try:
            if library.exists() or build_guard(library):
                ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
                return "cuda"
        except OSError:
            continue
    return "meta"


CUDA = torch.device("cuda", 0)
CPU = torch.device("cpu")
MISMATCH = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"


class SimulatedCudaTensor(torch.Tensor):
    """A tensor on the simulated cuda:0; its values are the CPU tensor `_cpu_values`, where every op
    on it computes (_dispatch)."""

    _cpu_values: torch.Tensor

    @staticmethod
    def __new__(cls, values):
        tensor = torch.Tensor._make_wrapper_subclass(
            cls,
            values.size(),
            strides=values.stride(),
            storage_offset=values.storage_offset(),
            dtype=values.dtype,
            layout=values.layout,
            device=CUDA,
            requires_grad=False,
        )
        tensor._cpu_values = values
        return tensor

    # Python-level torch functions go straight to dispatch (where devices are checked), fast.
    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _dispatch(func, args, kwargs or {})

    # A traceable wrapper: Module.to() swaps a parameter's contents with its moved copy in place,
    # as .to() on a GPU keeps the same Parameter object (tied weights stay tied).
    def __tensor_flatten__(self):
        return ["_cpu_values"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        return SimulatedCudaTensor(inner["_cpu_values"])

    def tolist(self):
        return self.cpu().tolist()

    def __format__(self, spec):  # Tensor's own formats only plain tensors' scalars
        if self.dim() == 0:
            return self.detach().item().__format__(spec)
        return object.__format__(self, spec)

    def numpy(self, *, force=False):
        raise TypeError(
            f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
            "memory first."
        )


def _write_aliases(func):
    """For an op that writes into some of its arguments (add_, out=): [(position, name)] of the
    arguments it returns, in order, and whether it changes its argument's shape (unsqueeze_)."""
    found = _ALIASES.get(func)
    if found is None:
        schema = func._schema
        written = {}
        for position, argument in enumerate(schema.arguments):
            info = argument.alias_info
            if info is not None and info.is_write:
                written[frozenset(info.before_set)] = (None if argument.kwarg_only else position, argument.name)
        returned = []
        for result in schema.returns:
            info = result.alias_info
            if info is None or not info.is_write or frozenset(info.before_set) not in written:
                returned = []
                break
            returned.append(written[frozenset(info.before_set)])
        found = _ALIASES[func] = (returned, torch.Tag.inplace_view in func.tags)
    return found


_ALIASES = {}
aten = torch.ops.aten
# Ops that take a 0-dim CPU tensor beside cuda ones on a GPU, as a number: elementwise ops (but not
# clamp's bounds), and the value that masked_fill and fill_ write.
_NO_CPU_SCALARS = {aten.clamp, aten.clamp_, aten.clamp_min, aten.clamp_min_, aten.clamp_max, aten.clamp_max_}
_CPU_SCALAR_VALUES = {aten.masked_fill, aten.masked_fill_, aten.fill, aten.fill_}
_SCALARS = {}
# Advanced indexing: the indices of a cuda tensor may stay on the CPU. The value: where the values
# written by index_put are (a 0-dim CPU tensor is taken as a number).
_INDEXING = {
    aten.index.Tensor: None,
    aten.index_put_.default: 2,
    aten.index_put.default: 2,
    aten._index_put_impl_.default: 2,
}
INDICES_ELSEWHERE = "indices should be either on cpu or on the same device as the indexed tensor (cpu)"


def _takes_cpu_scalars(func):
    known = _SCALARS.get(func)
    if known is None:
        packet = func.overloadpacket
        known = _SCALARS[func] = packet in _CPU_SCALAR_VALUES or (
            torch.Tag.pointwise in func.tags and packet not in _NO_CPU_SCALARS
        )
    return known


def _check_indexing(func, args):
    indexed_on_cuda = isinstance(args[0], SimulatedCudaTensor)
    indices = args[1] if len(args) > 1 else ()
    if not indexed_on_cuda and any(isinstance(index, SimulatedCudaTensor) for index in indices):
        raise RuntimeError(INDICES_ELSEWHERE)
    at = _INDEXING[func]
    if at is not None and len(args) > at and isinstance(args[at], torch.Tensor):
        values = args[at]
        on_cuda = isinstance(values, SimulatedCudaTensor)
        if on_cuda != indexed_on_cuda and not (indexed_on_cuda and values.dim() == 0):
            raise RuntimeError(MISMATCH)


def _unwrap(value, seen):
    """`value` with every SimulatedCudaTensor replaced by its CPU values. seen[0]: one was there;
    seen[1]: a CPU tensor with dimensions was there; seen[2]: a 0-dim CPU tensor was there."""
    if isinstance(value, SimulatedCudaTensor):
        seen[0] = True
        return value._cpu_values
    if isinstance(value, torch.Tensor):
        seen[1 if value.dim() else 2] = True
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(item, seen) for item in value)
    return value


def _wrap(value):
    if isinstance(value, torch.Tensor):
        return SimulatedCudaTensor(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_wrap(item) for item in value)
    return value


def _dispatch(func, args, kwargs):
    """Run `func` the way a CUDA build would with SimulatedCudaTensors among its arguments."""
    seen = [False, False, False]
    plain_args = _unwrap(args, seen)
    plain_kwargs = {name: _unwrap(value, seen) for name, value in kwargs.items()} if kwargs else kwargs
    device = kwargs.get("device")
    if device is not None:  # a factory or a copy that names its device: that decides where the result is
        if torch.device(device).type != "cuda":
            return func(*plain_args, **plain_kwargs)
        plain_kwargs["device"] = CPU
        return _wrap(func(*plain_args, **plain_kwargs))
    if not seen[0]:
        return func(*plain_args, **plain_kwargs)
    if func in _INDEXING:
        _check_indexing(func, args)
    elif func is not aten.copy_.default and (seen[1] or (seen[2] and not _takes_cpu_scalars(func))):
        raise RuntimeError(MISMATCH)
    out = func(*plain_args, **plain_kwargs)
    returned, shape_changes = _write_aliases(func)
    if not returned:
        return _wrap(out)
    originals = [args[position] if position is not None else kwargs[name] for position, name in returned]
    if shape_changes:  # unsqueeze_ and friends: the wrapper's own sizes change too (as in return_and_correct_aliasing)
        with torch.utils._mode_utils.no_dispatch():
            meta = torch._C._meta_in_tls_dispatch_include()
            torch._C._set_meta_in_tls_dispatch_include(True)
            try:
                func(*args, **kwargs)
            finally:
                torch._C._set_meta_in_tls_dispatch_include(meta)
    return originals[0] if len(originals) == 1 else tuple(originals)


class _OnCuda(TorchDispatchMode):
    """Inside a Simulation: what is made or copied with device "cuda" lands on the simulated device."""

    @classmethod
    def _should_skip_dynamo(cls):  # no torch._dynamo around each op: importing it alone takes seconds
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return _dispatch(func, args, kwargs or {})


def _first_cuda_use():
    """Mark CUDA as set up in this process, as a first `.to("cuda")` would (C++ asks
    torch.cuda._lazy_init() once, which a CPU-only build refuses), leaving torch.cuda's own flag
    as it was: torch.cuda.is_initialized() stays False."""
    was = torch.cuda._initialized
    torch.cuda._initialized = True
    try:
        with _OnCuda():
            torch.empty(0, device="cuda")
    finally:
        torch.cuda._initialized = was


class Simulation:
    """The simulated CUDA device (SimulatedCudaTensor, or fake tensors on 'meta' without the guard
    library); enter it to run student code there."""

    def __init__(self):
        self.device = simulated_device()
        self.has_values = self.device == "cuda"
        if self.has_values:
            with _setup_lock:
                if not _state.get("cuda_used"):
                    _first_cuda_use()
                    _state["cuda_used"] = True
            self.mode = _OnCuda()
        else:
            from torch._subclasses.fake_tensor import FakeTensorMode

            self.mode = FakeTensorMode(allow_non_fake_inputs=False)
        self._logger = logging.getLogger("torch._subclasses.fake_tensor")
        self._entered = []

    @classmethod
    def shared(cls):
        """One simulation per process and device: a fake-tensor mode's caches stay warm across scenarios."""
        key = ("simulation", simulated_device())
        with _simulation_lock:
            if key not in _state:
                _state[key] = cls()
        return _state[key]

    def __enter__(self):
        if self.has_values:
            # torch.tensor(data, device="cuda") then makes a CPU tensor and copies it, which the mode sees.
            self._entered.append(torch._C._only_lift_cpu_tensors())
            torch._C._set_only_lift_cpu_tensors(True)
            self.mode.__enter__()
            return self
        self._entered.append(self._logger.level)
        self._logger.setLevel(logging.CRITICAL)  # it logs failing ops itself; we report them
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        previous = self._entered.pop()
        try:
            return self.mode.__exit__(*exc)
        finally:
            if self.has_values:
                torch._C._set_only_lift_cpu_tensors(previous)
            else:
                self._logger.setLevel(previous)

    def tensor(self, value):
        """A copy of CPU tensor `value` on the simulated device."""
        if self.has_values:
            return SimulatedCudaTensor(value.detach().clone())
        fake = self.mode.from_tensor(value)
        with self.mode:
            return fake.to(self.device)

    def cpu_values(self, value):
        """The values of a tensor from the simulated device, as a plain CPU tensor (None without values)."""
        if not self.has_values:
            return None
        if isinstance(value, SimulatedCudaTensor):
            return value._cpu_values.detach().clone()
        return value.detach().clone()

    def module(self, module, move_plain_tensors=False):
        """Move `module` the way .to("cuda") does: parameters and buffers go to the device; plain
        tensor attributes stay on the CPU, so using them in forward fails as on a real GPU
        (unless `move_plain_tensors`, used to tell that mistake apart from others)."""
        if not self.has_values:
            return self._fake_module(module, move_plain_tensors)
        with self:
            module = module.to("cuda")
            if move_plain_tensors:
                for sub in module.modules():
                    for name, value in list(vars(sub).items()):
                        if isinstance(value, torch.Tensor) and not isinstance(value, SimulatedCudaTensor):
                            object.__setattr__(sub, name, value.to("cuda"))
        return module

    def _fake_module(self, module, move_plain_tensors):
        plan = []
        for sub in module.modules():
            for name, value in sub._parameters.items():
                if value is not None:
                    plan.append((sub._parameters, name, self.mode.from_tensor(value), value.requires_grad))
            for name, value in sub._buffers.items():
                if value is not None:
                    plan.append((sub._buffers, name, self.mode.from_tensor(value), None))
            for name, value in vars(sub).items():
                if isinstance(value, torch.Tensor):
                    plan.append((sub, name, self.mode.from_tensor(value), "plain"))
        with self.mode:
            for owner, name, fake, kind in plan:
                if kind == "plain":
                    object.__setattr__(owner, name, fake.to(self.device) if move_plain_tensors else fake)
                elif kind is None:
                    owner[name] = fake.to(self.device)
                else:
                    owner[name] = nn.Parameter(fake.to(self.device), requires_grad=kind)
        return module


def is_device_mismatch(error):
    text = str(error)
    return type(error).__name__ == "FakeTensorDeviceMismatchError" or (
        isinstance(error, RuntimeError) and "Expected all tensors to be on the same device" in text
    )


def is_data_dependent(error):
    """.item(), bool(tensor), nonzero...: legal on CUDA, but fake tensors ('meta') have no values."""
    return type(error).__name__ in ("DataDependentOutputException", "DynamicOutputShapeException")


def main():
    """`python -m autograder.harness.fake_cuda`: build the guard library afresh and say why it fails
    (the grader falls back to the meta device then, and only says that it did)."""
    with tempfile.TemporaryDirectory() as tmp:
        if build_guard(Path(tmp) / "fake_cuda_guard.so"):
            print(f"the fake CUDA guard builds here (torch {torch.__version__}, -std={cxx_standard()})")
            return 0
    print(f"the fake CUDA guard does not build here (torch {torch.__version__}):\n{build_error()}")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
