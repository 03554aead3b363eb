"""Students for the similarity tests: independent ones written in different styles, and copies
of them disguised the ways a copier disguises code for free.

    independent_students(5)                 # [{path in the package: text}], no two alike by design
    disguise(files, random.Random(3))       # the same program, disguised (all kinds at random)
    disguise(files, rng, kinds=("rename",)) # one kind only

An independent student is the reference package with each step file written in a style of
tests/styles.py or as a public implementation of the corpus (tests/corpus.py) has it (or the
reference's own), each student a different one per file where there are enough. A disguise keeps the program's behaviour (the API the grader calls keeps its
names) and changes its text: names, the order of functions and of independent statements, dead
code (unused functions and assignments, code after a return, branches on constants, no-op
updates, docstrings), moves of functions into other files and sub-packages, comments, values
passed through a helper of the copier's that returns its argument as it is (wrap).
"""

import ast
import random
import re
from pathlib import Path

import corpus
from styles import STYLES_PASSING

KIT = Path(__file__).resolve().parent.parent
PACKAGE = KIT / "solutions" / "mha"
SKELETON = KIT / "assignments" / "mha"
KINDS = ("rename", "reorder", "pad", "move", "split", "comments", "wrap")


def reference() -> dict:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(PACKAGE.glob("*.py"))}


def skeleton() -> dict:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(SKELETON.glob("*.py"))}


def api_names() -> set:
    """Names a disguise keeps: every identifier of the skeleton (what the grader calls or reads)
    and the libraries' names (torch, torch.nn, torch.nn.functional, a tensor's, math, builtins).
    The skeleton's docstrings are in one language now, so its text no longer lists them all."""
    import builtins
    import math

    import torch

    names = set(re.findall(r"[A-Za-z_]\w*", "\n".join(skeleton().values())))
    for namespace in (torch, torch.nn, torch.nn.functional, torch.Tensor, math, builtins):
        names.update(dir(namespace))
    return names


def styles_by_file() -> dict:
    """{file: [its text in each style, the reference's first]}: the styles of tests/styles.py,
    then the files of the public corpus (tests/corpus.py: public implementations, correct or
    with a bug, each re-expressed in the contract)."""
    base = reference()
    pool = {name: [text] for name, text in base.items()}
    texts = [(style.file, style.apply(base[style.file])) for style in STYLES_PASSING]
    texts += [(file, item.source_of(file)) for item in corpus.load("mha") for file in item.files]
    for file, text in texts:
        if file in pool and text not in pool[file]:
            pool[file].append(text)
    return pool


def independent_students(count: int, offset: int = 0) -> list:
    """`count` packages, student i taking style (i + offset) of each file (cycling where a file
    has fewer styles): as different from each other as the gallery allows."""
    pool = styles_by_file()
    return [{name: texts[(i + offset) % len(texts)] for name, texts in sorted(pool.items())} for i in range(count)]


# ---------------------------------------------------------------------------------------- disguise
def disguise(files: dict, rng: random.Random, kinds=KINDS) -> dict:
    """`files` disguised by every kind in `kinds` (see the module's docstring), at random."""
    trees = {path: ast.parse(text) for path, text in files.items() if path.endswith(".py")}
    api = api_names()
    if "rename" in kinds:
        _rename(trees, api, rng)
    if "move" in kinds:
        _move(trees, rng, api, split=False)
    if "split" in kinds:
        _move(trees, rng, api, split=True)
    if "wrap" in kinds:
        for tree in trees.values():
            _wrap(tree, rng)
    if "pad" in kinds:
        for tree in trees.values():
            _pad(tree, rng)
    if "reorder" in kinds:
        for tree in trees.values():
            _reorder(tree, rng)
    out = {path: ast.unparse(ast.fix_missing_locations(tree)) + "\n" for path, tree in trees.items()}
    if "comments" in kinds:
        out = {path: _comment(text, rng) for path, text in out.items()}
    return out


def _word(rng) -> str:
    return rng.choice(["tmp", "val", "res", "buf", "acc", "part", "cur", "item", "z", "w"]) + str(rng.randrange(10**9))


