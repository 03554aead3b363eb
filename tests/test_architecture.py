"""The layering rules of ARCHITECTURE.md: imports flow routes -> publish -> engine -> sandbox, a
route imports no other route (routes are leaves; what two routes share is publish/'s), what runs beside
student code (harness/, an assignment's observers/) imports nothing of the judge, no modules import
each other in a circle, an assignment's check modules do not import one another, and the engine,
the sandbox and the routes name no assignment (everything assignment-specific is in its folder).

Every import counts, wherever it stands: a late import inside a function closes a circle as surely
as one at the top (it only closes it later). A late import is kept only where it saves start-up
time (torch, nbformat, a command's own modules), and it still flows downward.
"""

import ast
import re
from pathlib import Path

import pytest

from autograder import KIT
from autograder.engine.checks import messages
from autograder.engine.course import assignment as assignments

LAYERS = ("routes", "publish", "engine", "harness", "sandbox")
# What each part of the kit may import, besides itself and autograder's own top-level helpers:
# routes -> publish -> engine -> sandbox; harness/ (beside student code) only the sandbox's plain-data wire,
# and an assignment's observers/ (which the worker loads) the same; its checks and mistakes the
# engine's check helpers and what the harness measures.
ALLOWED = {
    "routes": {"publish", "engine", "harness", "sandbox"},
    "publish": {"engine", "harness", "sandbox"},
    "engine": {"harness", "sandbox"},
    "harness": {"sandbox"},
    "sandbox": set(),
    "observers": {"harness", "sandbox"},
    "assignments": {"engine", "harness", "sandbox", "observers"},
}


# The engine's folders, bottom up: each imports only those before it (engine/__init__.py).
ENGINE_FOLDERS = ("checks", "scan", "course", "mistakes", "judge", "operations", "generate")


def part_of(module: str) -> str:
    """The part of the kit a module belongs to: one of LAYERS, 'observers' (an assignment's
    observers/), 'assignments' (the rest of an assignment's folder), or 'top' (autograder's own
    modules: KIT, cache_base, __main__)."""
    parts = module.split(".")
    if len(parts) > 3 and parts[1] == "assignments" and parts[3] == "observers":
        return "observers"
    if len(parts) > 1 and parts[1] in (*LAYERS, "assignments") and (len(parts) > 2 or parts[1] != "__main__"):
        return parts[1]
    return "top"


