"""Names made at run time (issue 32: `getattr(self, name)` on the student's own objects is ordinary
Python; issue 31: nothing it reaches may give raw memory, code, frames or the interpreter).

The source policy accepts a lookup whose name is computed and autograder/harness/lookups.py checks
the name in the student's process, where it is known, by the same rules. These tests hold the
principle, not examples: for generated names on generated objects the run-time rule refuses
whatever the source rule refuses for the same name written in the code; generated rewrites of
correct code that look their own attributes up by computed names keep their results; generated
escape attempts (a refused name spelled in every way, reached through every lookup) are refused
before anything is handed over.
"""

import ast
import shutil
import sys
import textwrap

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder.engine.scan import library, source_policy
from autograder.engine.scan.source_reader import findings, lookup_rule
from autograder.harness.contract import ContractError
from autograder.harness.lookups import LookupRule
from autograder.harness.package import Package
from conftest import SOLUTIONS

RULE = LookupRule.from_data(lookup_rule())

OWN = textwrap.dedent(
    """
    import torch
    from torch import nn


    class Plain:
        label = "plain"

        def __init__(self):
            self.size = 3
            self._length = 0
            self._values = None


    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(2, 2)
            self.register_buffer("k_cache", torch.zeros(2))
            self._step = 0

        def forward(self, x):
            return self.proj(x)


    def read(target, name, *default):
        return getattr(target, name, *default)


    def write(target, name, value):
        setattr(target, name, value)


    def remove(target, name):
        delattr(target, name)


    def kind(target):
        return type(target)


    def test_helper():  # a test function nothing in its file names: the judge never reads its body
        return "unread code"
    """
)


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    """A package of the 'student' loaded with the rule: its module, as the worker loads it."""
    root = tmp_path_factory.mktemp("own")
    (root / "lookups_own").mkdir()
    (root / "lookups_own" / "objects.py").write_text(OWN)
    package = Package.load(root, "lookups_own", rule=RULE)
    yield package.objects
    for name in [m for m in sys.modules if m.startswith("lookups_own")]:
        del sys.modules[name]


def outcome(call) -> str:
    """'refused' (by the rule, with the student's place), 'failed' (by itself: no such attribute)
    or 'done' (the lookup returned, the change was made)."""
    try:
        call()
    except ContractError as error:
        assert error.what == "refused_lookup" and error.params["where"].startswith("lookups_own/objects.py, line")
        return "refused"
    except (AttributeError, TypeError, RuntimeError):
        return "failed"
    return "done"


def refused(call) -> bool:
    return outcome(call) == "refused"


def handed_over(call) -> bool:
    return outcome(call) == "done"


# ---------------------------------------------------------------------------- the same rule


def objects(own):
    """Objects graded code may hold: its own, the libraries' (tensors, storages, arrays, layers,
    modules), classes of both."""
    return {
        "own object": own.Plain(),
        "own layer": own.Layer(),
        "own class": own.Plain,
        "own module": own,
        "tensor": torch.zeros(2, requires_grad=True),
        "storage": torch.zeros(2).untyped_storage(),
        "array": np.zeros(2),
        "library layer": torch.nn.Linear(2, 2),
        "torch": torch,
        "functional": torch.nn.functional,
        "numpy": np,
        "sys": sys,
        "library class": torch.nn.Linear,
        "function": torch.nn.functional.softmax,
    }


NAMES = sorted(
    (
        source_policy.DUNDERS
        | {"__dict__", "__globals__", "__code__", "__subclasses__", "__array_interface__", "__getattr__", "__self__"}
        | {"__func__", "__closure__", "__builtins__", "__mro__", "__base__", "__init_subclass__", "__reduce_ex__"}
        | set(library.private_owners())
        | source_policy.FRAME_ATTRIBUTES
        | source_policy.GLOBAL_DENY
        | {"size", "label", "proj", "k_cache", "_length", "_values", "_step", "shape", "softmax", "stdout", "modules"}
        | {"path", "nn", "functional", "linalg", "_C", "ops", "jit", "ctypes", "lib", "fromfile", "load", "exec"}
    )
    - {"__class__"}  # refused in the code for where it leads (`x.__class__.__class__`): its own test below
)


