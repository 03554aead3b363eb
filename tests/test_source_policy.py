"""The source allow-list (autograder/engine/scan/source_policy.py): every escape class is refused in
every construct, with the file and line named; every correct implementation style passes.

Each case of ESCAPES passed the deny-list scanner this allow-list replaced (shown by running
these cases against that scanner: see the commit that added this file)."""

import ast
import inspect
import pkgutil
import re
import textwrap
import tracemalloc
import types

import pytest

from autograder.engine.checks import messages
from autograder.engine.scan import source_policy, source_reader
from autograder.engine.scan.forbidden import scan_tampering
from autograder.engine.scan.source_reader import findings
from conftest import SOLUTIONS, full_marks, grade_with_hidden, replace_once
from variants import VARIANTS

# (escape class, code): each must be refused.
ESCAPES = {
    "modules": [
        "import os\nos.system('true')\n",
        "import torch\ntorch.os.system('true')\n",  # a module reached through an allowed one
        "import typing\nmodules = typing.sys.modules\n",
        "import dataclasses\ndataclasses.inspect.currentframe()\n",
        "from torch.nn import functional as F\nF.importlib.import_module('gc')\n",
        "import numpy as np\nnp.lib.stride_tricks.as_strided\n",
        "from pathlib import Path\n",
        "import torch.utils.data\n",
    ],
    "frames": [
        "def f():\n    yield\ncode = f().gi_code\n",
        "try:\n    1 / 0\nexcept ZeroDivisionError as error:\n    frame = error.__traceback__.tb_next\n",
        "def f():\n    return (yield)\ng = f()\nnext(g)\ncaller = g.gi_yieldfrom\n",
    ],
    "import_machinery": [
        "spec = __spec__\nloader = spec.loader\n",
        "module = __loader__.load_module('gc')\n",
        "from .helpers import shared\nshared._import_dotted_name('autograder')\n",
    ],
    "dynamic_code": [
        "import typing\n\n\ndef f(x: \"print('ran')\"):\n    pass\n\n\ntyping.get_type_hints(f)\n",
        "import torch\ntorch.utils.benchmark.Timer(stmt='print(1)').timeit(1)\n",
        "namespace = vars()\n",
        "here = locals()\n",
        "import functools\n\n\n@functools.singledispatch\ndef f(x):\n    pass\n",
        "import torch\nlocals_of = torch.compile\n",
        "import torch\nstate = torch.load('weights.pt', weights_only=False)\n",
    ],
    # names built from literals (a name made at run time is checked where it is known:
    # tests/test_lookups.py)
    "built_getattr": [
        "import functools\nimport torch\nlookup = functools.partial(getattr, torch)\n",
        "import torch\nx = getattr(torch, f'o{\"ps\"}')\n",
        "import torch\nx = getattr(torch, 'o' + 'ps')\n",
        "class M:\n    def get(self):\n        return getattr(self, '__di' + 'ct__')\n",
        "def f(x):\n    setattr(x, b'__class__'.decode(), None)\n",
    ],
    # protocols through which numpy, torch or Python read an object (issue 31: numpy's array
    # interface gave read and write access to the interpreter's memory), in every spelling
    "protocols": [
        "class W:\n    @property\n    def __array_interface__(self):\n        return {}\n",
        "class W:\n    __array_interface__ = {'data': (0, False), 'shape': (8,), 'typestr': '|u1'}\n",
        "class W:\n    def __getattr__(self, name):\n        return {}\n",
        "class W:\n    def __getattribute__(self, name):\n        return {}\n",
        "def __getattr__(name):\n    return {}\n",  # a module's own (PEP 562)
        "class W:\n    __cuda_array_interface__ = {}\n",
        "class W:\n    def __dlpack__(self, stream=None):\n        return None\n",
        "class W:\n    def __buffer__(self, flags):\n        return memoryview(b'')\n",
        "class W:\n    def __array_struct__(self):\n        return None\n",
        "class W:\n    def __init_subclass__(cls, **kw):\n        pass\n",
        "class W:\n    def __set_name__(self, owner, name):\n        pass\n",
        "class W:\n    def __class_getitem__(cls, item):\n        return item\n",
        "class W:\n    def __reduce_ex__(self, protocol):\n        return (W, ())\n",
        "class W:\n    def __getstate__(self):\n        return {}\n",
        "class W:\n    def __del__(self):\n        pass\n",
        "class W:\n    def __index__(self):\n        return 0\n",
        "class W:\n    __slots__ = ('__array_interface__',)\n",
        "namespace = {'__array_interface__': {}}\n",
        "name = '__array_' + 'interface__'\n",
        "namespace = dict(__array_interface__=None)\n",
        "class W:\n    def f(self):\n        return __annotations__\n",
        "def f(x):\n    return x.__class__.__class__\n",
        "def f(x):\n    return isinstance(x, x.__class__)\n",
        "def f(x):\n    return getattr(x, '__class__')\n",
    ],
    # makers of classes and attributes from names given at run time
    "name_channels": [
        "W = type('W', (), {})\n",
        "def f(x):\n    return isinstance(x, type)\n",
        "def f(x):\n    return type(type(x))\n" if False else "maker = type\n",
        "import abc\nW = abc.ABCMeta('W', (), {})\n",
        "from abc import ABCMeta\nmake = ABCMeta\n",
        "import enum\nE = enum.Enum('E', 'a b')\n",
        "import enum\nE = enum.Enum('E', names=[('a', 1)])\n",
        "import enum\n\n\nclass Base(enum.Enum):\n    pass\n",
        "from enum import Enum\n\n\nclass Base(Enum):\n    def f(self):\n        pass\n\n\nE = Base('E', 'a b')\n",
        "import dataclasses\nW = dataclasses.make_dataclass('W', [])\n",
        "import torch\nparameters = torch.nn.ParameterDict()\n",
        "from torch import nn\nmaker = nn.ParameterDict\n",
        "import functools\n\n\ndef f(a, b, names):\n    return functools.update_wrapper(a, b, assigned=names)\n",
        "import functools\n\n\ndef f(b, names):\n    return functools.wraps(b, names)\n",
        "import functools\nwrap = functools.update_wrapper\n",
        "from torch.nn.utils import parametrize\n\n\ndef f(m, name, p):\n    parametrize.register_parametrization(m, name, p)\n",
        "class W(metaclass=print):\n    pass\n",
        # typing's alias of `type` (allowed in annotations, `Type[nn.Module]`): get_origin hands
        # over the metaclass itself
        "import typing\nmake = typing.get_origin(typing.Type[int])\n",
        "from typing import Type, get_origin\nmake = get_origin(Type[int])\n",
        "alias = type[int]\nW = alias('W', (), {})\n",  # calling type[int] calls type
    ],
    # a library's classes and functions changed through a library call that changes what it is
    # given (what `F.softmax = ...` would do in the code)
    "patched_through_a_library_call": [
        "import dataclasses\nfrom torch import nn\nLinear = dataclasses.dataclass(nn.Linear)\n",
        "import dataclasses\nfrom torch import nn\nLinear = dataclasses.dataclass(frozen=True)(nn.Linear)\n",
        "import functools\nfrom torch import nn\nfunctools.total_ordering(nn.Linear)\n",
        "import functools\nimport torch.nn.functional as F\n\n\ndef f():\n    pass\n\n\nfunctools.update_wrapper(F.multi_head_attention_forward, f)\n",
        "import functools\nimport torch.nn.functional as F\n\n\ndef f():\n    pass\n\n\nfunctools.wraps(f)(F.multi_head_attention_forward)\n",
        "import abc\nfrom torch import nn\nabc.update_abstractmethods(nn.Module)\n",
    ],
    # kinds of tensors, storages, arrays and dicts of one's own (their private parts take raw
    # addresses; numpy reads memory from any dict that says where)
    "subclasses": [
        "import torch\n\n\nclass T(torch.Tensor):\n    pass\n",
        "import torch\n\n\nclass P(torch.nn.Parameter):\n    pass\n",
        "import torch\n\n\nclass S(torch.UntypedStorage):\n    pass\n",
        "import numpy as np\n\n\nclass A(np.ndarray):\n    pass\n",
        "from torch import nn\n\n\nclass D(nn.Module, dict):\n    pass\n",
        "import collections\n\n\nclass D(collections.OrderedDict):\n    pass\n",
    ],
    # raw memory and files (issue 31: numpy's file readers read the kit where nothing else stopped them)
    "raw_memory": [
        "import numpy as np\nkit = np.fromfile('/kit/solutions/mha/attention.py', dtype=np.uint8)\n",
        "import numpy as np\nrows = np.loadtxt('grading.yml', dtype=str, delimiter='\\t')\n",
        "import numpy as np\nrows = np.genfromtxt('grading.yml')\n",
        "import numpy as np\nview = np.memmap('grading.yml', mode='r')\n",
        "import numpy as np\nview = np.frombuffer(b'x', dtype=np.uint8)\n",
        "import torch\nkit = torch.from_file('grading.yml', size=10)\n",
        "import torch\nkit = torch.UntypedStorage.from_file('grading.yml', False, 10)\n",
        "def f(storage, address):\n    return storage._new_with_weak_ptr(address)\n",
        "def f(x, address):\n    x.untyped_storage()._set_cdata(address)\n",
        "def f(t):\n    return t._cdata\n",
        "from torch import nn\n\n\nclass M(nn.Module):\n    def f(self, key, value):\n        self._modules[key] = value\n",
        "def f(module, key, value):\n    module._buffers[key] = value\n",
        "import torch\nfree = torch.cuda.caching_allocator_delete\n",
        "def f():\n    return id(f)\n",
        "def f(module):\n    return module.exec\n",
        # warnings shows a warning with the line of any file it is told (linecache reads it)
        "import warnings\nwarnings.warn_explicit('x', UserWarning, '/kit/solutions/mha/attention.py', 12)\n",
        "import warnings\nwarnings.showwarning('x', UserWarning, 'grading.yml', 1)\n",
    ],
    "string_smuggling": [
        "name = 'redargotua'[::-1]\n",
        "name = ''.join(['auto', 'grader'])\n",
        "name = f'{\"auto\"}grader.engine'\n",
        "parts = ('harness',)\n",
    ],
    "class_body": [
        "class TestHelpers:\n    import gc\n    gc.collect()\n",
        "class Model:\n    scope = vars()\n",
        "class TestIt(metaclass=type):\n    def test_a(self):\n        import gc\n",
    ],
    "test_code_run_from_elsewhere": [
        # the other file's test_* body is not read there: it may not be reached from here
        "from .attention import test_helper\ntest_helper()\n",
        "from . import attention\nattention.test_helper()\n",
        "from .attention import *\n\ntest_helper()\n",
        "from .attention import TestHelpers\n\n\nclass Runs(TestHelpers):\n    pass\n",
        # a metaclass inherited from a base gets the Test class's functions
        "class Meta(type):\n    def __new__(mcs, name, bases, ns):\n        return super().__new__(mcs, name, bases, ns)\n"
        "class Base(metaclass=Meta):\n    pass\n"
        "class TestX(Base):\n    def test_a(self):\n        import gc\n",
    ],
    "decorators_defaults_annotations": [
        "def test_x(w=__import__('gc')):\n    pass\n",
        "def test_y(x: exec('print(1)') = 1):\n    pass\n",
        "import torch\n\n\n@torch.jit.script\ndef f(x):\n    return x\n",
        "def f(x=(lambda: vars())()):\n    return x\n",
        "class M:\n    def f(self, w=[breakpoint]):\n        pass\n",
    ],
    "assignment_into_torch": [
        "import torch\nT = torch.Tensor\nT.softmax = lambda self, dim: self\n",
        "import torch\nF = torch.nn.functional\nF.softmax = lambda x, dim: x\n",
        "import torch.nn.functional as F\ndel F.softmax\n",
        "from .helpers import torch_alias\ntorch_alias.softmax = print\n",
        "import math\nmath.sqrt = abs\n",
    ],
    "threading": [
        "import threading\n",
        "from concurrent.futures import ThreadPoolExecutor\n",
        "import torch\nfuture = torch.jit.fork(print)\n",
        "import multiprocessing\n",
        "import asyncio\n",
    ],
    "encoding": [
        # Python decodes the file as declared, the judge as UTF-8: `+AAo-` is a newline in UTF-7
        "# -*- coding: utf-7 -*-\nx = 1  # +AAo-import os+AAo-os.system('true')\n",
        "#!/usr/bin/env python\n# vim: set fileencoding=unicode_escape :\nx = 1\n",
    ],
    "byte_order_mark": [
        # a str parse refuses U+FEFF (a syntax error: "the import will say so"), an import skips it
        "\ufeffimport os\nos.system('true')\n",
    ],
    "reflection": [
        "import torch\nself_of = torch.softmax.__self__\n",
        "class A:\n    def f(self, name):\n        return self.__getattribute__(name)\n",
        "import torch\nmodules = {'t': torch}\n",
        "import numpy as np\nnamespaces = [np]\n",
        "import torch\n\n\nclass Sneaky(torch.Tensor):\n    def __torch_function__(self, func, types, args=(), kwargs=None):\n        return func\n",
    ],
}