def module_name(path: Path, root: Path, package: str) -> str:
    return ".".join((package, *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")


def imports_of(source: str, name: str, is_package: bool, known: set) -> list:
    """(module, line) of every import in `source` (the module `name`) of a module in `known`,
    wherever it stands (inside functions and conditions too). `from a import b` names a.b where
    that is a module, else a; relative imports are resolved; `import a.b.c` names the nearest
    module of `known`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".") if is_package else name.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.append((target, node.lineno))
    return found


def import_graph(root: Path, package: str = "autograder") -> dict:
    """{module: {module it imports: [lines]}} for every module under `root` (the directory of
    `package`), counting every import wherever it stands."""
    paths = {module_name(path, root, package): path for path in sorted(root.rglob("*.py"))}
    graph = {}
    for name, path in paths.items():
        edges = graph.setdefault(name, {})
        for target, line in imports_of(path.read_text(), name, path.name == "__init__.py", set(paths)):
            edges.setdefault(target, []).append(line)
    return graph


def late_imports(root: Path, package: str = "autograder") -> list:
    """(module, line) of each import of `package` that stands inside a function, class or block."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:
                names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if getattr(node, "level", 0) or any(n == package or n.startswith(package + ".") for n in names):
                    found.append((module_name(path, root, package), node.lineno))
    return found


def against_the_layers(graph: dict) -> list:
    """'module (line n) -> module' for each import from one part of the kit into a part it may
    not import (ALLOWED), and for each import of one assignment's folder from another's."""
    wrong = []
    for name, edges in graph.items():
        source = part_of(name)
        if source not in ALLOWED:
            continue
        for target, lines in edges.items():
            destination = part_of(target)
            allowed = destination == "top" or destination == source or destination in ALLOWED[source]
            if source in ("assignments", "observers") and destination in ("assignments", "observers"):
                allowed = allowed and name.split(".")[2:3] == target.split(".")[2:3]  # its own folder only
            if not allowed:
                wrong.append(f"{name} (line {lines[0]}) -> {target}")
    return sorted(wrong)


# Routes that import others, each with its reason (none: routes/cli/ runs its commands itself).
ROUTES_THAT_DISPATCH = {}


def route_of(module: str) -> "str | None":
    """The route a module belongs to: the module or package right under routes/ (report/ is one
    route), None outside routes/ and for routes/__init__."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "routes" else None


def routes_importing_routes(graph: dict, dispatching: dict = None) -> list:
    """'module (line n) -> module' for each import from one route into another (late imports
    count): a route is a leaf, and what two routes share belongs to publish/ or the engine.
    `dispatching`: routes allowed to import others (ROUTES_THAT_DISPATCH)."""
    dispatching = ROUTES_THAT_DISPATCH if dispatching is None else dispatching
    wrong = []
    for name, edges in graph.items():
        route = route_of(name)
        if route is None or route in dispatching:
            continue
        for target, lines in edges.items():
            other = route_of(target)
            if other is not None and other != route:
                wrong.append(f"{name} (line {lines[0]}) -> {target}")
    return sorted(wrong)


def up_the_engine(graph: dict) -> list:
    """'module (line n) -> module' for each import from one of the engine's folders into a later
    one of ENGINE_FOLDERS (the judge pipeline imports the scan, never the other way), and for
    each module that stands in the engine outside those folders."""
    wrong = []
    for name, edges in graph.items():
        parts = name.split(".")
        if parts[1:2] != ["engine"] or len(parts) < 3:
            continue
        if parts[2] not in ENGINE_FOLDERS:
            wrong.append(f"{name}: not in one of the engine's folders")
            continue
        for target, lines in edges.items():
            other = target.split(".")
            in_engine = other[1:2] == ["engine"] and len(other) > 2 and other[2] in ENGINE_FOLDERS
            if in_engine and ENGINE_FOLDERS.index(other[2]) > ENGINE_FOLDERS.index(parts[2]):
                wrong.append(f"{name} (line {lines[0]}) -> {target}")
    return sorted(wrong)


def checks_importing_checks(graph: dict) -> list:
    """'module (line n) -> module' for each check module of an assignment (checks/<step>.py) that
    imports another as a library; shared helpers live in a `_`-prefixed module of checks/ (or the
    engine), so that each step's module stays one step's checks."""
    wrong = []
    for name, edges in graph.items():
        parts = name.split(".")
        if len(parts) != 5 or parts[1] != "assignments" or parts[3] != "checks":
            continue
        for target, lines in edges.items():
            other = target.split(".")
            if other[:4] == parts[:4] and len(other) == 5 and not other[4].startswith("_"):
                wrong.append(f"{name} (line {lines[0]}) -> {target}")
    return sorted(wrong)


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


def cycle_paths(graph: dict) -> list:
    """One circle of imports per strongly connected component of `graph` (import_graph), as
    'a (line n) -> b (line m) -> a': the line of each import that closes it."""
    found = []
    for component in cycles({name: set(edges) for name, edges in graph.items()}):
        members, start = set(component), component[0]
        # The shortest way back to `start` inside the component (breadth first): a circle.
        previous, frontier = {start: None}, [start]
        while start not in [t for n in frontier for t in graph[n]]:
            reached = []
            for node in frontier:
                for target in sorted(graph[node]):
                    if target in members and target not in previous:
                        previous[target] = node
                        reached.append(target)
            frontier = reached
        last = next(n for n in frontier if start in graph[n])
        path = [last]
        while previous[path[-1]] is not None:
            path.append(previous[path[-1]])
        path = [*reversed(path), start]
        found.append(
            " -> ".join(f"{a} (line {graph[a][b][0]})" for a, b in zip(path, path[1:], strict=False)) + f" -> {start}"
        )
    return found


def docstrings(tree: ast.Module) -> set:
    """The ids of the string constants of `tree` that are docstrings (a module's, class's or
    function's): prose, which may name anything."""
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    }


def named(source: str, words) -> list:
    """(line, text) of each identifier or string (docstrings and comments aside) that names one
    of `words` (assignment ids, step ids) as a word of its own (the kit's name, mha-lab, is not
    one)."""
    tree = ast.parse(source)
    prose = docstrings(tree)
    word = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, words)) + r")(?![\w-])")
    hits = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            text = node.value
        elif isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute) and ast.unparse(node.value) != "torch.backends":
            text = node.attr  # torch.backends.mha is torch's own module, named like an assignment
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.arg)):
            text = getattr(node, "name", None) or getattr(node, "arg", None)
        elif isinstance(node, ast.keyword):
            text = node.arg
        if text and word.search(text):
            hits.append((node.lineno, text[:60]))
    return hits