def refused_in_code(name: str) -> bool:
    """Whether the source policy refuses `x.<name>` for an object it cannot see."""
    return bool(findings(f"def f(x):\n    return x.{name}\n"))


OWN_LABELS = {"own object", "own layer", "own class", "own module"}


def own_defined(target, name: str) -> bool:
    """Whether the student's own code defined `name` on its own object, class or module."""
    if isinstance(target, type):
        classes = [k for k in target.__mro__ if k.__module__.startswith("lookups_own")]
        return any(name in vars(k) for k in classes)
    if name in getattr(target, "__dict__", {}) and name not in library.module_state():
        return True
    return own_defined(type(target), name) if not isinstance(target, type(sys)) else False


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_name_refused_in_the_code_is_refused_at_run_time(own, data):
    """What the source rule refuses for an object it cannot see, the run-time rule never hands
    over from a library's object, module or class, nor from the student's own unless its own
    code defined it there (it knows the object: a private name of the student's own is the
    student's; a name that might be a tensor's, in the code, is not one here); what the source
    rule refuses on a library module the run-time rule refuses there, and what it accepts there
    the run-time rule accepts."""
    table = objects(own)
    name = data.draw(st.sampled_from(NAMES))
    label = data.draw(st.sampled_from(sorted(table)))
    target = table[label]
    modules = {"torch": "torch", "functional": "torch.nn.functional", "numpy": "numpy", "sys": "sys"}
    if refused_in_code(name) and label not in modules:  # a library module: as the code names it, below
        if label not in OWN_LABELS or not own_defined(target, name) or library.is_dunder(name):
            assert not handed_over(lambda: own.read(target, name)), f"{label}.{name} read"
        if label not in OWN_LABELS and name not in source_policy.DEFINABLE_DUNDERS:
            assert not handed_over(lambda: own.write(target, name, None)), f"{label}.{name} written"
    if label in modules and hasattr(target, name):
        dotted = modules[label]
        in_code = bool(findings(f"import {dotted}\nx = {dotted}.{name}\n"))
        assert in_code == refused(lambda: own.read(target, name)), f"{dotted}.{name}"


def test_a_private_name_inherited_from_a_library_class_is_the_library_s(own):
    """The student's layer inherits nn.Module's class attributes: their private names are
    torch's, on the student's objects as on torch's (a draw of the property above found it)."""
    layer = own.Layer()
    for name in ("_version", "_call_impl", "_apply", "_get_name"):
        assert refused(lambda name=name: own.read(layer, name)), name
        assert refused(lambda name=name: own.read(type(layer), name)), name
    assert own.read(layer, "_step") == 0  # its own private name stays its own


def test_the_student_s_own_objects_answer_computed_names(own):
    plain, layer = own.Plain(), own.Layer()
    assert own.read(plain, "si" + "ze") == 3 and own.read(plain, "_length") == 0
    assert own.read(plain, "_values") is None  # also a private name of torch's tensors: here the object's own
    assert own.read(layer, "k_" + "cache").shape == (2,) and own.read(layer, "_step") == 0
    assert own.read(layer, "missing", 7) == 7
    own.write(plain, "_length", 5)
    own.write(layer, "k_cache", torch.ones(2))
    own.remove(plain, "_values")
    assert plain._length == 5 and layer.k_cache.sum() == 2 and not hasattr(plain, "_values")
    assert own.kind(plain) is own.Plain and own.kind(torch.zeros(1)) is torch.Tensor
    assert own.read(torch, "softmax") is torch.softmax and own.read(sys, "stdout") is sys.stdout


def test_what_a_lookup_returns_is_checked_too(own):
    """A value a lookup would hand over that graded code could not name: a refused module, a
    metaclass, a built-in that runs code."""
    holder = own.Plain()
    for value in (shutil, type, exec, getattr):
        holder.slot = value
        assert refused(lambda: own.read(holder, "slot")), value
    holder.slot = torch.nn
    assert own.read(holder, "slot") is torch.nn


def test_type_gives_the_type_of_an_object_never_of_a_class(own):
    assert refused(lambda: own.kind(own.Plain))  # type(cls): a metaclass, a maker of classes
    assert refused(lambda: own.kind(torch.Tensor))
    assert refused(lambda: own.read(own.Plain, "__class__")) and refused(lambda: own.read(torch.Tensor, "__class__"))
    assert own.read(own.Plain(), "__class__") is own.Plain and own.read(np.zeros(1), "__class__") is np.ndarray


