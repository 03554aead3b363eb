"""What the similarity's passes share about Python's syntax tree (normalise.py, dead_code.py,
liveness.py, order.py): the kinds of statements they tell apart and iterative walks (a tree as
deep as the parser allows is walked without recursion)."""

import ast

TERMINAL = (ast.Return, ast.Raise, ast.Break, ast.Continue)
BLOCKS = ("body", "orelse", "finalbody")
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def walk(node):
    """Every node under `node` (itself included), iteratively; ast.walk's order does not matter
    here, and this is twice as fast."""
    todo = [node]
    while todo:
        node = todo.pop()
        yield node
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                todo.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                todo.append(value)


def blocks(tree):
    """Every statement list in `tree` (bodies, else branches, handlers, cases), iteratively."""
    todo = [tree]
    while todo:
        node = todo.pop()
        for name in BLOCKS:
            block = getattr(node, name, None)
            if isinstance(block, list):
                yield node, name, block
                todo.extend(block)
        todo.extend(getattr(node, "handlers", ()))
        todo.extend(getattr(node, "cases", ()))


def inner_blocks(statement) -> list:
    """The statement lists a statement holds (bodies, else branches, handlers', cases')."""
    found = [getattr(statement, name) for name in BLOCKS if isinstance(getattr(statement, name, None), list)]
    for holder in (*getattr(statement, "handlers", ()), *getattr(statement, "cases", ())):
        found.append(holder.body)
    return found