def code_strings(source: str) -> set:
    """Every string constant of a module but its docstrings."""
    tree = ast.parse(source)
    prose = docstrings(tree)
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
    }


def spelling_owned_ids(sources: dict, owned: dict) -> list:
    """'file: id (the assignment's)' for each string of `sources` ({file: text}, code outside the
    assignments' folders) that is a message id of `owned` ({id: the assignment whose catalog alone
    holds it}): the engine reads what an assignment owns through the assignment, never by name."""
    return sorted(
        f"{file}: {text} ({owned[text]}'s)"
        for file, source in sources.items()
        for text in code_strings(source) & set(owned)
    )


def owned_ids_in_the_engine(engine_ids: set, assignment_sources: dict, other_sources: dict) -> list:
    """'id: spelled only by <assignment>' for each id of the engine's catalog (`engine_ids`) that the
    code of one assignment spells ({assignment: {file: text}}) and no other code (`other_sources`,
    {file: text}): a message only an assignment raises is that assignment's, in its own catalog."""
    elsewhere = set().union(*(code_strings(source) for source in other_sources.values()))
    found = []
    for assignment_id, files in sorted(assignment_sources.items()):
        spelled = set().union(*(code_strings(source) for source in files.values()))
        others = set().union(
            *(code_strings(s) for a, f in assignment_sources.items() if a != assignment_id for s in f.values())
        )
        found += [f"{i}: spelled only by {assignment_id}" for i in sorted(engine_ids & spelled - elsewhere - others)]
    return found


def layer_modules(layer):
    return sorted((KIT / "autograder" / layer).rglob("*.py"))


def test_imports_flow_one_way():
    """routes -> engine -> sandbox; harness/ and observers/ import nothing of the judge; no
    assignment imports another's folder. Late imports inside functions count."""
    wrong = against_the_layers(import_graph(KIT / "autograder"))
    assert not wrong, "imports against the layering (routes -> engine -> sandbox):\n" + "\n".join(wrong)


def test_no_route_imports_another():
    """Routes are leaves: what one route shares with another (an artefact, a view, a format) is
    publish/'s or the engine's. Late imports count."""
    wrong = routes_importing_routes(import_graph(KIT / "autograder"))
    assert not wrong, "a route importing another (move what they share to publish/):\n" + "\n".join(wrong)


def test_the_engine_folders_import_downward():
    """checks <- scan <- course <- mistakes <- judge <- operations, build: late imports count."""
    wrong = up_the_engine(import_graph(KIT / "autograder"))
    assert not wrong, "imports up the engine's folders (ENGINE_FOLDERS, bottom up):\n" + "\n".join(wrong)


def uncommented_late_imports(root: Path, package: str = "autograder") -> list:
    """'module (line n)' of each late import whose line says nothing of why it is late (a
    comment: whose start-up it keeps light, as "# late: not at the start of `pytest
    assignments/`")."""
    found = []
    for name, line in late_imports(root, package):
        path = root.joinpath(*name.split(".")[1:]).with_suffix(".py")
        if not path.is_file():
            path = root.joinpath(*name.split(".")[1:], "__init__.py")
        text = path.read_text()
        node = next(
            n for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.Import, ast.ImportFrom)) and n.lineno == line
        )
        if "#" not in "".join(text.splitlines()[line - 1 : node.end_lineno]):
            found.append(f"{name} (line {line})")
    return found