def test_a_library_s_modules_classes_and_functions_are_not_changed(own):
    for target in (torch, torch.nn.Linear, torch.nn.functional.softmax, torch.softmax, np):
        assert refused(lambda target=target: own.write(target, "patched", 1)), target
    layer = torch.nn.Linear(2, 2)
    own.write(layer, "note", 1)  # an object the code made: its own
    assert layer.note == 1


def test_a_str_subclass_cannot_show_the_guard_one_name_and_getattr_another(own):
    class Sly(str):
        def startswith(self, *args):
            return False

    with pytest.raises(TypeError):
        own.read(own.Plain(), Sly("__dict__"))


# ---------------------------------------------------------------------------- escape attempts

# A refused thing (object, name) and ways to spell the name so that no literal holds it.
TARGETS = [
    ("object", "__dict__"),
    ("layer", "__dict__"),
    ("object", "__init_subclass__"),
    ("method", "__func__"),
    ("method", "__globals__"),
    ("function", "__globals__"),
    ("class", "__subclasses__"),
    ("class", "__class__"),
    ("layer", "_buffers"),
    ("layer", "_modules"),
    ("storage", "_new_with_weak_ptr"),
    ("storage", "_set_cdata"),
    ("tensor", "_cdata"),
    ("torch", "_C"),
    ("torch", "ops"),
    ("torch", "library"),
    ("numpy", "fromfile"),
    ("numpy", "ctypeslib"),
    ("sys", "modules"),
    ("sys", "_getframe"),
    ("generator", "gi_frame"),
]
SPELLINGS = {
    "variable": "name = {name!r}\n    return getattr(target, name)",
    "parameter": "return getattr(target, pick({name!r}))",
    "chr": "return getattr(target, ''.join(chr(c) for c in {codes!r}))",
    "reversed": "return getattr(target, {backwards!r}[::-1 if target is not None else 1])",
    "format": "return getattr(target, '{{}}{{}}'.format({head!r}, {tail!r}))",
    "bytes": "return getattr(target, bytes({codes!r}).decode())",
    "dict": "return getattr(target, {{'k': {name!r}}}['k'])",
    "setattr": "setattr(target, pick({name!r}), None)",
    "delattr": "delattr(target, pick({name!r}))",
    "default": "return getattr(target, pick({name!r}), None)",
}


def attempt_source(name: str, spelling: str) -> str:
    body = SPELLINGS[spelling].format(
        name=name, codes=[ord(c) for c in name], backwards=name[::-1], head=name[:3], tail=name[3:]
    )
    return f"def pick(name):\n    return name\n\n\ndef attempt(target):\n    {body}\n"


def holders(own):
    def generator():
        yield 1

    layer = own.Layer()
    return {
        "object": own.Plain(),
        "layer": layer,
        "method": layer.forward,
        "function": own.read,
        "class": own.Plain,
        "storage": torch.zeros(2).untyped_storage(),
        "tensor": torch.zeros(2),
        "torch": torch,
        "numpy": np,
        "sys": sys,
        "generator": generator(),
    }


@pytest.fixture(scope="module")
def attempts(tmp_path_factory):
    """Every (target, spelling) attempt as a module of a package loaded with the rule."""
    root = tmp_path_factory.mktemp("attempts")
    (root / "lookups_attempts").mkdir()
    sources = {}
    for index, (holder, name) in enumerate(TARGETS):
        for spelling in SPELLINGS:
            source = attempt_source(name, spelling)
            module = f"a{index}_{spelling}"
            (root / "lookups_attempts" / f"{module}.py").write_text(source)
            sources[(holder, name, spelling)] = (module, source)
    package = Package.load(root, "lookups_attempts", rule=RULE)
    yield package, sources
    for name in [m for m in sys.modules if m.startswith("lookups_attempts")]:
        del sys.modules[name]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_escape_attempt_is_refused_in_the_code_or_where_its_name_is_known(own, attempts, data):
    package, sources = attempts
    holder, name = data.draw(st.sampled_from(TARGETS))
    spelling = data.draw(st.sampled_from(sorted(SPELLINGS)))
    module, source = sources[(holder, name, spelling)]
    if findings(source):
        return  # refused before it runs (a name the reader can build from literals)
    target = holders(own)[holder]
    function = getattr(package, module).attempt
    try:
        function(target)
    except ContractError as error:
        assert error.what == "refused_lookup"
        return
    except (AttributeError, TypeError):
        pytest.fail(f"{holder}.{name} by {spelling}: the attempt ran unguarded (failed only by itself)")
    pytest.fail(f"{holder}.{name} by {spelling}: not refused\n{source}")