def _rename(trees: dict, api: set, rng) -> None:
    """Local variables, helpers' names and parameters, and attributes the skeleton does not name."""
    names, parameters = set(), set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
                if isinstance(node, ast.FunctionDef) and node.name not in api:
                    parameters.update(a.arg for a in node.args.args)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    names |= parameters
    mapping = {name: _word(rng) for name in sorted(names - api) if not name.startswith("__")}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in mapping:
                node.id = mapping[node.id]
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in mapping:
                node.name = mapping[node.name]
            elif isinstance(node, ast.Attribute) and node.attr in mapping:
                node.attr = mapping[node.attr]
            elif (
                isinstance(node, ast.arg)
                and node.arg in mapping
                or isinstance(node, ast.keyword)
                and node.arg in parameters - api
            ):
                node.arg = mapping[node.arg]
            elif isinstance(node, ast.alias) and node.name in mapping:
                node.asname = node.asname or None
                node.name = mapping[node.name]


def _wrap(tree, rng) -> None:
    """Values assigned and returned passed through a helper that returns its argument as it is
    (written as a function, with a docstring and more parameters, or as a lambda): every
    statement gains tokens, so that no run of them is what it was."""
    name, arg = _word(rng), _word(rng)
    helper = rng.choice(
        [
            f"def {name}({arg}):\n    return {arg}\n",
            f'def {name}({arg}, /, *rest):\n    """Keep {arg} as it is."""\n    return {arg}\n',
            f"{name} = lambda {arg}: {arg}\n",
        ]
    )
    wrapped = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.Return)) and node.value is not None and rng.random() < 0.8:
            node.value = ast.Call(ast.Name(name, ast.Load()), [node.value], [])
            wrapped = True
    if wrapped:  # first, after `from __future__` imports: defined before any use
        at = 0
        while (
            at < len(tree.body) and isinstance(tree.body[at], ast.ImportFrom) and tree.body[at].module == "__future__"
        ):
            at += 1
        tree.body[at:at] = ast.parse(helper).body


def _dead_code(rng) -> list:
    """A few statements that change nothing the program does."""
    a, b = _word(rng), _word(rng)
    choices = [
        f"{a} = {rng.randrange(100)} * 3",
        f"{a} = [i * i for i in range({rng.randrange(2, 9)})]\n{b} = len({a})",
        f"if False:\n    print('{a}')",
        f"if 0 > 1:\n    {a} = {rng.randrange(9)}",
        "pass",
        f"'''{a} {b}'''",
        f"{a} = None\ndel {a}",
        f"while False:\n    {a} = 1",
    ]
    return ast.parse("\n".join(rng.sample(choices, rng.randint(1, 3)))).body


def _unused_function(rng) -> ast.FunctionDef:
    name, arg = _word(rng), _word(rng)
    return ast.parse(
        f"def {name}({arg}, scale=2):\n"
        f"    '''Helper kept for later.'''\n"
        f"    out = [{arg} * scale for _ in range(3)]\n"
        f"    if len(out) > 2:\n"
        f"        return out[0]\n"
        f"    return None\n"
    ).body[0]


def _pad(tree, rng) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            body = node.body
            for _ in range(rng.randint(1, 3)):
                at = rng.randrange(len(body) + 1)
                if at == len(body) and body and isinstance(body[-1], ast.Return):
                    at -= 1
                body[at:at] = _dead_code(rng)
            if isinstance(body[-1], ast.Return) and rng.random() < 0.5:
                body.append(ast.parse("print('unreachable')").body[0])
            for _i, statement in enumerate(list(body)):
                if (
                    isinstance(statement, ast.Assign)
                    and isinstance(statement.targets[0], ast.Name)
                    and rng.random() < 0.3
                ):
                    name = statement.targets[0].id
                    body.insert(body.index(statement) + 1, ast.parse(f"{name} = {name}").body[0])
                    break
    tree.body.extend(_unused_function(rng) for _ in range(rng.randint(1, 2)))
    tree.body.insert(0, ast.parse(rng.choice(["import os", "import sys", "import json as js"])).body[0])


def _reads_writes(statement):
    reads = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    writes = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    attributes = {n.attr for n in ast.walk(statement) if isinstance(n, ast.Attribute)}
    return reads, writes, attributes


def _independent(a, b) -> bool:
    """Two plain assignments that neither read nor write what the other writes."""
    if not (isinstance(a, ast.Assign) and isinstance(b, ast.Assign)):
        return False
    ra, wa, aa = _reads_writes(a)
    rb, wb, ab = _reads_writes(b)
    stores_attribute = any(not isinstance(t, ast.Name) for t in a.targets + b.targets)
    return not (wa & (rb | wb) or wb & ra) and not (stores_attribute and aa & ab)