def test_a_late_import_says_why_it_is_late():
    """A late import stays only where it keeps an entry point's start-up light, and says so."""
    assert uncommented_late_imports(KIT / "autograder") == []


def test_no_import_cycles():
    """No circle of imports in the kit, counting the late ones."""
    found = cycle_paths(import_graph(KIT / "autograder"))
    assert found == [], "import circles:\n" + "\n".join(found)


def test_check_modules_do_not_import_each_other():
    wrong = checks_importing_checks(import_graph(KIT / "autograder"))
    assert not wrong, "a step's checks imported by another step's (move the helper to checks/_<name>.py):\n" + (
        "\n".join(wrong)
    )


@pytest.mark.parametrize("layer", LAYERS)
def test_no_layer_names_an_assignment(layer):
    ids = assignments.known()
    hits = {str(path.relative_to(KIT)): named(path.read_text(), ids) for path in layer_modules(layer)}
    hits = {file: found for file, found in hits.items() if found}
    assert not hits, f"assignment ids named outside autograder/assignments/: {hits}"


# Modules that hold data every stage and route reads: they import nothing of the judge (nor of
# anything above it), so that what reads them never depends on the stages that make them.
DATA = {
    "autograder.engine.judge.results": "the grading result's dataclasses and their JSON",
}


def data_importing_the_judge(graph: dict, data: dict) -> list:
    """'module (line n) -> module' for each import of a DATA module into the judge, the engine's
    folders after it, publish/ or routes/ (late imports count)."""
    above = ("autograder.engine.judge", "autograder.engine.operations", "autograder.engine.generate")
    above += ("autograder.publish", "autograder.routes")
    wrong = []
    for name in data:
        for target, lines in graph.get(name, {}).items():
            if target.startswith(above):
                wrong.append(f"{name} (line {lines[0]}) -> {target}")
    return sorted(wrong)


def test_the_data_sits_at_the_bottom():
    """results.py holds the results and their JSON; the table (table.py), the files
    (result_files.py) and the feedback they show sit above it, never inside."""
    assert data_importing_the_judge(import_graph(KIT / "autograder"), DATA) == []


# Class names that two modules of the kit's own layers (not the assignments' folders, whose steps
# may each have a `RandomSizes`) still use for two things, each with why it is left (reviewed).
SHARED_CLASS_NAMES = {
    "Record": "mistakes/diagnosis.py (a check's observation) and harness/phases.py (CPU per phase, "
    "issue 34's area): to rename the harness's",
}


def classes_named_twice(root: Path, shared: dict) -> list:
    """'Name: file, file' for each class name that two modules under `root` (autograder/) outside
    the assignments' folders define at their top, but those `shared` lists: one word, one
    meaning (one Mistake, one verdict)."""
    where = {}
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] == "assignments":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(path.relative_to(root).as_posix())
    return sorted(
        f"{name}: {', '.join(files)}" for name, files in where.items() if len(files) > 1 and name not in shared
    )


def test_one_class_name_one_meaning():
    assert classes_named_twice(KIT / "autograder", SHARED_CLASS_NAMES) == []
    twice = classes_named_twice(KIT / "autograder", {})
    one = [name for name in SHARED_CLASS_NAMES if not any(line.startswith(f"{name}: ") for line in twice)]
    assert one == [], "SHARED_CLASS_NAMES entries that are one class now"


def test_the_data_and_naming_rules_catch_planted_violations(tmp_path):
    root = tmp_path / "autograder"
    plant(
        root,
        {
            "__init__.py": "",
            "engine/__init__.py": "",
            "engine/judge/__init__.py": "",
            "engine/judge/results.py": "class Mistake:\n    pass\ndef table():\n    from autograder.engine.judge import feedback  # late\n",
            "engine/judge/feedback.py": "class Verdict:\n    pass\n",
            "engine/judge/verdict.py": "class Verdict:\n    pass\n",
            "engine/checks/__init__.py": "",
            "engine/checks/check.py": "class Mistake:\n    pass\n",
            "assignments/a/checks/one.py": "class Values:\n    pass\n",
            "assignments/a/checks/two.py": "class Values:\n    pass\n",
        },
    )
    assert data_importing_the_judge(import_graph(root), DATA) == [
        "autograder.engine.judge.results (line 4) -> autograder.engine.judge.feedback"
    ]
    assert classes_named_twice(root, {}) == [
        "Mistake: engine/checks/check.py, engine/judge/results.py",
        "Verdict: engine/judge/feedback.py, engine/judge/verdict.py",
    ]
    assert classes_named_twice(root, {"Verdict": "reviewed"}) == [
        "Mistake: engine/checks/check.py, engine/judge/results.py"
    ]