def test_every_spelling_of_every_escape_was_accepted_by_the_code_rule_before(attempts):
    """On the rule this replaced (a computed name refused in the code), every attempt above was
    refused statically; now most are accepted there and left to the run-time rule, so the test
    above is what holds them (a check that the attempts really are run-time ones)."""
    _, sources = attempts
    left_to_run_time = [key for key, (_, source) in sources.items() if not findings(source)]
    assert len(left_to_run_time) >= len(sources) // 2


# ---------------------------------------------------------------------------- correct code, rewritten


class _OwnLookups(ast.NodeTransformer):
    """Reads of `self.name` as lookups by a name made at run time (`how`: getattr of a name a
    helper returns, an f-string, a join of pieces)."""

    def __init__(self, how: str):
        self.how = how

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if not (isinstance(node.value, ast.Name) and node.value.id == "self" and isinstance(node.ctx, ast.Load)):
            return node
        name = {
            "getattr": f"_name({node.attr!r})",
            "fstring": f"f'{{_PREFIX}}{node.attr}'",
            "join": f"''.join([_name({node.attr[:1]!r}), {node.attr[1:]!r}])",
        }[self.how]
        return ast.copy_location(ast.parse(f"getattr(self, {name})", mode="eval").body, node)


class _OwnStores(ast.NodeTransformer):
    """`self.name = value` as `setattr(self, <a name made at run time>, value)`."""

    def visit_Assign(self, node):
        target = node.targets[0]
        if (
            len(node.targets) == 1
            and isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            call = ast.parse(f"setattr(self, _name({target.attr!r}), None)", mode="eval").body
            call.args[2] = node.value
            return ast.copy_location(ast.Expr(call), node)
        return node


class _Closures(ast.NodeTransformer):
    """Each module-level function made by a factory: `def _make_f(): def f(...): ...; return f`."""

    def visit_Module(self, node):
        body = []
        for statement in node.body:
            if isinstance(statement, ast.FunctionDef) and not statement.name.startswith("_"):
                factory = ast.parse(
                    f"def _make_{statement.name}():\n    pass\n\n{statement.name} = _make_{statement.name}()\n"
                )
                factory.body[0].body = [statement, ast.parse(f"return {statement.name}").body[0]]
                body.extend(factory.body)
            else:
                body.append(statement)
        node.body = body
        return node


class _CallWrappers(ast.NodeTransformer):
    """Each module-level function behind a small class whose __call__ calls it."""

    def visit_Module(self, node):
        body = []
        for statement in node.body:
            body.append(statement)
            if isinstance(statement, ast.FunctionDef) and not statement.name.startswith("_"):
                name = statement.name
                statement.name = f"_{name}_body"
                body.extend(
                    ast.parse(
                        f"class _{name}_call:\n"
                        f"    def __call__(self, *args, **kwargs):\n"
                        f"        return _{name}_body(*args, **kwargs)\n\n"
                        f"{name} = _{name}_call()\n"
                    ).body
                )
        node.body = body
        return node


REWRITES = {
    "getattr": lambda tree: _OwnLookups("getattr").visit(tree),
    "fstring": lambda tree: _OwnLookups("fstring").visit(tree),
    "join": lambda tree: _OwnLookups("join").visit(tree),
    "setattr": lambda tree: _OwnStores().visit(tree),
    "closures": lambda tree: _Closures().visit(tree),
    "call_wrappers": lambda tree: _CallWrappers().visit(tree),
}
HELPERS = "\n\ndef _name(text):\n    return text\n\n\n_PREFIX = ''\n"


def rewrite(source: str, how: str) -> str:
    """The reference's file rewritten into ordinary Python on its own objects (issue 32): its own
    attributes read or set by names made at run time, its functions made by factories or behind
    __call__ wrappers."""
    tree = REWRITES[how](ast.parse(source))
    return ast.unparse(ast.fix_missing_locations(tree)) + HELPERS


@pytest.mark.parametrize("how", list(REWRITES))
def test_correct_code_rewritten_into_ordinary_python_on_its_own_objects_is_accepted(how, tmp_path):
    """Each reference file rewritten: the source policy accepts it, and loaded with the rule it
    imports and computes what the reference computes (its padding and attention functions, its
    projection and cache objects; grading every step is the slow test below)."""
    changed = 0
    for package in ("mha", "kv_cache"):
        for path in sorted((SOLUTIONS / package).glob("*.py")):
            original = path.read_text()
            rewritten = rewrite(original, how)
            changed += rewritten != ast.unparse(ast.parse(original)) + HELPERS
            assert findings(rewritten) == (), (path.name, findings(rewritten))
            (tmp_path / f"rewritten_{how}" / package).mkdir(parents=True, exist_ok=True)
            (tmp_path / f"rewritten_{how}" / package / path.name).write_text(rewritten)
    assert changed >= 3
    loaded = Package.load(tmp_path / f"rewritten_{how}", "mha", name=f"rewritten_{how}", rule=RULE)
    reference = Package.load(SOLUTIONS, "mha", name=f"reference_for_{how}")
    try:
        torch.manual_seed(0)
        q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
        for got, expected in zip(
            loaded.attention.scaled_dot_product_attention(q, k, v),
            reference.attention.scaled_dot_product_attention(q, k, v),
            strict=True,
        ):
            torch.testing.assert_close(got, expected)
        torch.manual_seed(1)
        mine = loaded.projection.QKVProjection(16)
        torch.manual_seed(1)
        theirs = reference.projection.QKVProjection(16)
        x = torch.randn(2, 5, 16)
        for got, expected in zip(mine(x), theirs(x), strict=True):
            torch.testing.assert_close(got, expected)
    finally:
        for name in [m for m in sys.modules if m.startswith((f"rewritten_{how}", f"reference_for_{how}"))]:
            del sys.modules[name]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["join", "setattr", "closures"])