# Refused by the deny-list too: kept so that the allow-list is seen to cover them.
ALSO_REFUSED = [
    "from torch import nn\nnn.Module.__call__ = lambda self, *a: None\n",
    "import torch\nsetattr(torch.nn.functional, 'softmax', print)\n",
    "x = ().__class__.__base__.__subclasses__()\n",
    "def f():\n    pass\ng = f.__globals__\n",
    "__name__ = '__main__'\n",
    "import torch\nwith torch._C.DisableTorchFunction():\n    pass\n",
    "import sys\nframe = sys._getframe(1)\n",
    "exec('import ' + 'gc')\n",
]


@pytest.mark.parametrize(
    "code",
    [pytest.param(code, id=f"{kind}-{i}") for kind, codes in ESCAPES.items() for i, code in enumerate(codes)]
    + [pytest.param(code, id=f"also-{i}") for i, code in enumerate(ALSO_REFUSED)],
)
def test_an_escape_is_refused(code):
    found = scan_tampering(code)
    assert found, f"not refused:\n{code}"
    what, line = found[0]
    assert isinstance(line, int) and line >= 1 and what


def test_a_declared_encoding_would_hide_code_from_a_utf8_reading():
    """What the encoding case above guards against: Python compiles the hidden line."""
    source = ESCAPES["encoding"][0]
    assert "os" in compile(source.encode("ascii"), "m.py", "exec").co_names  # Python sees `import os`
    assert "os" not in compile(source, "m.py", "exec").co_names  # a UTF-8 reading does not
    (found,) = findings(source)
    assert (found.message_id, found.name, found.line) == ("policy.encoding", "utf-7", 1)
    assert findings("# -*- coding: utf-8 -*-\nimport torch\n") == ()


