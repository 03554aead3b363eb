"""Calls a step may not use (grading.yml: a step's `forbidden` list), found in the source as
evidence, and the submission's file graph (which files a step's code runs).

Whether a forbidden call was made is decided at run time, where the call is made: the watch of
autograder/harness/watch.py, beside the student's code. This module runs in the judge and never
runs student code: it names the line of a call the watch saw (`scan_source`), refuses code that
reaches outside what an attention exercise needs (`scan_tampering`: source_policy.py, an
allow-list), and follows the submission's imports (`reached_files`).
"""

import ast
import functools
from pathlib import Path

from autograder.engine.checks import messages
from autograder.engine.scan import source_policy, source_reader
from autograder.engine.scan.submission import refusal, walk_files  # what staging refuses is not parsed
from autograder.harness.watch import short_name


# ---------------------------------------------------------------------------- in the source


@functools.lru_cache(maxsize=16)  # a submission's files: each entry holds a whole tree
def nodes(source: str):
    """The nodes of the graded code of `source` (None on a syntax error, or for a file too large
    to be graded: source_policy refuses it unread), parsed and walked once per source. Graded
    code is all of it but `if __name__ == "__main__":` blocks and test functions (`def test_*`,
    at module level or in a `class Test*`), which the grader never runs: such a block counts as
    graded where the file rebinds `__name__`, and such a function where the file names it
    anywhere else (it could be called). Read-only to callers. (Forbidden-call evidence only:
    what is tampering is source_policy's, which also reads the bodies of `class Test*`.)"""
    if len(source) > source_policy.MAX_SOURCE_CHARS:
        return None
    try:
        tree = ast.parse(source.encode("utf-8", "surrogatepass"))  # as an import reads it (a byte-order mark)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    every = tuple(ast.walk(tree))
    loads = {n.id for n in every if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    loads |= {n.attr for n in every if isinstance(n, ast.Attribute)}
    rebinds_name = any(
        isinstance(n, ast.Name) and n.id == "__name__" and not isinstance(n.ctx, ast.Load) for n in every
    )
    skipped = set()

    def skip(node):
        skipped.update(id(n) for n in ast.walk(node))

    for node in tree.body:
        if isinstance(node, ast.If) and source_reader.is_main_test(node.test) and not rebinds_name:
            for child in node.body:
                skip(child)
        elif _is_test_function(node, loads):
            skip(node)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test") and node.name not in loads:
            skip(node)
    return tuple(n for n in every if id(n) not in skipped)


def _is_test_function(node, loads) -> bool:
    return (
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name.startswith("test_")
        and node.name not in loads
        and not node.decorator_list
    )


def folded(node):
    """The value of a string expression built from literals ('a' + 'b', f'{"a"}b', ''.join([...]),
    'ba'[::-1], '%s' % 'a'), or None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp):
        left, right = folded(node.left), folded(node.right)
        if isinstance(node.op, ast.Add) and left is not None and right is not None:
            return left + right
        if isinstance(node.op, ast.Mod) and left is not None:
            values = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            parts = [folded(v) for v in values]
            if None not in parts:
                try:
                    return left % tuple(parts)
                except (TypeError, ValueError):
                    return None
        return None
    if isinstance(node, ast.JoinedStr):
        parts = [folded(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values]
        return None if None in parts else "".join(parts)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and isinstance(node.args[0], (ast.List, ast.Tuple))
    ):
        glue = folded(node.func.value)
        parts = [folded(v) for v in node.args[0].elts]
        return None if glue is None or None in parts else glue.join(parts)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        text = folded(node.value)
        bounds = [
            b.value if isinstance(b, ast.Constant) else b for b in (node.slice.lower, node.slice.upper, node.slice.step)
        ]
        if text is not None and all(b is None or isinstance(b, int) for b in bounds):
            return text[slice(*bounds)]
    return None


def _root(node):
    """'torch' for torch.nn.functional.x: the name an attribute chain starts from."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _torch_aliases(every_node):
    """Names bound to torch or to something imported from it."""
    aliases = set()
    for node in every_node:
        if isinstance(node, ast.Import):
            aliases.update(a.asname or "torch" for a in node.names if a.name.split(".")[0] == "torch")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch" and not node.level:
            aliases.update(a.asname or a.name for a in node.names)
    return aliases


_LOOKUPS = {"getattr", "hasattr", "setattr", "delattr", "__import__"}


def scan_source(source: str, forbidden) -> list:
    """[(forbidden dotted name, line)] where graded code names a forbidden call: through a torch
    import (`F.scaled_dot_product_attention`, `from torch.nn.utils.rnn import pad_sequence`), or
    as a string built from literals (getattr(F, 'scaled_dot_' + 'product_attention')). Evidence
    for the run-time watch's report, which alone decides."""
    names = {short_name(dotted): dotted for dotted in forbidden}
    every_node = nodes(source)
    if every_node is None or not names:
        return []
    torch_aliases, direct, hits = _torch_aliases(every_node), {}, []
    for node in every_node:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch" and not node.level:
            for alias in node.names:
                if alias.name in names:  # `from torch... import pad_sequence [as ps]`
                    direct[alias.asname or alias.name] = names[alias.name]
                    hits.append((names[alias.name], node.lineno))
    for node in every_node:
        if isinstance(node, ast.Attribute) and node.attr in names and _root(node) in torch_aliases:
            hits.append((names[node.attr], node.lineno))
        elif isinstance(node, ast.Name) and node.id in direct and isinstance(node.ctx, ast.Load):
            hits.append((direct[node.id], node.lineno))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _LOOKUPS
            and len(node.args) >= 2
            and folded(node.args[1]) in names
        ):
            hits.append((names[folded(node.args[1])], node.lineno))
        elif isinstance(node, (ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript)) and folded(node) in names:
            hits.append((names[folded(node)], node.lineno))
    return sorted(set(hits), key=lambda hit: hit[1])