def _reorder(tree, rng) -> None:
    """Functions and methods shuffled; independent neighbouring assignments swapped."""
    head = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    rest = [s for s in tree.body if s not in head]
    defs = [s for s in rest if isinstance(s, (ast.FunctionDef, ast.ClassDef))]
    others = [s for s in rest if s not in defs]
    rng.shuffle(defs)
    tree.body = head + others + defs
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            methods = [s for s in node.body if isinstance(s, ast.FunctionDef)]
            rng.shuffle(methods)
            node.body = [s for s in node.body if not isinstance(s, ast.FunctionDef)] + methods
        body = getattr(node, "body", None)
        if isinstance(body, list) and len(body) > 1:
            for _ in range(len(body)):
                i = rng.randrange(len(body) - 1)
                if _independent(body[i], body[i + 1]):
                    body[i], body[i + 1] = body[i + 1], body[i]


def _move(trees: dict, rng, api: set, split: bool) -> None:
    """A function moved into a module of a sub-package (`split`: half a file's functions into a
    new module beside it), imported back where it was."""
    candidates = [
        (path, node) for path, tree in sorted(trees.items()) for node in tree.body if isinstance(node, ast.FunctionDef)
    ]
    if not candidates:
        return
    path, _ = rng.choice(candidates)
    tree = trees[path]
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    moved = functions[: max(1, len(functions) // 2)] if split else [rng.choice(functions)]
    imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom)) and not getattr(s, "level", 0)]
    stem = _word(rng)
    target, module = (f"{stem}.py", f".{stem}") if split else (f"util/{stem}.py", f".util.{stem}")
    trees[target] = ast.Module(body=[*imports, *moved], type_ignores=[])
    if not split:
        trees.setdefault("util/__init__.py", ast.Module(body=[], type_ignores=[]))
    tree.body = [s for s in tree.body if s not in moved]
    names = ", ".join(node.name for node in moved)
    at = len([s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))])
    tree.body.insert(at, ast.parse(f"from {module} import {names}").body[0])


def _comment(text: str, rng) -> str:
    lines = []
    for line in text.splitlines():
        lines.append(line)
        if line.strip() and not line.rstrip().endswith(("(", "[", ",", "\\")) and rng.random() < 0.2:
            lines[-1] = f"{line}  # {_word(rng)} {_word(rng)}"
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------- synthetic code
OPERATIONS = [
    "torch.relu({a})",
    "torch.tanh({a}) * {b}",
    "{a} @ {b}.transpose(-2, -1)",
    "{a} * {b}.mean(dim=-1, keepdim=True)",
    "torch.softmax({a}, dim={d})",
    "{a}.flatten(1).view_as({b})",
    "torch.cat([{a}, {b}], dim={d}).sum(dim={d})",
    "{a}.masked_fill({b} > {n}, {n})",
    "F.gelu({a}) - {b}",
    "({a} - {b}).abs().clamp(max={n})",
    "{a}.exp() / {a}.exp().sum(dim=-1, keepdim=True)",
    "torch.where({a} > {b}, {a}, {b} * {n})",
]


def random_function(rng: random.Random, name: str, statements: int) -> str:
    """A function of `statements` random tensor operations, each feeding the next (so none is
    dead code): a stand-in for code a student wrote alone."""
    names, lines = ["x", "y"], [f"def {name}(x, y):"]
    for i in range(statements):
        operation = rng.choice(OPERATIONS).format(
            a=names[-1], b=rng.choice(names), d=rng.choice([-1, 1, 0]), n=rng.randrange(2, 99)
        )
        lines.append(f"    t{i} = {operation}")
        names.append(f"t{i}")
    return "\n".join([*lines, f"    return {names[-1]}", ""])


def synthetic_student(rng: random.Random, shared: str = "", own: int = 2, size: int = 6) -> dict:
    """A package whose attention function calls `own` helpers of `size` random statements of its
    own and, where given, the helper `shared` (named `common`) that other students hold too."""
    helpers = [random_function(rng, f"helper{i}", size) for i in range(own)]
    calls = " + ".join([f"helper{i}(q, k)" for i in range(own)] + (["common(q, v)"] if shared else []))
    text = "\n\n".join(
        [
            "import torch\nimport torch.nn.functional as F",
            *helpers,
            *([shared] if shared else []),
            f"def scaled_dot_product_attention(q, k, v, mask=None):\n    return {calls}, None\n",
        ]
    )
    return {"attention.py": text}