def test_a_finding_names_the_construct_and_why_in_both_languages():
    source = "import torch\n\n\nclass Model:\n    hidden = torch._C\n"
    (found,) = findings(source)
    assert (found.message_id, found.code, found.name, found.line) == ("policy.private", "torch._C", "torch._C", 5)
    english = messages.render(found.message_id, "en", code=found.code, name=found.name)
    korean = messages.render(found.message_id, "ko", code=found.code, name=found.name)
    assert "`torch._C`" in english and "private" in english
    assert "`torch._C`" in korean and "비공개" in korean


# ---------------------------------------------------------------------------- correct code passes


def test_every_solution_and_variant_scans_clean():
    sources = {path: path.read_text() for path in sorted(SOLUTIONS.rglob("*.py"))}
    for variant in VARIANTS:
        path = SOLUTIONS / "mha" / variant.file
        sources[f"{variant.id} ({variant.file})"] = variant.apply(path.read_text())
    assert len(sources) > 40
    refused = {name: findings(source) for name, source in sources.items() if findings(source)}
    assert refused == {}


# Whole files in styles a student may write, each exercising an edge of the allow-list (written
# for these tests; they are read, not graded: tests/variants.py grades full implementations).
STYLES = {
    "dataclass_config_typing": """
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class AttentionConfig:
    d_model: int = 64
    num_heads: int = 4
    dropout: float = 0.0
    sizes: Tuple[int, ...] = field(default_factory=tuple)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


class Attention(nn.Module):
    def __init__(self, config: AttentionConfig) -> None:
        super().__init__()
        if config.d_model % config.num_heads:
            raise ValueError(f"d_model={config.d_model} is not a multiple of num_heads={config.num_heads}")
        self.config = config
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)
        self.register_buffer("scale", torch.tensor(1 / math.sqrt(config.head_dim)), persistent=False)

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        B, L, D = x.shape
        assert D == self.config.d_model, "wrong width"
        q, k, v = self.qkv(x).view(B, L, 3, self.config.num_heads, -1).permute(2, 0, 3, 1, 4)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * self.scale
        if mask is not None:
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        weights = F.softmax(scores, dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(B, L, D))
""",
    "helpers_partial_deepcopy_numpy": """
import copy
import functools
import math
from collections import OrderedDict

import numpy as np
import torch
from torch import nn

from .heads import merge_heads, split_heads
from . import masking


def clones(module, n):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


NEG = -np.inf
SQRT2 = np.sqrt(2.0)
linear = functools.partial(nn.Linear, bias=False)


class Block(nn.Module):
    class Inner(nn.Module):
        def __init__(self, width):
            super(Block.Inner, self).__init__()
            self.layers = nn.Sequential(OrderedDict([("fc", linear(width, width)), ("act", nn.GELU())]))

        def forward(self, x):
            return self.layers(x)

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.inner = clones(self.Inner(width), 2)
        self.proj = nn.ModuleDict({name: linear(width, width) for name in ("q", "k", "v")})
        self._cache = None
        self.reset_parameters()

    def reset_parameters(self):
        for layer in self.proj.values():
            nn.init.xavier_uniform_(layer.weight, gain=1 / math.sqrt(2))

    @staticmethod
    def scale(d):
        return d ** -0.5

    @classmethod
    def small(cls):
        return cls(8, 2)

    @torch.no_grad()
    def attention_map(self, x):
        return self.forward(x, return_weights=True)[1]

    def forward(self, x, pad_mask=None, return_weights=False):
        q, k, v = (split_heads(self.proj[n](x), self.heads) for n in ("q", "k", "v"))
        scores = q @ k.transpose(-2, -1) * self.scale(q.size(-1))
        blocked = masking.causal_mask(x.size(1))
        scores = scores.masked_fill(blocked, NEG)
        weights = scores.softmax(dim=-1)
        if torch.isnan(weights).any():
            raise RuntimeError(f"NaN in {type(self).__name__}: {self.__class__.__name__}")
        self._cache = weights.detach()
        out = merge_heads(weights @ v)
        return (out, weights) if return_weights else out


if __name__ == "__main__":
    import time
    print(Block.small()(torch.randn(1, 3, 8)).shape, time.time())
""",
    "einops_lambda_match_walrus": """
import itertools
from enum import Enum
from typing import NamedTuple

import torch
from einops import rearrange
from torch import Tensor


class Layout(Enum):
    BHLD = "bhld"
    BLHD = "blhd"


class Shapes(NamedTuple):
    batch: int
    length: int


def attend(q: Tensor, k: Tensor, v: Tensor, layout: Layout = Layout.BHLD) -> Tensor:
    match layout:
        case Layout.BLHD:
            q, k, v = (rearrange(t, "b l h d -> b h l d") for t in (q, k, v))
        case _:
            pass
    if (d := q.shape[-1]) <= 0:
        raise ValueError(f"empty head dimension {d!r}")
    scores = (q @ k.mT) / d ** 0.5
    weights = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    pairs = list(itertools.product(range(2), repeat=2))
    assert all(isinstance(p, tuple) for p in pairs)
    weight = getattr(weights, "contiguous")()
    key = sorted(pairs, key=lambda p: (p[1], p[0]))
    return weight @ v if key else v


def test_attend_matches():
    import pytest  # an unreferenced test function: its body is not graded
    assert pytest


class TestAttend:
    def test_shapes(self):
        import inspect
        assert inspect
""",
    "kv_cache_style": '''
import math
import sys
import warnings
from typing import Optional

import torch
import torch.nn.functional as F


class KVCache:
    """A growing cache."""

    __slots__ = ("k", "v", "_length")

    def __init__(self):
        self.k: Optional[torch.Tensor] = None
        self.v: Optional[torch.Tensor] = None
        self._length = 0

    def __len__(self):
        return self._length

    def update(self, k, v):
        if self.k is None:
            self.k, self.v = k, v
        else:
            self.k = torch.cat([self.k, k], dim=2)
            self.v = torch.cat([self.v, v], dim=2)
        self._length = self.k.shape[2]
        return self.k, self.v


def repeat_kv(x, n_rep):
    if n_rep < 1:
        warnings.warn("n_rep < 1: nothing repeated", stacklevel=2)
        return x
    b, h, length, d = x.shape
    return x[:, :, None].expand(b, h, n_rep, length, d).reshape(b, h * n_rep, length, d)


def cached_attention(q, k, v, cache=None, layer_names=("w_q", "w_k")):
    for i, name in enumerate(layer_names):
        assert getattr(cache, f"w_{i}", None) is None or hasattr(cache, name)
    if cache is not None:
        k, v = cache.update(k, v)
    scale = 1.0 / math.sqrt(q.size(-1))
    weights = F.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)
    device = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))
    print(f"{device}: {torch.__version__}", weights.shape, file=sys.stderr)
    return weights @ v
''',
}


