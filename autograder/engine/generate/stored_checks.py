"""The public checks as a student release ships them: their oracles out, their answers stored.

    shipped = rewrite({"attention": source, "_shared": source, ...})   # hidden checks already out

Every check class that defines `inputs` or `expected` gets, in their place,

    inputs = stored.inputs  # stored at release: the instructor's kit computed them
    expected = stored.expected  # stored at release: the instructor's kit computed them

(engine/checks/stored.py reads the release's answers.wire, which engine/generate/answers_build.py
writes from the very methods left out here). Then every module-level function and every import
that no shipped checks module of the assignment uses any more (a name read in its own module,
or imported by another one) is left out, and again, until none is: the oracles, the helpers
that made the inputs, the helpers only those used. Judges, pictures and probes stay: they
judge the student's observations against the stored ones, or by properties.

Edits are made on the source's lines (comments and layout kept), from the syntax tree's spans.
"""

import ast

REPLACED = ("inputs", "expected")
STORED_IMPORT = "from autograder.engine.checks import stored  # values the instructor's kit stored at release\n"


def rewrite(sources: dict) -> dict:
    """{module name: source} of an assignment's checks modules, rewritten (module docstring)."""
    sources = {name: _replace_methods(source) for name, source in sources.items()}
    while True:
        used = _used_names(sources)
        changed = {}
        for name, source in sources.items():
            pruned = _prune(source, used.get(name, set()))
            if pruned != source:
                changed[name] = pruned
        if not changed:
            return {name: _tidy(source) for name, source in sources.items()}
        sources.update(changed)


def _replace_methods(source: str) -> str:
    """`source` with every class method named inputs/expected replaced by the stored lookup."""
    tree = ast.parse(source)
    edits = []  # (first line index, last line index exclusive, replacement text)
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name in REPLACED:
                start = min([item.lineno] + [d.lineno for d in item.decorator_list]) - 1
                indent = " " * item.col_offset
                text = (
                    f"{indent}{item.name} = stored.{item.name}  # stored at release: the instructor's kit computed it\n"
                )
                edits.append((start, item.end_lineno, text))
    if not edits:
        return source
    lines = source.splitlines(keepends=True)
    for start, end, text in sorted(edits, reverse=True):
        lines[start:end] = [text]
    return _add_import("".join(lines))


def _add_import(source: str) -> str:
    """`source` with STORED_IMPORT after its last top-level import."""
    tree = ast.parse(source)
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    lines = source.splitlines(keepends=True)
    at = imports[-1].end_lineno if imports else 0
    lines.insert(at, STORED_IMPORT)
    return "".join(lines)


def _used_names(sources: dict) -> dict:
    """{module name: the top-level names it defines that some module uses}: read in its own body
    (beside their definitions) or imported from it by a sibling (`from ._shared import x`)."""
    used = {name: set() for name in sources}
    for name, source in sources.items():
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
                used[name].add(node.id)
            elif isinstance(node, ast.Attribute):
                root = node
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name):
                    used[name].add(root.id)
            elif isinstance(node, ast.ImportFrom):
                target = (node.module or "").rsplit(".", 1)[-1] if node.level or node.module else None
                if target in used:
                    used[target].update(alias.name for alias in node.names)
    return used


def _prune(source: str, used: set) -> str:
    """`source` without its top-level functions and imported names that no one uses."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name not in used:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            end = node.end_lineno
            while end < len(lines) and not lines[end].strip():  # the blank lines after it
                end += 1
            edits.append((start, end, ""))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            kept = [alias for alias in node.names if (alias.asname or alias.name).split(".")[0] in used]
            if len(kept) == len(node.names):
                continue
            text = ""
            if kept:
                node.names = kept
                text = " " * node.col_offset + ast.unparse(node) + "\n"
            edits.append((node.lineno - 1, node.end_lineno, text))
    for start, end, text in sorted(edits, reverse=True):
        lines[start:end] = [text] if text else []
    return "".join(lines)


def _tidy(source: str) -> str:
    """At most two blank lines in a row (where definitions were left out)."""
    lines, blank = [], 0
    for line in source.splitlines(keepends=True):
        blank = blank + 1 if not line.strip() else 0
        if blank <= 2:
            lines.append(line)
    return "".join(lines)