# Step ids that are also PyTorch's own words, each where the engine uses it as PyTorch's (reviewed):
# the engine may spell these there, and nowhere else.
PYTORCH_WORDS = {
    (
        "engine/judge/plan.py",
        "cuda",
    ): "PyTorch's device type: what a check requires (check.requires), the simulated device",
    ("engine/judge/remote.py", "cuda"): "the worker names CUDA among its layers when it could initialise it",
    ("engine/generate/fingerprint_build.py", "cuda"): "check.requires: a check that needs a CUDA device",
    (
        "engine/scan/source_policy.py",
        "cuda",
    ): "torch.cuda and torch.backends.cuda: modules of PyTorch's on the allow-list",
    ("engine/scan/source_policy.py", "attention"): "torch.nn.attention: a module of PyTorch's on the allow-list",
}


def every_step_id() -> set:
    """The step ids of every assignment the kit holds, read from their folders (no import)."""
    return {step for assignment_id in assignments.known() for step in assignments.step_ids(assignment_id)}


def engine_sources(root: Path) -> dict:
    """{file under root: text} of the engine's modules (root: autograder/)."""
    return {path.relative_to(root).as_posix(): path.read_text() for path in sorted((root / "engine").rglob("*.py"))}


def spellings(sources: dict, words: set, allowed: dict) -> list:
    """'file (line n): text' for each identifier or string of `sources` ({file: text}) that names
    one of `words`, but where `allowed` ({(file, word): why}) lets that file use the word as
    PyTorch's."""
    found = []
    for file, source in sources.items():
        for line, text in named(source, sorted(words)):
            spelled = {w for w in words if re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text)}
            if any((file, w) not in allowed for w in spelled):
                found.append(f"{file} (line {line}): {text}")
    return found


def test_the_engine_names_no_assignment_and_no_step():
    """The engine grades any assignment grading.yml describes: it spells no assignment id and no
    step id (what a step needs is in its assignment's folder), but where a step's id is also
    PyTorch's own word, used as PyTorch's (PYTORCH_WORDS, each entry reviewed and still used)."""
    sources = engine_sources(KIT / "autograder")
    words = set(assignments.known()) | every_step_id()
    assert spellings(sources, words, PYTORCH_WORDS) == []
    unused = [(file, word) for file, word in PYTORCH_WORDS if not spellings({file: sources[file]}, {word}, {})]
    assert unused == [], "PYTORCH_WORDS entries the engine no longer needs"


def catalog_ids(directory: Path, domain: str) -> set:
    return set(messages.catalog("en", ((directory, domain),)))


def kit_sources(outside_assignments: bool) -> dict:
    """{file: text} of the kit's code outside the assignments' folders (or inside them)."""
    root = KIT / "autograder"
    return {
        path.relative_to(KIT).as_posix(): path.read_text()
        for path in sorted(root.rglob("*.py"))
        if (path.relative_to(root).parts[0] == "assignments") != outside_assignments
    }


def test_no_code_outside_an_assignment_spells_its_message_ids():
    """What an assignment owns (its contract failures, the failures that are no evidence, its
    checks' messages) the engine reads through the assignment (engine/course/assignment.py):
    no code outside the assignments' folders spells an id that only an assignment's catalog holds."""
    engine = catalog_ids(messages.GRADER / "locale", "autograder")
    owned = {
        message_id: assignment_id
        for assignment_id in assignments.known()
        for message_id in catalog_ids(assignments.folder(assignment_id) / "locale", "assignment") - engine
    }
    assert spelling_owned_ids(kit_sources(outside_assignments=True), owned) == []


