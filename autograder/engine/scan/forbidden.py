"""Calls a step may not use (grading.yml: a step's `forbidden` list), found in the source as
evidence, and the submission's file graph (which files a step's code runs).

Whether a forbidden call was made is decided at run time, where the call is made: the watch of
autograder/harness/watch.py, beside the student's code. This module runs in the judge and never
runs student code: it names the line of a call the watch saw (`scan_source`), refuses code that
reaches outside what an attention exercise needs (`scan_tampering`: source_policy.py, an
allow-list), and follows the submission's imports (`reached_files`).
"""

import ast
import hashlib
from contextlib import contextmanager
from pathlib import Path

from autograder.engine.checks import messages
from autograder.engine.scan import source_policy, source_reader
from autograder.engine.scan.submission import refusal, walk_files  # what staging refuses is not parsed
from autograder.harness import phases
from autograder.harness.watch import short_name

# ---------------------------------------------------------------------------- in the source


def nodes(source: str, parsed=None):
    """The nodes of the graded code of `source` (None on a syntax error, or for a file too large
    to be graded: source_policy refuses it unread), walked once. `parsed`: source_reader.parse of
    it, where the caller has it (SourceScan). Graded code is all of it but `if __name__ ==
    "__main__":` blocks and test functions (`def test_*`, at module level or in a `class Test*`),
    which the grader never runs: such a block counts as graded where the file rebinds `__name__`,
    and such a function where the file names it anywhere else (it could be called). Read-only to
    callers. (Forbidden-call evidence only: what is tampering is source_policy's, which also
    reads the bodies of `class Test*`.)"""
    if len(source) > source_policy.MAX_SOURCE_CHARS:
        return None
    tree = source_reader.parse(source) if parsed is None else parsed
    if isinstance(tree, BaseException):
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
        elif (
            _is_test_function(node, loads)
            or isinstance(node, ast.ClassDef)
            and node.name.startswith("Test")
            and node.name not in loads
        ):
            skip(node)
    return tuple(n for n in every if id(n) not in skipped)


def _is_test_function(node, loads) -> bool:
    return (
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name.startswith("test_")
        and node.name not in loads
        and not node.decorator_list
    )


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


def named(graded) -> list:
    """[(name, line)] of every name by which the graded nodes `graded` (nodes()) could call a
    library function: an attribute of torch or of what is imported from it (through any alias),
    what `from torch... import` brings and each use of it, and a string built from literals
    (getattr(F, 'scaled_dot_' + 'product_attention'), f'{...}', ''.join, slices, '%s' %). One
    pass, linear in the nodes: attribute roots and folded strings are computed bottom-up, once
    (the strings as the source policy folds them, within its bounds)."""
    torch_aliases, imported, found = _torch_aliases(graded), {}, []
    for node in graded:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch" and not node.level:
            for alias in node.names:  # `from torch... import pad_sequence [as ps]`
                imported[alias.asname or alias.name] = alias.name
                found.append((alias.name, node.lineno))
    roots = {}  # id(Attribute) -> the name its chain starts from
    for node in reversed(graded):  # breadth-first reversed: an attribute's value before it
        if isinstance(node, ast.Attribute):
            value = node.value
            roots[id(node)] = value.id if isinstance(value, ast.Name) else roots.get(id(value))
    folded = source_reader._folded_strings([n for n in graded if isinstance(n, _STRING_BUILDERS)])
    for node in graded:
        if isinstance(node, ast.Attribute) and roots.get(id(node)) in torch_aliases:
            found.append((node.attr, node.lineno))
        elif isinstance(node, ast.Name) and node.id in imported and isinstance(node.ctx, ast.Load):
            found.append((imported[node.id], node.lineno))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _LOOKUPS
            and len(node.args) >= 2
            and id(node.args[1]) in folded
        ):
            found.append((folded[id(node.args[1])], node.lineno))
        elif isinstance(node, (ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript)) and id(node) in folded:
            found.append((folded[id(node)], node.lineno))
    return found


_STRING_BUILDERS = (ast.Constant, ast.BinOp, ast.JoinedStr, ast.FormattedValue, ast.Call, ast.Subscript)