STYLES["static_cache_by_computed_name"] = '''
import torch
from torch import nn


class StaticKVCache(nn.Module):
    """Preallocated buffers; the key or value buffer is picked by name (issue 32)."""

    def __init__(self, batch, heads, max_len, head_dim):
        super().__init__()
        for name in ("k", "v"):
            self.register_buffer(f"{name}_cache", torch.zeros(batch, heads, max_len, head_dim))
        self._length = 0
        self._values = None  # a name torch's tensors also have: this object's own

    def _write(self, name, x, start):
        buffer = getattr(self, name + "_cache")
        buffer[:, :, start : start + x.size(2)] = x
        return buffer[:, :, : start + x.size(2)]

    def update(self, k, v):
        start = self._length
        out = tuple(self._write(name, x, start) for name, x in zip(("k", "v"), (k, v)))
        self._length = start + k.size(2)
        self._values = out[1]
        return out

    def reset(self):
        for name in ("k_cache", "v_cache"):
            setattr(self, name, torch.zeros_like(getattr(self, name)))
        self._length = 0


def lengths(caches):
    return [cache._length for cache in caches]  # another object's private name, its class's own
'''
STYLES["overrides_enums_and_own_class_methods"] = """
import abc
import enum
import json_free_config as config_source  # a file of the submission
import torch
from torch import nn
from torch.nn.utils import parametrize


class Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


class Base(abc.ABC):
    @abc.abstractmethod
    def forward(self, x):
        ...


class Config:
    __slots__ = ("d_model", "_heads")

    def __init__(self, d_model, heads):
        self.d_model, self._heads = d_model, heads

    @classmethod
    def from_file(cls, name):  # a method of one's own, named like numpy's file reader
        return cls(*config_source.SIZES[name])

    def __repr__(self):
        return f"{self.__class__.__name__}({self.d_model}, {self._heads})"


def build(kind: type[nn.Module], width: int) -> nn.Module:
    return kind(width, width)


class Normed(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = nn.Linear(width, width, bias=False)
        parametrize.register_parametrization(self.linear, "weight", nn.Identity())


class Conv(nn.Conv1d):
    def _conv_forward(self, x, weight, bias):  # whisper's override of a library method
        return super()._conv_forward(x, weight.to(x.dtype), None if bias is None else bias.to(x.dtype))


class Layer(nn.Module, metaclass=abc.ABCMeta):
    def __init__(self, norm: typing.Optional[typing.Type[nn.Module]] = nn.LayerNorm):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self._reset_parameters()

    def _reset_parameters(self):
        nn.init.zeros_(self.proj.bias)

    def clone(self):
        return type(self)()


@dataclasses.dataclass(frozen=True)
class Sizes:
    d_model: int = 8


@functools.total_ordering
class Rank:
    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return self.value == other.value

    def __lt__(self, other):
        return self.value < other.value


def logged(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)

    def plain(*args):
        return function(*args)

    functools.update_wrapper(plain, function)
    return wrapper


CONFIG = Config.from_file("small")
MODE = Mode("train")
__all__ = ["Layer", "Config"]
"""


