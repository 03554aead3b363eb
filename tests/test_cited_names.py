"""Names the prose cites exist: a `module.name` in ARCHITECTURE.md, docs/, or a comment or
docstring of the kit's code names a module of the kit and something that module defines (a function, a class, a
module-level name, a class's member, a submodule). A renamed or removed function otherwise lives
on in the comments that point readers to it (`runner.HangGuard` stayed cited in eight places)."""

import ast
import io
import re
import tokenize
from pathlib import Path

from autograder import KIT

GRADER = KIT / "autograder"
PROSE = [KIT / "ARCHITECTURE.md", *sorted((KIT / "docs").glob("*.md"))]

# `module.name`, not part of a path, a longer dotted name or a file name (`report.pdf`).
CITED = re.compile(r"(?<![\w./$-])([a-z_][a-z_0-9]*)\.([A-Za-z_]\w*)\b(?!\.\w|[/\w-])")
FILE_SUFFIXES = {"py", "md", "json", "yml", "yaml", "po", "mo", "pot", "wire", "ipynb", "zip", "txt", "html", "csv"}
FILE_SUFFIXES |= {"pdf", "j2", "toml", "cfg", "sh", "sbatch", "js", "png", "svg", "xml", "log", "whl", "gz", "tar"}
# Words that are also the kit's usual names of an instance, not of its module: `check.inputs` is
# a Check's method; `runner.temp` is GitHub Actions' runner context.
INSTANCES = {"check", "runner.temp"}
MESSAGE_IDS = ("diagnosis.",)  # message ids of the diagnoses: `diagnosis.scale_by_d_model`


def defined(tree: ast.Module) -> set:
    """The names a module defines at its top, with its classes' members."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(member.name)
                names.update(target.id for target in _targets(member))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        names.update(target.id for target in _targets(node))
    return names


def _targets(node) -> list:
    if isinstance(node, ast.Assign):
        return [name for target in node.targets for name in ast.walk(target) if isinstance(name, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target]
    return []


def kit_modules(grader: Path) -> dict:
    """{dotted module name: the names it defines} for every module under `grader`."""
    modules = {}
    for path in sorted(grader.rglob("*.py")):
        parts = path.relative_to(grader.parent).with_suffix("").parts
        name = ".".join(parts).removesuffix(".__init__")
        names = defined(ast.parse(path.read_text(encoding="utf-8")))
        if path.name == "__init__.py":
            names |= {child.stem for child in path.parent.iterdir() if child.suffix == ".py" or child.is_dir()}
        modules[name] = names
    return modules


def by_last_part(modules: dict) -> dict:
    """{a module's last dotted part: [its names, for every module of that part]}."""
    found = {}
    for name, names in modules.items():
        found.setdefault(name.rsplit(".", 1)[-1], []).append(names)
    return found


def aliases(tree: ast.Module, modules: dict, package: str) -> dict:
    """{a name a module binds by import: the kit module it stands for}."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules:
                    bound[alias.asname] = alias.name
    return bound


def stale(text: str, where: str, known: dict, modules: dict, bound: dict) -> list:
    """'where: module.name' for each citation in `text` of a kit module without that name."""
    found = []
    for match in CITED.finditer(text):
        module, name = match.groups()
        cited = f"{module}.{name}"
        if name in FILE_SUFFIXES or module in INSTANCES or cited in INSTANCES or cited.startswith(MESSAGE_IDS):
            continue
        candidates = [modules[bound[module]]] if module in bound else known.get(module, [])
        if candidates and not any(name in names for names in candidates):
            found.append(f"{where}: {cited}")
    return found


def stale_citations(grader: Path, prose: list) -> list:
    modules = kit_modules(grader)
    known = by_last_part(modules)
    found = []
    for page in prose:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            found += stale(line, f"{page.name}:{number}", known, modules, {})
    for path in sorted(grader.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        name = ".".join(path.relative_to(grader.parent).with_suffix("").parts)
        package = name.removesuffix(".__init__") if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        tree = ast.parse(source)
        bound = aliases(tree, modules, package)
        for line, text in [*comments(source), *docstrings(tree)]:
            found += stale(text, f"{path.relative_to(grader.parent)}:{line}", known, modules, bound)
    return sorted(found, key=lambda entry: (entry.split(":")[0], int(entry.split(":")[1])))


def comments(source: str) -> list:
    """(line, text) of each comment of `source`."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(token.start[0], token.string) for token in tokens if token.type == tokenize.COMMENT]


def docstrings(tree: ast.Module) -> list:
    """(line, text) of each docstring of `tree`, the module's, its classes' and functions'."""
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    nodes = [node for node in ast.walk(tree) if isinstance(node, kinds) and ast.get_docstring(node)]
    return [(node.body[0].lineno, ast.get_docstring(node)) for node in nodes]


def test_every_cited_name_exists():
    assert stale_citations(GRADER, PROSE) == []


def test_a_planted_stale_citation_is_found(tmp_path):
    grader = tmp_path / "autograder"
    (grader / "engine").mkdir(parents=True)
    (grader / "__init__.py").write_text("")
    (grader / "engine" / "__init__.py").write_text("")
    (grader / "engine" / "runner.py").write_text("class Hangs:\n    def note(self):\n        pass\n")
    (grader / "engine" / "plan.py").write_text(
        "from autograder.engine import runner as judge\n"
        "x = 1  # see runner.Hangs, runner.note and judge.Hangs\n"
        "y = 2  # see runner.HangGuard\n"
        "z = 3  # see judge.HangGuard; report.pdf and check.inputs are not citations\n"
        "def f():\n"
        '    """Like runner.Gone."""\n'
    )
    page = tmp_path / "ARCHITECTURE.md"
    page.write_text("-> runner.Hangs\n-> plan.staged(path)\n")
    assert stale_citations(grader, [page]) == [
        "ARCHITECTURE.md:2: plan.staged",
        "autograder/engine/plan.py:3: runner.HangGuard",
        "autograder/engine/plan.py:4: judge.HangGuard",
        "autograder/engine/plan.py:6: runner.Gone",
    ]
