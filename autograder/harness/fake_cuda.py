"""A simulated CUDA device for machines without one: fake tensors on a fake `cuda:0`.

A CPU-only PyTorch can create FakeTensors on "cuda", but most ops then fail, because no CUDA
device guard is registered. A few lines of C++ register c10's FakeGuardImpl for CUDA; they are
compiled once per machine and torch version (about 2 s with only c10's headers) into a cache
directory and loaded with ctypes, with the C++ standard torch's headers need (cxx_standard:
C++20 from torch 2.14). Without a C++ compiler, or when the build fails (`python -m
autograder.fake_cuda` prints why), the simulation falls back to fake tensors on the `meta`
device, which catches CPU-created masks and attributes but misses a few ops (e.g. F.embedding
with a CPU index).

    with Simulation() as sim:
        module = sim.module(student_module)   # like .to(): _parameters and _buffers only
        out = module(sim.tensor(x))           # out.device == sim.device
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

from autograder import cache_base

GUARD_SOURCE = r"""
// Registers c10's fake device guard for CUDA in a CPU-only PyTorch (see autograder/fake_cuda.py).
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

_state = {}  # "device" -> "cuda" | "meta", "simulation" -> the shared Simulation; once per process
# A batch's judge threads may ask at once; two locks, so that asking for the device never waits
# for a simulation being set up (seconds).
_device_lock, _simulation_lock = threading.Lock(), threading.Lock()


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


class Simulation:
    """Fake tensors on the simulated device; enter it to run student code on them."""

    def __init__(self):
        from torch._subclasses.fake_tensor import FakeTensorMode

        self.device = simulated_device()
        self.mode = FakeTensorMode(allow_non_fake_inputs=False)
        self._logger = logging.getLogger("torch._subclasses.fake_tensor")

    @classmethod
    def shared(cls):
        """One simulation per process: its fake-tensor caches stay warm across scenarios."""
        with _simulation_lock:
            if "simulation" not in _state:
                _state["simulation"] = cls()
        return _state["simulation"]

    def __enter__(self):
        self._level = self._logger.level
        self._logger.setLevel(logging.CRITICAL)  # it logs failing ops itself; we report them
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        try:
            return self.mode.__exit__(*exc)
        finally:
            self._logger.setLevel(self._level)

    def tensor(self, value):
        """A fake copy of `value` on the simulated device."""
        fake = self.mode.from_tensor(value)
        with self.mode:
            return fake.to(self.device)

    def cpu_tensor(self, value):
        return self.mode.from_tensor(value)

    def module(self, module, move_plain_tensors=False):
        """Move `module` the way .to() does: parameters and buffers go to the device; plain tensor
        attributes become fake CPU tensors, so using them in forward fails as on a real GPU
        (unless `move_plain_tensors`, used to tell that mistake apart from others)."""
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
    """.item(), bool(tensor), nonzero...: legal on CUDA, but fake tensors have no values."""
    return type(error).__name__ in ("DataDependentOutputException", "DynamicOutputShapeException")


def main():
    """`python -m autograder.fake_cuda`: build the guard library afresh and say why it fails
    (the grader falls back to the meta device then, and only says that it did)."""
    with tempfile.TemporaryDirectory() as tmp:
        if build_guard(Path(tmp) / "fake_cuda_guard.so"):
            print(f"the fake CUDA guard builds here (torch {torch.__version__}, -std={cxx_standard()})")
            return 0
    print(f"the fake CUDA guard does not build here (torch {torch.__version__}):\n{build_error()}")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