@pytest.mark.parametrize("name", list(STYLES))
def test_a_correct_style_scans_clean(name):
    assert findings(STYLES[name]) == ()


def test_code_that_is_never_run_is_not_read():
    """The body of a `__main__` block and of unreferenced test functions: a self-test may use
    anything. Their decorators, defaults and annotations run at import: they are read."""
    body = "    import gc\n    exec('print(1)')\n"
    assert findings("if __name__ == '__main__':\n" + body) == ()
    assert findings("def test_me():\n" + body) == ()
    assert findings("class TestMe:\n    def test_a(self):\n" + body.replace("    ", "        ")) == ()
    assert findings("if __name__ == '__main__':\n    pass\nelse:\n    import gc\n")  # the else runs
    assert findings("def test_me():\n" + body + "test_me()\n")  # called: graded
    assert findings("def test_me():\n" + body + "run = 'test_me'\n")  # named: graded
    assert findings("__name__ = 'x'\nif __name__ == '__main__':\n" + body)
    assert findings("@print\ndef test_me():\n" + body)


def test_a_file_too_deep_to_parse_is_unreadable_not_a_crash():
    deep = "x = y" + ".a" * 50_000 + "\n"  # Python's parser gives up (RecursionError)
    assert [f.message_id for f in findings(deep)] == ["policy.unreadable"]
    what, line = scan_tampering(deep)[0]
    assert line == 1 and "nested too deeply" in what
    assert [f.message_id for f in findings("f = " + "lambda: " * 5000 + "1\n")] == ["policy.unreadable"]  # MemoryError
    # Parentheses and blocks nested beyond Python's limits are syntax errors: the import says so
    assert findings("x = " + "(" * 100_000 + "1" + ")" * 100_000 + "\n") == ()
    assert findings("".join(" " * i + "if x:\n" for i in range(150)) + " " * 150 + "pass\n") == ()


