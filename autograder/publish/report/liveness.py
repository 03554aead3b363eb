"""Liveness, for stripping dead code (dead_code.py): functions, classes and methods no live
code reaches, and stores whose names nothing live reads.

    reads = Reads(trees)                         # one walk: what each statement reads
    drop_unused_definitions(trees, api, reads)   # True where something went
    drop_dead_stores(trees, api, reads)

A definition lives where the grader calls it (`api`: the names the skeleton defines; dunder
methods: Python calls them) or live code names it (a name, an attribute, a short string:
`getattr(self, "w")`); a method only where its class lives. A store (an assignment to plain
names, an import, a local function) lives where a live statement reads one of its names: in each
function, what it and its nested functions read; at the files' tops, what the whole package
reads (mark and sweep, so stores that only feed each other go together).
"""

import ast
from collections import Counter, defaultdict

from autograder.publish.report.syntax import BLOCKS, DEFS, FUNCTIONS, blocks, inner_blocks, walk


def _own_parts(statement) -> list:
    """A statement's expressions (and arguments, patterns), not the statements it holds."""
    parts = [value for name, value in ast.iter_fields(statement) if name not in BLOCKS and name != "handlers"]
    parts += [h.type for h in getattr(statement, "handlers", ()) if h.type is not None]
    parts += [part for case in getattr(statement, "cases", ()) for part in (case.pattern, case.guard) if part]
    out = []
    for part in parts:
        if isinstance(part, list):
            out.extend(item for item in part if isinstance(item, ast.AST) and not isinstance(item, ast.stmt))
        elif isinstance(part, ast.AST) and not isinstance(part, ast.stmt):
            out.append(part)
    return out


def _read_names(nodes) -> Counter:
    """Names read in `nodes` (no statements inside): names, attribute names, and short strings
    (getattr(self, "w")), with how many times."""
    found = Counter()
    for node in nodes:
        for inner in walk(node):
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load):
                found[inner.id] += 1
            elif isinstance(inner, ast.Attribute):
                found[inner.attr] += 1
            elif isinstance(inner, ast.Constant) and isinstance(inner.value, str) and len(inner.value) < 100:
                found[inner.value] += 1
    return found


class Reads:
    """What each statement of the package reads (_read_names), itself and all it holds: one walk
    of everything, bottom up, per round of stripping."""

    def __init__(self, trees: dict):
        self.own, self.total = {}, {}
        statements = [statement for tree in trees.values() for _, _, block in blocks(tree) for statement in block]
        for statement in reversed(statements):  # a statement's blocks come after it in blocks()
            own = _read_names(_own_parts(statement))
            total = Counter(own)
            for block in inner_blocks(statement):
                for inner in block:
                    total.update(self.total[id(inner)])
            self.own[id(statement)], self.total[id(statement)] = own, total

    def of(self, statement) -> Counter:
        return self.total[id(statement)]

    def of_all(self, statements) -> Counter:
        found = Counter()
        for statement in statements:
            found.update(self.total[id(statement)])
        return found

    def of_class(self, node) -> Counter:
        """A class's own code (bases, decorators, statements), without its methods."""
        found = Counter(self.own[id(node)])
        found.update(self.of_all(s for s in node.body if not isinstance(s, FUNCTIONS)))
        return found