# ---------------------------------------------------------------------------- tampering


def scan_tampering(source: str) -> list:
    """[(what, line)] for each construct of a graded file outside what an attention exercise
    needs (autograder/engine/scan/source_policy.py: an allow-list of modules, built-ins and
    attributes, read from every statement), by line; `what` says the construct and why it is
    refused, in the chosen language. Such code could reach into the grader or switch off its
    watch; it scores zero in the steps that run it."""
    return [
        (messages.render(found.message_id, code=found.code, name=found.name), found.line)
        for found in source_reader.findings(source)
    ]


# ---------------------------------------------------------------------------- the submission's files


def package_files(directory) -> dict:
    """{'<package>/<relative path>': source} for every .py file under `directory` (a submission's
    package folder), subfolders included, that is a regular file within the size limit (found
    without recursion and within staging's limits: submission.walk_files)."""
    root = Path(directory)
    files = {}
    for path in walk_files(root):
        if refusal(path.lstat()) is not None:
            continue
        # utf-8-sig: a byte-order mark is not part of the source (Python's import skips it)
        files[f"{root.name}/" + path.relative_to(root).as_posix()] = path.read_text(
            encoding="utf-8-sig", errors="replace"
        )
    return files


def _module_of(file: str) -> str:
    """'<package>/sub/x.py' -> 'sub.x'; '<package>/sub/__init__.py' -> 'sub'."""
    parts = file.split("/", 1)[1][: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_files(files: dict, file: str) -> set:
    """The files of `files` that `file` imports (relative, rooted at the package's name or a bare
    sibling name), with the packages on the way."""
    by_module = {_module_of(f): f for f in files}
    top = file.split("/", 1)[0]  # the package's name
    every_node = nodes(files[file]) or ()
    here = _module_of(file).split(".")
    package = here if file.endswith("/__init__.py") else here[:-1]
    wanted = []
    for node in every_node:
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                wanted.append(parts[1:] if parts[0] == top else parts)
        elif isinstance(node, ast.ImportFrom):
            module = (node.module or "").split(".") if node.module else []
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
            elif module and module[0] == top:
                base, module = [], module[1:]
            else:
                base = []
            wanted.append(base + module)
            wanted.extend(base + module + [a.name] for a in node.names)
    found = set()
    for parts in wanted:
        for cut in range(1, len(parts) + 1):  # a module and the packages on its way
            target = by_module.get(".".join(p for p in parts[:cut] if p))
            if target is not None:
                found.add(target)
    return found


def reached_files(files: dict, start) -> list:
    """The files the step files `start` run, directly or through imports, in a stable order."""
    todo = [f for f in start if f in files]
    seen = []
    while todo:
        file = todo.pop(0)
        if file in seen:
            continue
        seen.append(file)
        todo.extend(sorted(imported_files(files, file) - set(seen)))
    return seen