def test_a_file_too_large_is_refused_unread():
    (found,) = findings("x = 1\n" * ((300 << 10) // 6))
    assert (found.message_id, found.line) == ("policy.too_large", 1)
    assert messages.render(found.message_id, "en", code=found.code, name=found.name).startswith("the file has ")


def test_strings_built_from_literals_cost_the_judge_little():
    """Folding '%0999999999d' % 1 or a join of long repeats would build them in the judge: such
    strings are left unbuilt (they name nothing the check could see)."""
    source = (
        "a = '%0999999999d' % 1\n"
        "b = ''.join([" + ", ".join(["'x' * 4096"] * 5000) + "])\n"  # 20 MiB if built
        "c = ''.join(['x' * 4000, 'y' * 4000, 'z' * 4000])\n"
        "d = 'auto' * 1099511627776\n"
    )
    tracemalloc.start()
    assert findings(source) == ()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 << 20, f"{peak >> 20} MiB"
    assert [f.name for f in findings("x = '%s%s' % ('auto', 'grader')\n")] == ["autograder"]


def test_a_sentence_about_the_grader_is_not_a_grader_name():
    assert findings("def f():\n    raise ValueError('the autograder expects (B, L, D)')\n") == ()
    assert findings("name = 'Autograder/engine'\n")


def test_a_hostile_file_yields_a_bounded_number_of_findings():
    assert len(findings("import os\n" * 10_000)) == source_reader.MAX_FINDINGS


def test_every_module_reachable_from_an_allowed_module_is_decided():
    """Each module-valued member of an allowed module is allowed, refused by name on every
    object (GLOBAL_DENY_MODULES) or listed as harmless: a new one (a torch upgrade) must be
    decided here, not pass unseen."""
    undecided = []
    for module_name in sorted(source_policy.ALLOWED_MODULES):
        module = source_reader._loaded(module_name)
        if module is None:
            continue
        members = {attr: value.__name__ for attr, value in vars(module).items() if isinstance(value, types.ModuleType)}
        # submodules not imported yet become members once something imports them
        members.update(
            (f.name, f"{module_name}.{f.name}") for f in pkgutil.iter_modules(getattr(module, "__path__", []))
        )
        for attr, real_name in members.items():
            if attr.startswith("_") or real_name in source_policy.ALLOWED_MODULES:
                continue
            if not (
                attr in source_policy.GLOBAL_DENY_MODULES
                or attr in source_policy.HARMLESS_MODULE_MEMBERS
                or real_name.startswith(source_policy.HARMLESS_PACKAGES)
            ):
                undecided.append(f"{module_name}.{attr} ({real_name})")
    assert undecided == [], undecided


# ---------------------------------------------------------------------------- end to end


def test_an_escape_in_a_class_body_costs_the_step_with_file_and_line(config, submission):
    """A class body runs at import: code there is graded like any other (the deny-list skipped
    `class Test*` bodies, and such a body switched the watch off)."""
    attention = replace_once(
        (SOLUTIONS / "mha" / "attention.py").read_text(),
        "\nimport torch\n",
        "\nimport torch\n\n\nclass TestSetup:\n    import gc  # runs at import\n\n",
    )
    line = attention.splitlines().index("    import gc  # runs at import") + 1
    result = grade_with_hidden(submission(files={"attention.py": attention}), config)
    assert set(full_marks(result)) == {"attention", "masking"}
    for step in ("attention", "masking"):
        assert result.step(step).score == 0
        assert all(
            f"mha/attention.py, line {line}: `import gc` uses the module gc" in c.message
            for c in result.step(step).checks
        )
    assert result.step("padding").score == result.step("padding").max_score


# ---------------------------------------------------------------------------- derived from the libraries


def _public_callables():
    """(dotted name, callable) for every public callable of the allowed modules and every public
    method of their public classes."""
    import warnings as python_warnings

    found = []
    with python_warnings.catch_warnings():
        python_warnings.simplefilter("ignore")
        for module_name in sorted(source_policy.ALLOWED_MODULES):
            module = source_reader._loaded(module_name)
            if module is None:
                continue
            for name in list(vars(module)):
                if name.startswith("_"):
                    continue
                value = vars(module)[name]
                if isinstance(value, types.ModuleType):
                    continue
                found.append((f"{module_name}.{name}", value))
                if inspect.isclass(value):
                    for attr in dir(value):
                        if not attr.startswith("_"):
                            try:
                                found.append((f"{module_name}.{name}.{attr}", getattr(value, attr)))
                            except Exception:  # noqa: BLE001 - a descriptor that raises on its class
                                pass
    return found


# Parameters that name a file, and callables that have one without reading or writing a file.
FILE_PARAMETERS = {"file", "fname", "filename", "fid", "filepath", "path", "f"}
NOT_FILES = {"final", "gradient", "sym_ite", "WarningMessage"}  # (warnings' show and format read files: linecache)


def test_every_library_callable_that_takes_a_file_is_refused():
    """numpy's and torch's file readers and writers are derived, not listed by hand: every public
    callable of an allowed module with a file parameter (its signature, or a builtin's text
    signature) is refused by the name its module gives it (issue 31: numpy's file readers read
    the kit where nothing else stopped them)."""

    takes_files = {}
    for dotted, value in _public_callables():
        if not callable(value) or dotted.rsplit(".", 1)[-1] in NOT_FILES:
            continue
        try:
            parameters = set(inspect.signature(value).parameters)
        except Exception:  # noqa: BLE001 - no signature (a builtin), or one that raises (CUDA's)
            doc = getattr(type(value), "__doc__", None) if isinstance(value, type) else getattr(value, "__doc__", None)
            first = (doc if isinstance(doc, str) else "").strip().split("\n", 1)[0]
            match = re.match(r"[\w.]+\(([^)]*)\)", first)
            parameters = {p.strip().split("=")[0].strip("*[] ") for p in match.group(1).split(",")} if match else set()
        if parameters & FILE_PARAMETERS:
            takes_files.setdefault(dotted.rsplit(".", 1)[-1], dotted)
    assert {"fromfile", "memmap", "loadtxt", "genfromtxt", "from_file", "load", "save"} <= set(takes_files)
    unrefused = [dotted for name, dotted in takes_files.items() if name not in source_policy.GLOBAL_DENY_MEMBERS]
    assert unrefused == []


# Public library functions that set an attribute under a name from their parameters, found by
# reading their code, and why each is harmless where it is not a NAME_CHANNEL (refused there).
HARMLESS_CHANNELS = {
    "collections.namedtuple": "its field names may not start with an underscore: no dunder",
    "typing.NamedTupleMeta.__new__": "the same for typing.NamedTuple",
    "enum.EnumType.__new__": "an enumeration's functional API: refused where called with names",
    "enum.EnumType.__setattr__": "an enumeration's members, through setattr (checked at run time)",
    "numpy.rec.recarray.__setattr__": "reached through setattr (checked at run time) or a store the code writes",
    "torch.nn.modules.module.Module.__setattr__": "the same",
    "torch.nn.modules.rnn.RNNBase.__setattr__": "the same",
    "typing_extensions.TypeAliasType.__setattr__": "the same",
    "typing_extensions.sentinel.__setattr__": "the same",
    "torch.backends.cuda.cuFFTPlanCacheManager.__setattr__": "the same",
    "torch.nn.modules.container.ModuleList.__setitem__": "names are indices",
    "torch.nn.modules.container.ParameterList.__setitem__": "names are indices",
    "torch.nn.modules.rnn.RNNBase.__init__": "names of its own weights",
    "torch.nn.utils.parametrize.ParametrizationList.__init__": "names of its own originals",
    "torch.nn.utils.parametrize.ParametrizationList.right_inverse": "names of its own originals",
    "torch.nn.utils.parametrize.transfer_parametrizations_and_params": "values are Parameters",
    "torch.autograd.function.FunctionMeta.__init__": "a fixed name",
    "torch.nn.modules.linear_cross_entropy_options.LinearCrossEntropyOptions.__setstate__": "its own fields",
    "__deepcopy__": "a tensor's copy copies the slots it has",
}


def _sets_named_attribute(function) -> list:
    """Lines of `function` that call setattr (or type() with a namespace) with a name that comes
    from one of its parameters (directly or through one assignment or loop)."""

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return []
    definition = tree.body[0] if tree.body else None
    if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    arguments = definition.args
    derived = {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs} - {"self", "cls"}
    derived |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a}
    for _ in range(3):
        for node in ast.walk(definition):
            sources = []
            if isinstance(node, ast.Assign):
                sources, targets = [node.value], node.targets
            elif isinstance(node, (ast.For, ast.comprehension)):
                sources, targets = [node.iter], [node.target]
            if any(isinstance(n, ast.Name) and n.id in derived for s in sources for n in ast.walk(s)):
                derived |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}

    def uses(expression):
        return any(isinstance(n, ast.Name) and n.id in derived for n in ast.walk(expression))

    lines = []
    for node in ast.walk(definition):
        if isinstance(node, ast.Call):
            callee = ast.unparse(node.func)
            name_at = {"setattr": 1, "object.__setattr__": 1, "super().__setattr__": 0}.get(callee)
            if name_at is not None and len(node.args) > name_at and uses(node.args[name_at]):
                lines.append(ast.unparse(node))
            if callee in ("type", "super().__new__") and len(node.args) >= 3 and uses(node.args[-1]):
                lines.append(ast.unparse(node))
    return lines