def test_a_message_only_an_assignment_raises_is_in_its_catalog():
    """The engine's catalog holds the engine's words: an id that only one assignment's code spells
    belongs to that assignment's catalog."""
    engine = catalog_ids(messages.GRADER / "locale", "autograder")
    by_assignment = {}
    for file, source in kit_sources(outside_assignments=False).items():
        by_assignment.setdefault(file.split("/")[2], {})[file] = source
    assert owned_ids_in_the_engine(engine, by_assignment, kit_sources(outside_assignments=True)) == []


def test_the_message_rules_catch_planted_violations():
    """The two rules above find what they look for: an engine module spelling an id only an
    assignment's catalog holds, and an id of the engine's catalog that only one assignment spells."""
    engine_code = {
        "engine/evidence.py": 'NOT = {"timeout", "mask_needs_attention"}\n"""Docstring: device_mismatch."""\n'
    }
    owned = {"mask_needs_attention": "mha", "device_mismatch": "mha"}
    assert spelling_owned_ids(engine_code, owned) == ["engine/evidence.py: mask_needs_attention (mha's)"]
    by_assignment = {
        "mha": {"a/mha/cuda.py": 'Fail("device_mismatch")\nFail("timeout")\nFail("shape")\n'},
        "kv": {"a/kv/cache.py": 'Fail("shape")\n'},
    }
    found = owned_ids_in_the_engine({"device_mismatch", "timeout", "shape"}, by_assignment, engine_code)
    assert found == ["device_mismatch: spelled only by mha"]
    planted = {
        "engine/judge/plan.py": 'if step.id == "masking":\n    device = "cuda"\n',
        "engine/judge/feedback.py": 'def f(kv_cache):\n    return g(padding=1, where="mha/heads.py")\n',
    }
    allowed = {("engine/judge/plan.py", "cuda"): "PyTorch's device"}
    assert spellings(planted, {"masking", "cuda", "padding", "mha", "kv_cache"}, allowed) == [
        "engine/judge/plan.py (line 1): masking",
        "engine/judge/feedback.py (line 1): kv_cache",
        "engine/judge/feedback.py (line 2): padding",
        "engine/judge/feedback.py (line 2): mha/heads.py",
    ]


LONG = 400  # lines: a longer module is one of LONG_MODULES, reviewed (ARCHITECTURE.md)
GROWTH = 1.1  # a reviewed module may grow by a tenth before it is reviewed again
# The modules over LONG lines, each reviewed: its lines at review and why it stays one module.
# Split one (one job per file) rather than adding it; review one again where it has grown.
LONG_MODULES = {
    "engine/scan/source_reader.py": (
        938,
        "_Reader is one visitor whose rules share its state (aliases, bound names, built strings)",
    ),
    "sandbox/fork_server.py": (
        801,
        "the server and the judge's handle, two ends of one protocol (issue 34 works here: not split now)",
    ),
    "sandbox/confine.py": (
        771,
        "the layers applied in one order in one fork, each relying on the one before (issue 34: not now)",
    ),
    "engine/scan/source_policy.py": (748, "data: each list of what graded code may use, with its evidence"),
    "engine/mistakes/relations.py": (
        626,
        "the relation families, each a small function in the order relate() tries them",
    ),
    "engine/course/config.py": (
        558,
        "the Assignment dataclasses and the whole-file checks; mostly messages naming key and line",
    ),
    "harness/watch.py": (
        439,
        "the kernels, the modes and the Watch they report to are one mechanism (issue 34: not now)",
    ),
    "harness/fake_cuda.py": (
        497,
        "guard, tensor subclass and dispatch mode make one device; the worker loads it as one unit",
    ),
    "assignments/mha/checks/multi_head_attention.py": (
        494,
        "the integration step's checks share the module's build and load",
    ),
    "routes/pytest_plugin.py": (
        493,
        "pytest meets it through one plugin class and its hooks; the helpers serve those hooks only",
    ),
    "assignments/mha/mistakes/model.py": (
        470,
        "a whole multi-head attention with a knob per known mistake, on the line it changes",
    ),
    "assignments/mha/mistakes/stages.py": (
        410,
        "the module and the steps' functions stage by stage, one scenario per localisation probe",
    ),
    "assignments/kv_cache/mistakes/stages.py": (
        462,
        "the four steps stage by stage, one scenario per localisation probe",
    ),
    "assignments/mha/observers/_projections.py": (
        580,
        "one traced run read several ways (calls, slices, fused blocks, one layer per head)",
    ),
    "engine/mistakes/localise.py": (
        466,
        "one walk over one call's report, sharing its positions and what came from what",
    ),
    "publish/report/html.py": (408, "its catalog: the report's words in two languages, one table"),
}


