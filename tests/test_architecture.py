"""The layering rules of ARCHITECTURE.md: imports flow routes -> engine -> sandbox, and the engine,
the sandbox and the routes name no assignment (everything assignment-specific is in its folder)."""

import ast
import re
from pathlib import Path

import pytest

from autograder import KIT
from autograder.engine import assignment as assignments

LAYERS = ("routes", "engine", "sandbox")
# What each layer may import from the kit (besides itself and autograder's top-level helpers).
ALLOWED = {"routes": {"engine", "sandbox"}, "engine": {"sandbox"}, "sandbox": set()}


def kit_imports(source: str) -> set:
    """The autograder subpackages a module's source imports ('engine', 'assignments', ...)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "autograder" and len(parts) > 1 and parts[1] in (*LAYERS, "assignments"):
                found.add(parts[1])
    return found


def named_assignments(source: str, ids) -> list:
    """(line, text) of each identifier or string (docstrings and comments aside) that names one
    of the assignment ids `ids` as a word of its own (the kit's name, mha-lab, is not one)."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    }
    word = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, ids)) + r")(?![\w-])")
    hits = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
        elif isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.arg)):
            text = getattr(node, "name", None) or getattr(node, "arg", None)
        if text and word.search(text):
            hits.append((node.lineno, text[:60]))
    return hits


def layer_modules(layer):
    return sorted((KIT / "autograder" / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", LAYERS)
def test_imports_flow_one_way(layer):
    wrong = {}
    for path in layer_modules(layer):
        bad = kit_imports(path.read_text()) - ALLOWED[layer] - {layer}
        if bad:
            wrong[str(path.relative_to(KIT))] = sorted(bad)
    assert not wrong, f"imports against the layering (routes -> engine -> sandbox): {wrong}"


@pytest.mark.parametrize("layer", LAYERS)
def test_no_layer_names_an_assignment(layer):
    ids = assignments.known()
    hits = {str(path.relative_to(KIT)): named_assignments(path.read_text(), ids) for path in layer_modules(layer)}
    hits = {file: found for file, found in hits.items() if found}
    assert not hits, f"assignment ids named outside autograder/assignments/: {hits}"


def test_the_rules_catch_planted_violations():
    """The two checks above find what they look for (else they could never fail)."""
    assert kit_imports("from autograder.engine.runner import grade\nimport autograder.routes.cli") == {
        "engine",
        "routes",
    }
    assert kit_imports("from autograder.assignments.mha.checks import x") == {"assignments"}
    assert kit_imports("from autograder import KIT\nimport torch") == set()
    planted = 'PACKAGE = "mha"\nx = root / "mha/heads.py"\ndef f(mha):\n    return mha\n'
    assert [line for line, _ in named_assignments(planted, ["mha"])] == [1, 2, 3, 4]
    clean = '"""About mha/: a docstring may say it."""\nNAME = "mha-lab"\nENV = "MHA_LAB_CACHE"\n'
    assert named_assignments(clean, ["mha"]) == []


def test_every_assignment_folder_is_complete():
    """What the engine expects of an assignment folder (ARCHITECTURE.md, 'Adding an assignment')."""
    from autograder.engine import config as grading_config

    for config in grading_config.load_all():
        folder = assignments.folder(config.id)
        assert (folder / "checks" / "__init__.py").is_file()
        assert (KIT / "solutions" / config.package).is_dir(), f"no reference solutions/{config.package}/"
        assert (KIT / "assignments" / config.package).is_dir(), f"no skeleton assignments/{config.package}/"
        assert {step.id for step in config.steps} <= set(config.step_modules())


def module_imports(path: Path) -> set:
    """The autograder modules a file imports at its top level (imports inside functions are
    deliberate late imports and are left out)."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("autograder.")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("autograder"):
            found |= {f"{node.module}.{alias.name}" for alias in node.names} | {node.module}
    return found


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles():
    root = KIT / "autograder"
    names = {
        ".".join(("autograder", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__"): path
        for path in root.rglob("*.py")
    }
    graph = {
        name: {target for target in module_imports(path) if target in names and target != name}
        for name, path in names.items()
    }
    assert cycles(graph) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check itself works
