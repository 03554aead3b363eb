"""Statements that do not depend on each other, put in one canonical order (normalise.py): so
that swapping them changes nothing in what is compared.

    note_effects(tree)                         # before names are normalised away
    order = canonical_order(statements, emitted)

Each statement goes after those it depends on (it reads what they write, or writes what they
read or write, as whole dotted names: `self.q` and `self.k` are apart); a `return`, `raise`,
`yield`, a bare call, or a statement holding one keeps its place. Among those free to go, the
smallest normalised text first. Blocks longer than ORDERED_BLOCK keep their order (the work is
quadratic in a block's length).
"""

import ast
import heapq
from collections import defaultdict

from autograder.publish.report.syntax import BLOCKS, DEFS, TERMINAL, blocks, inner_blocks

ORDERED_BLOCK = 200


def note_effects(tree) -> None:
    """Each statement's effects (_effects), noted before names are normalised away: its own
    expressions', and those of the statements it holds (computed first)."""
    statements = [statement for _, _, block in blocks(tree) for statement in block]
    for statement in reversed(statements):  # a statement's blocks come after it in _blocks
        reads, writes, barrier = _effects(statement)
        for block in inner_blocks(statement):
            for inner in block:
                inner_reads, inner_writes, inner_barrier, _, _ = inner.effects
                reads |= inner_reads
                writes |= inner_writes
                barrier = barrier or inner_barrier
        statement.effects = (reads, writes, barrier, _prefixes(reads), _prefixes(writes))


def canonical_order(statements: list, emitted: list) -> list:
    """Indices of `statements` in canonical order: each statement after those it depends on (it
    reads what they write, or writes what they read or write; a `return`, `raise`, a bare call
    or anything holding them keeps its place), the smallest normalised text first among those
    free to go. Blocks longer than ORDERED_BLOCK keep their order."""
    count = len(statements)
    effects = [getattr(statement, "effects", None) for statement in statements]
    if count < 2 or count > ORDERED_BLOCK or any(effect is None for effect in effects):
        return list(range(count))
    before = [0] * count  # how many statements must still come before each one
    then = defaultdict(list)  # i -> the statements waiting for it
    for j in range(count):
        for i in range(j):
            if _conflict(effects[i], effects[j]):
                before[j] += 1
                then[i].append(j)
    keys = [" ".join(token for token, _, _ in tokens) for tokens in emitted]
    ready = [(keys[i], i) for i in range(count) if not before[i]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, chosen = heapq.heappop(ready)
        order.append(chosen)
        for j in then[chosen]:
            before[j] -= 1
            if not before[j]:
                heapq.heappush(ready, (keys[j], j))
    return order


def _chain(node):
    """`self.proj.weight` -> "self.proj.weight"; None for anything not a dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _effects(statement):
    """(reads, writes, barrier) of a statement's own expressions (not the statements it holds):
    the dotted names it reads and writes, whole (`self.proj.weight`, not `self`); barrier where
    it may leave the block or its effects are unknown (a bare call, a return, a yield)."""
    reads, writes = set(), set()
    barrier = isinstance(statement, (*TERMINAL, ast.Global, ast.Nonlocal)) or (
        isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
    )
    if isinstance(statement, DEFS):
        writes.add(statement.name)
    if isinstance(statement, ast.AugAssign) and _chain(statement.target) is not None:
        reads.add(_chain(statement.target))
    todo = [value for name, value in ast.iter_fields(statement) if name not in BLOCKS and name != "body"]
    todo += [h.type for h in getattr(statement, "handlers", ()) if h.type is not None]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            todo.extend(item for item in node if isinstance(item, ast.AST) and not isinstance(item, ast.stmt))
            continue
        if not isinstance(node, ast.AST):
            continue
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
            barrier = True
        chain = _chain(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if chain is not None:
            (reads if isinstance(node.ctx, ast.Load) else writes).add(chain)
            continue  # the chain is whole: `self` of `self.proj` is not read apart
        if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
            base = _chain(node.value)
            if base is not None:
                writes.add(base)
        todo.extend(value for _, value in ast.iter_fields(node))
    return reads, writes, barrier


def _prefixes(chains: set) -> frozenset:
    """Every dotted name each chain starts with, itself included: `self.q.weight` -> `self`,
    `self.q`, `self.q.weight`."""
    found = set()
    for chain in chains:
        parts = chain.split(".")
        found.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return frozenset(found)


def _conflict(first, second) -> bool:
    """Whether one of two statements writes what the other reads or writes, a dotted name
    meeting any name it extends (`self.q` and `self.q.weight`, `self` and `self.q`; not `self.q`
    and `self.k`): set intersections, however many names they hold."""
    reads_1, writes_1, barrier_1, read_prefixes_1, write_prefixes_1 = first
    reads_2, writes_2, barrier_2, read_prefixes_2, write_prefixes_2 = second
    if barrier_1 or barrier_2:
        return True
    return not (
        writes_1.isdisjoint(read_prefixes_2)
        and writes_1.isdisjoint(write_prefixes_2)
        and reads_2.isdisjoint(write_prefixes_1)
        and writes_2.isdisjoint(write_prefixes_1)
        and reads_1.isdisjoint(write_prefixes_2)
        and writes_2.isdisjoint(read_prefixes_1)
    )