def long_modules(root: Path, reviewed: dict) -> list:
    """'path (n lines): why' for each module under `root` (autograder/) over LONG lines that is not
    in `reviewed` ({path under root: (lines at review, why)}), or has grown past GROWTH times its
    lines at review; and for each entry of `reviewed` that is no longer over LONG (split: drop it)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name, lines = path.relative_to(root).as_posix(), path.read_text().count("\n")
        if lines > LONG and name not in reviewed:
            found.append(f"{name} ({lines} lines): over {LONG}, not reviewed")
        elif name in reviewed and lines > reviewed[name][0] * GROWTH:
            found.append(f"{name} ({lines} lines): grown from {reviewed[name][0]} since its review")
    for name in reviewed:
        if not (root / name).is_file() or (root / name).read_text().count("\n") <= LONG:
            found.append(f"{name}: no longer over {LONG} lines")
    return found


def test_a_long_module_is_reviewed():
    assert long_modules(KIT / "autograder", LONG_MODULES) == []


def plant(root: Path, files: dict) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_rules_catch_planted_violations(tmp_path):
    """The checks above find what they look for (else they could never fail): a late import up the
    layers, the harness and an observer importing the judge, one assignment importing another's
    folder, one step's checks importing another's."""
    root = tmp_path / "autograder"
    plant(
        root,
        {
            "__init__.py": "",
            "__main__.py": "from autograder.routes import cli\n",
            "routes/__init__.py": "",
            "routes/cli.py": "from autograder import KIT\nfrom autograder.engine.judge.runner import grade\n",
            "routes/notebook.py": "def run():\n    from autograder.routes.report import html  # late\n",
            "routes/report/__init__.py": "",
            "routes/report/html.py": "from autograder.publish import view\n",
            "publish/__init__.py": "",
            "publish/view.py": "from autograder.engine.judge import runner\nfrom autograder.routes import notebook\n",
            "engine/__init__.py": "",
            "engine/judge/runner.py": "def grade():\n    from autograder.routes import cli  # late, and up\n",
            "harness/__init__.py": "",
            "harness/observe.py": "import autograder.engine.judge.runner\n",
            "sandbox/__init__.py": "",
            "sandbox/wire.py": "",
            "assignments/__init__.py": "",
            "assignments/a/__init__.py": "",
            "assignments/a/observers/__init__.py": "",
            "assignments/a/observers/step.py": "from . import _helpers\nfrom autograder.engine.judge import runner\n",
            "assignments/a/observers/_helpers.py": "from autograder.sandbox import wire\n",
            "assignments/a/checks/__init__.py": "",
            "assignments/a/checks/_shared.py": "",
            "assignments/a/checks/one.py": "from ._shared import x\nfrom autograder.assignments.a.observers import step\n",
            "assignments/a/checks/two.py": "from .one import helper\n",
            "assignments/b/__init__.py": "",
            "assignments/b/checks/__init__.py": "",
            "assignments/b/checks/three.py": "from autograder.assignments.a.checks import _shared\n",
        },
    )
    graph = import_graph(root)
    assert graph["autograder.engine.judge.runner"] == {"autograder.routes.cli": [2]}
    assert graph["autograder.assignments.a.observers.step"] == {
        "autograder.assignments.a.observers._helpers": [1],
        "autograder.engine.judge.runner": [2],
    }
    assert against_the_layers(graph) == [
        "autograder.assignments.a.observers.step (line 2) -> autograder.engine.judge.runner",
        "autograder.assignments.b.checks.three (line 1) -> autograder.assignments.a.checks._shared",
        "autograder.engine.judge.runner (line 2) -> autograder.routes.cli",
        "autograder.harness.observe (line 1) -> autograder.engine.judge.runner",
        "autograder.publish.view (line 2) -> autograder.routes.notebook",
    ]
    assert routes_importing_routes(graph, {}) == [
        "autograder.routes.notebook (line 2) -> autograder.routes.report.html"
    ]
    assert routes_importing_routes(graph, {"notebook": "a dispatcher"}) == []
    assert checks_importing_checks(graph) == [
        "autograder.assignments.a.checks.two (line 1) -> autograder.assignments.a.checks.one"
    ]
    assert cycle_paths(graph) == [
        "autograder.engine.judge.runner (line 2) -> autograder.routes.cli (line 2) -> autograder.engine.judge.runner",
        "autograder.publish.view (line 2) -> autograder.routes.notebook (line 2) -> autograder.routes.report.html "
        "(line 1) -> autograder.publish.view",
    ]
    assert late_imports(root) == [("autograder.engine.judge.runner", 2), ("autograder.routes.notebook", 2)]
    plant(root, {"engine/checks/check.py": "from autograder.engine.judge.runner import grade\n", "engine/loose.py": ""})
    assert up_the_engine(import_graph(root)) == [
        "autograder.engine.checks.check (line 1) -> autograder.engine.judge.runner",
        "autograder.engine.loose: not in one of the engine's folders",
    ]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    plant(
        root,
        {
            "engine/judge/long.py": '"""Over 400 lines: a phrase is no review."""\n' + "x = 1\n" * 401,
            "engine/judge/why.py": "x = 1\n" * 430,
            "engine/judge/grown.py": "x = 1\n" * 500,
            "engine/judge/split.py": "x = 1\n" * 10,
        },
    )
    reviewed = {"engine/judge/why.py": (420, "data"), "engine/judge/grown.py": (420, "data")}
    reviewed["engine/judge/split.py"] = (410, "data")
    assert long_modules(root, reviewed) == [
        "engine/judge/grown.py (500 lines): grown from 420 since its review",
        "engine/judge/long.py (402 lines): over 400, not reviewed",
        "engine/judge/split.py: no longer over 400 lines",
    ]
    planted = 'PACKAGE = "mha"\nx = root / "mha/heads.py"\ndef f(mha):\n    return mha\n'
    assert [line for line, _ in named(planted, ["mha"])] == [1, 2, 3, 4]
    clean = '"""About mha/: a docstring may say it."""\nNAME = "mha-lab"\nENV = "MHA_LAB_CACHE"\n'
    assert named(clean, ["mha"]) == []


def test_a_circle_closed_by_a_late_import_is_found(tmp_path):
    """Two modules of a package: one imports the other at its top, the other imports it back
    inside a function (the circle Python lets run, and a scan of top-level imports misses)."""
    package = tmp_path / "pkg"
    plant(
        package,
        {
            "__init__.py": "",
            "first.py": "from pkg.second import helper\n\nVALUE = 1\n",
            "second.py": "def helper():\n    import pkg.first\n\n    return pkg.first.VALUE\n",
        },
    )
    assert cycle_paths(import_graph(package, "pkg")) == ["pkg.first (line 1) -> pkg.second (line 2) -> pkg.first"]
    assert late_imports(package, "pkg") == [("pkg.second", 2)]
    assert uncommented_late_imports(package, "pkg") == ["pkg.second (line 2)"]
    (package / "second.py").write_text("def helper():\n    return 1\n")  # the circle broken
    assert cycle_paths(import_graph(package, "pkg")) == []


def test_every_assignment_folder_is_complete():
    """What the engine expects of an assignment folder (ARCHITECTURE.md, 'Adding an assignment')."""
    from autograder.engine.course import config as grading_config

    for config in grading_config.load_all():
        folder = assignments.folder(config.id)
        assert (folder / "checks" / "__init__.py").is_file()
        assert (KIT / "solutions" / config.package).is_dir(), f"no reference solutions/{config.package}/"
        assert (KIT / "assignments" / config.package).is_dir(), f"no skeleton assignments/{config.package}/"
        assert {step.id for step in config.steps} <= set(config.step_modules())