def scan_source(source: str, forbidden, names_found=None) -> list:
    """[(forbidden dotted name, line)] where graded code names a forbidden call: through a torch
    import (`F.scaled_dot_product_attention`, `from torch.nn.utils.rnn import pad_sequence`), or
    as a string built from literals (getattr(F, 'scaled_dot_' + 'product_attention')). Evidence
    for the run-time watch's report, which alone decides. `names_found`: named(nodes(source)),
    where the caller has it (SourceScan: once per file for every step's forbidden list)."""
    wanted = {short_name(dotted): dotted for dotted in forbidden}
    if not wanted:
        return []
    if names_found is None:
        graded = nodes(source)
        names_found = [] if graded is None else named(graded)
    hits = {(wanted[name], line) for name, line in names_found if name in wanted}
    return sorted(hits, key=lambda hit: hit[1])


# ---------------------------------------------------------------------------- tampering


def scan_tampering(source: str, parsed=None) -> list:
    """[(what, line)] for each construct of a graded file outside what an attention exercise
    needs (autograder/engine/scan/source_policy.py: an allow-list of modules, built-ins and
    attributes, read from every statement), by line; `what` says the construct and why it is
    refused, in the chosen language. Such code could reach into the grader or switch off its
    watch; it scores zero in the steps that run it. `parsed`: source_reader.parse(source)."""
    return [
        (messages.render(found.message_id, code=found.code, name=found.name), found.line)
        for found in source_reader.findings(source, parsed)
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


def import_statements(graded) -> list:
    """[(level, [module parts], [imported names])] of the graded nodes' imports (`import a.b`:
    (0, ["a", "b"], []))."""
    found = []
    for node in graded or ():
        if isinstance(node, ast.Import):
            found += [(0, alias.name.split("."), []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = (node.module or "").split(".") if node.module else []
            found.append((node.level, module, [alias.name for alias in node.names]))
    return found


def imported_files(files: dict, file: str, statements=None, by_module=None) -> set:
    """The files of `files` that `file` imports (relative, rooted at the package's name or a bare
    sibling name), with the packages on the way. `statements`: import_statements of the file's
    graded nodes and `by_module`: {module: file} of `files`, where the caller has them."""
    by_module = {_module_of(f): f for f in files} if by_module is None else by_module
    top = file.split("/", 1)[0]  # the package's name
    statements = import_statements(nodes(files[file])) if statements is None else statements
    here = _module_of(file).split(".")
    package = here if file.endswith("/__init__.py") else here[:-1]
    wanted = []
    for level, module, names in statements:
        if not level and not names:  # import a.b
            wanted.append(module[1:] if module[0] == top else module)
            continue
        if level:
            base = package[: len(package) - (level - 1)] if level - 1 <= len(package) else []
        elif module and module[0] == top:
            base, module = [], module[1:]
        else:
            base = []
        wanted.append(base + module)
        wanted.extend(base + module + [name] for name in names)
    found = set()
    for parts in wanted:
        for cut in range(1, len(parts) + 1):  # a module and the packages on its way
            target = by_module.get(".".join(p for p in parts[:cut] if p))
            if target is not None:
                found.add(target)
    return found


def reached_files(files: dict, start, imports=None) -> list:
    """The files the step files `start` run, directly or through imports, in a stable order.
    `imports(file)`: the files `file` imports (default: imported_files, parsing it again)."""
    imports = imports or (lambda file: imported_files(files, file))
    todo = [f for f in start if f in files]
    seen = []
    while todo:
        file = todo.pop(0)
        if file in seen:
            continue
        seen.append(file)
        todo.extend(sorted(imports(file) - set(seen)))
    return seen


# ---------------------------------------------------------------------------- one submission


class OutOfTime(Exception):
    """The submission's budget is spent: SourceScan parses no more of its files."""


_batch = []  # while a batch runs (across_batch): {(digest of a text, forbidden names): what is kept of it}
BATCH_TEXTS = 50_000  # texts a batch keeps (a few hundred bytes each): past that, it starts again


@contextmanager
def across_batch():
    """Within the block (a batch's grading, operations/batch.py), what is kept of a text is
    shared by every SourceScan: the files a class did not change from the skeleton, or copied
    from each other, are parsed once for the whole batch."""
    _batch.append({})
    try:
        yield
    finally:
        _batch.pop()


class SourceScan:
    """One submission's package files, read once and each parsed once (files of the same text:
    once for all), with what the plan stage asks of them (tampering, the files a step's code
    reaches, where a forbidden call is named) kept for the whole submission: scanning costs one
    pass over its bytes whatever its steps and however many files it has. Of a file, only what
    is asked of it is kept, never its tree (400 bytes per source byte: 16 MiB of source would
    hold gigabytes). The judge's own time is the submission's too: with `budget`
    (judge/budget.py), no file is parsed once it is spent (OutOfTime is raised instead).
    `forbidden`: every forbidden dotted name a step may ask about (the names a file calls by are
    kept for those only)."""

    def __init__(self, directory, budget=None, forbidden=()):
        self.package = Path(directory).name
        self.files = package_files(directory) if Path(directory).is_dir() else {}
        self.budget = budget
        self.forbidden = {short_name(dotted) for dotted in forbidden}
        self.parses = 0  # how many texts were parsed (each once)
        self._by_module = {_module_of(f): f for f in self.files}
        self._read = {}  # text -> (tampering, import statements, [(forbidden short name, line)])
        self._shared = _batch[-1] if _batch else None  # the batch's, by digest (across_batch)
        self._forbidden_key = frozenset(self.forbidden)
        self._imports = {}  # file -> the files it imports

    def _of(self, file):
        """What is kept of `file`'s text, read (and parsed) the first time it is asked for."""
        source = self.files[file]
        if source not in self._read:
            with phases.phase("scan"):  # asked for by the plan stage: booked to the scan (harness/phases.py)
                self._read[source] = self._kept(file, source)
        return self._read[source]

    def _kept(self, file, source):
        """_scanned of a text, or what the batch kept of the same text (across_batch)."""
        if self._shared is None:
            return self._scanned(file, source)
        if len(source) <= source_policy.MAX_SOURCE_CHARS and self.budget is not None and self.budget.left() <= 0:
            raise OutOfTime(file)  # as a parse would: the grade never depends on what else the batch held
        key = hashlib.sha256(source.encode("utf-8", "surrogatepass")).digest(), self._forbidden_key
        kept = self._shared.get(key)
        if kept is None:
            kept = self._scanned(file, source)
            if len(self._shared) > BATCH_TEXTS:
                self._shared.clear()
            self._shared[key] = kept
        return kept

    def _scanned(self, file, source):
        """(tampering, import statements, [(forbidden short name, line)]) of one text."""
        if len(source) > source_policy.MAX_SOURCE_CHARS:
            tree = None  # refused unread (source_reader says so)
        else:
            if self.budget is not None and self.budget.left() <= 0:
                raise OutOfTime(file)
            self.parses += 1
            tree = source_reader.parse(source)
        graded = None if tree is None else nodes(source, tree)
        names = [(name, line) for name, line in named(graded or ()) if name in self.forbidden]
        return scan_tampering(source, tree), import_statements(graded), names

    def tampering(self, file) -> list:
        """scan_tampering of `file`."""
        return self._of(file)[0]

    def imports(self, file) -> set:
        """imported_files of `file`."""
        if file not in self._imports:
            self._imports[file] = imported_files(self.files, file, self._of(file)[1], self._by_module)
        return self._imports[file]

    def reached(self, start) -> list:
        """The files the step files `start` (names in the package) run, directly or through
        imports, in a stable order (reached_files, with the imports parsed once)."""
        return reached_files(self.files, [f"{self.package}/{name}" for name in start], self.imports)

    def calls(self, file, forbidden) -> list:
        """scan_source of `file` for the calls `forbidden` (of those the scan was made for)."""
        unknown = {short_name(dotted) for dotted in forbidden} - self.forbidden
        if unknown:
            raise ValueError(f"a SourceScan made for {sorted(self.forbidden)} asked about {sorted(unknown)}")
        return scan_source(self.files[file], forbidden, self._of(file)[2])