def test_every_library_function_that_names_attributes_at_run_time_is_decided():
    """A library function that sets attributes under names its caller gives can give an object a
    protocol (issue 31: ParameterDict, an enumeration's functional API, make_dataclass): each one
    the allowed modules hold is a NAME_CHANNEL of the policy or harmless for a stated reason, so
    that a torch upgrade that adds one fails here, not in a red team."""

    decided = set(source_policy.NAME_CHANNELS) | set(HARMLESS_CHANNELS)
    undecided, seen = [], set()
    for dotted, value in _public_callables():
        function = value.__func__ if isinstance(value, types.MethodType) else value
        candidates = [(dotted, function)]
        if inspect.isclass(value):
            candidates = [
                (f"{k.__module__}.{k.__qualname__}.{a}", m)
                for k in value.__mro__
                if k.__module__ != "builtins"
                for a, m in vars(k).items()
                if a in ("__new__", "__init__", "__setattr__", "__setitem__", "__setstate__", "__deepcopy__")
                or not a.startswith("_")
            ]
        for name, member in candidates:
            if isinstance(member, (classmethod, staticmethod)):
                member = member.__func__
            if not isinstance(member, types.FunctionType) or id(member) in seen:
                continue
            seen.add(id(member))
            if _sets_named_attribute(member) and not (
                name in decided or name.rsplit(".", 1)[-1] in decided or dotted in decided
            ):
                undecided.append(name)
    assert undecided == [], undecided