def test_correct_code_rewritten_into_ordinary_python_on_its_own_objects_keeps_full_marks(how, tmp_path):
    """Graded as an instructor grades (the sandboxed worker, the rule in force): full marks."""
    from autograder.engine.course import config as grading_config
    from autograder.engine.judge.runner import grade

    for package in ("mha", "kv_cache"):
        shutil.copytree(SOLUTIONS / package, tmp_path / package / package)
        for path in sorted((tmp_path / package / package).glob("*.py")):
            path.write_text(rewrite(path.read_text(), how))
    for assignment in grading_config.load_all():
        result = grade(tmp_path / assignment.package, assignment, reference=SOLUTIONS, seed=1, isolate=True)
        lost = [
            (step.id, step.score, [c.message for c in step.checks if c.message][:1])
            for step in result.steps
            if step.score < step.max_score - 1e-9
        ]
        assert lost == [], lost


def test_what_is_the_student_s_own_is_known_by_identity_not_by_names_it_can_set(own):
    """functools.update_wrapper copies `__module__` and `__name__` onto what it is given: a
    library's module or function named like the student's package stays a library's."""
    import types as python_types

    impostor = python_types.ModuleType("lookups_own")  # a module named like the package
    impostor._hidden = 1
    assert refused(lambda: own.read(impostor, "_hidden"))
    function = torch.nn.functional.multi_head_attention_forward
    saved = function.__module__
    function.__module__ = "lookups_own.objects"
    try:
        assert refused(lambda: own.write(function, "patched", 1))
    finally:
        function.__module__ = saved
    assert own.read(own, "Plain") is own.Plain  # the student's own module and class
    own.write(own.Plain, "extra", 1)
    assert own.Plain.extra == 1


def test_another_file_s_test_code_cannot_be_reached_by_a_name_made_at_run_time(own):
    """The judge does not read the body of a test function nothing in its file names; from
    another file, a name made at run time must not reach it either (issue 31's red team)."""
    assert refused(lambda: own.read(own, "test_" + "helper"))
    assert refused(lambda: own.read(own, "Test" + "Case"))