def drop_unused_definitions(trees: dict, api: frozenset, reads: Reads) -> bool:
    """Functions, classes and methods that no live code reaches and the grader does not call
    (`api`; dunder methods are called by Python). A method lives only where its class does."""
    by_name = defaultdict(list)  # name -> [(owner block, definition, its class or None)]
    residue = []  # the files' own statements: always run
    for tree in trees.values():
        for node in tree.body:
            if not isinstance(node, DEFS):
                residue.append(node)
                continue
            by_name[node.name].append((tree.body, node, None))
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, DEFS):
                        by_name[item.name].append((node.body, item, node))
    live, referenced, todo = set(), set(), []

    def reach(names):
        for name in names:
            if name not in referenced:
                referenced.add(name)
                todo.append(name)

    def enliven(node, owner):
        if id(node) in live or (owner is not None and id(owner) not in live):
            return
        live.add(id(node))
        if isinstance(node, ast.ClassDef):
            reach(reads.of_class(node))
            for item in node.body:  # its methods the grader or Python calls, or already referenced
                if isinstance(item, DEFS) and (_dunder(item.name) or item.name in api or item.name in referenced):
                    enliven(item, node)
        else:
            reach(reads.of(node))

    reach(reads.of_all(residue))
    for name in api:
        for _, node, owner in by_name.get(name, ()):
            if owner is None:
                enliven(node, None)
    while todo:
        name = todo.pop()
        for _, node, owner in by_name.get(name, ()):
            enliven(node, owner)
    changed = False
    for entries in by_name.values():
        for block, node, _ in entries:
            if id(node) not in live and any(item is node for item in block):
                block[:] = [item for item in block if item is not node]
                changed = True
    return changed


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def drop_dead_stores(trees: dict, api: frozenset, reads: Reads) -> bool:
    """Assignments to names that nothing live reads: in each function (what it and its nested
    functions read), and at the files' tops (what the whole package reads; `api` names stay).
    Imports of names nothing reads, and local functions nothing calls, go the same way. Mark and
    sweep, so stores that only feed each other (`a = b; b = a + 1`) go together."""
    package_reads = reads.of_all(s for tree in trees.values() for s in tree.body)
    scope = [block for tree in trees.values() for block in _own_blocks(tree)]
    changed = _sweep(scope, package_reads, api, False, reads)
    functions = [
        s for tree in trees.values() for _, _, block in blocks(tree) for s in block if isinstance(s, FUNCTIONS)
    ]
    for function in functions:
        changed |= _sweep(_own_blocks(function), reads.of(function), (), True, reads)
    return changed


def _sweep(blocks: list, scope_reads: Counter, roots, local: bool, reads: Reads) -> bool:
    """Drop the stores in `blocks` whose names nothing live reads. `scope_reads`: every read in
    the scope, the stores' own included; `roots`: names read from outside it."""
    stores, candidates = defaultdict(list), {}
    remaining = Counter(scope_reads)
    for block in blocks:
        for statement in block:
            names = _stored_names(statement, local)
            if names:
                own = reads.of(statement)
                candidates[id(statement)] = own
                remaining.subtract(own)
                for name in names:
                    stores[name].append(statement)
    if not candidates:
        return False
    live_names = {name for name, count in remaining.items() if count > 0} | set(roots)
    live, todo = set(), list(live_names)
    while todo:
        for statement in stores.get(todo.pop(), ()):
            if id(statement) not in live:
                live.add(id(statement))
                fresh = [name for name in candidates[id(statement)] if name not in live_names]
                live_names.update(fresh)
                todo.extend(fresh)
    if len(live) == len(candidates):
        return False
    for block in blocks:
        block[:] = [s for s in block if id(s) not in candidates or id(s) in live]
    return True


def _own_blocks(scope) -> list:
    """The statement lists of `scope` that are not inside a nested function or class."""
    found, todo = [], [scope]
    while todo:
        node = todo.pop()
        for name in BLOCKS:
            block = getattr(node, name, None)
            if isinstance(block, list):
                found.append(block)
                todo.extend(s for s in block if not isinstance(s, DEFS))
        todo.extend(getattr(node, "handlers", ()))
        todo.extend(getattr(node, "cases", ()))
    return found


def _stored_names(statement, local: bool) -> list:
    """The names a statement only stores (an assignment to plain names, an import, a local
    function), or [] where it does more (stores into an object, calls for its effect)."""
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return [(alias.asname or alias.name).split(".")[0] for alias in statement.names if alias.name != "*"]
    if local and isinstance(statement, DEFS):
        return [statement.name]
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
        targets = [statement.target]
    elif isinstance(statement, ast.Delete):
        targets = statement.targets
    else:
        return []
    names = []
    for target in targets:
        for node in walk(target):
            if isinstance(node, (ast.Attribute, ast.Subscript)):
                return []  # stores into an object: its effect is elsewhere
            if isinstance(node, ast.Name):
                names.append(node.id)
    return names