# Public library functions that set attributes on what their caller gives them, found by reading
# their code (one level into the module's own helpers), and why each is harmless where it is not
# one of the policy's DECORATORS (kept to the file's own definitions there).
HARMLESS_PATCHERS = {
    "numpy.genfromtxt": "refused as a file reader",
    "torch.nn.functional.boolean_dispatch": "sets the documentation of the functions it makes",
    "torch.nn.utils.parametrize.register_parametrization": "a module object's own state (an instance)",
    "torch.nn.utils.parametrize.remove_parametrizations": "the same",
    "torch.nn.utils.parametrize.transfer_parametrizations_and_params": "the same",
    "torch.optim.lr_scheduler.override": "a marker attribute (typing's @override)",
    "torch.optim.swap_in_optimizer_params_and_state": "an optimizer object's own state",
    "typing.final": "a marker attribute",
    "typing.no_type_check": "a marker attribute",
    "typing.runtime_checkable": "a marker on a Protocol",
    "typing_extensions.final": "a marker attribute",
    "typing_extensions.override": "a marker attribute",
    "typing_extensions.runtime_checkable": "a marker on a Protocol",
    "typing_extensions.deprecated": "a marker attribute",
    "typing_extensions.dataclass_transform": "a marker attribute",
    "typing.dataclass_transform": "a marker attribute",
    "typing.override": "a marker attribute",
    "enum.unique": "reads the enumeration only",
    "enum.global_enum": "puts the members into their own module",
    "typing_extensions.disjoint_base": "a marker attribute",
    "typing_extensions.evaluate_forward_ref": "refused by name (GLOBAL_DENY_MEMBERS)",
}


def _assigns_attributes_of(function, parameters, depth: int = 1) -> bool:
    """Whether `function` sets an attribute of one of `parameters` (by name: `setattr(p, ...)`,
    `p.x = ...`), here or in a helper of its own module it hands the parameter to."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return False
    definition = tree.body[0] if tree.body else None
    if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    positional = [a.arg for a in definition.args.posonlyargs + definition.args.args]
    names = {positional[i] for i in parameters if i < len(positional)} if parameters is not None else set(positional)
    for node in ast.walk(definition):
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func)
            in (
                "setattr",
                "object.__setattr__",
                "type.__setattr__",
            )
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in names
        ):
            return True
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id in names
                ):
                    return True
        if depth and isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("_"):
            helper = function.__globals__.get(node.func.id)
            handed = [i for i, a in enumerate(node.args) if isinstance(a, ast.Name) and a.id in names]
            if isinstance(helper, types.FunctionType) and handed and _assigns_attributes_of(helper, handed, depth - 1):
                return True
    return False


def test_every_library_function_that_changes_what_it_is_given_is_decided():
    """A library function that sets attributes on the object its caller hands it can change a
    library's own class or function (dataclass, total_ordering, update_wrapper): each one the
    allowed modules hold is one of the policy's DECORATORS or harmless for a stated reason."""
    decided = source_policy.DECORATORS | set(HARMLESS_PATCHERS) | {k for k in source_policy.NAME_CHANNELS}
    undecided = []
    functions = [
        (dotted, value)
        for dotted, value in _public_callables()
        if isinstance(value, types.FunctionType) and dotted.rsplit(".", 1)[0] in source_policy.ALLOWED_MODULES
    ]
    for dotted, value in functions:
        if _assigns_attributes_of(value, None):
            owner = f"{value.__module__}.{value.__qualname__}"
            if dotted not in decided and owner not in decided:
                undecided.append(dotted)
    assert {"dataclasses.dataclass", "functools.total_ordering", "functools.update_wrapper"} <= {
        d for d, v in functions if _assigns_attributes_of(v, None)
    }
    assert sorted(set(undecided)) == []
