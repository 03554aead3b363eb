"""Dead code, stripped from a submission before it is compared (normalise.py): what a copier
can add for free without changing what the program does.

    strip(trees, api)     # {path: ast.Module}, in place; `api`: names the grader calls

Stripped, until nothing more goes (at most MAX_PASSES rounds, each linear in the code): every
statement that is only a value (docstrings, `...`, a bare name) and `pass`; statements after a
`return`, `raise`, `break` or `continue`; the branch of an `if`/`while` on a constant (`if
False:`, `if 0 > 1:`, `x or True` where `x` has no effect); every `assert`; calls of built-ins as
statements (`print(...)`, `len(x)`); assignments of a name to itself and updates by `+ 0`, `* 1`;
expressions that are their operand (`x * 1`, `x.contiguous()`, `same(x)` where the submission's
`same` returns its argument: become `x`); and what nothing
live reaches (liveness.py): functions, classes and methods the grader does not call (`api`), and
assignments, imports and local functions whose names nothing live reads. Every walk is
iterative.
"""

import ast

from autograder.publish.report import liveness
from autograder.publish.report.syntax import TERMINAL, blocks, walk

# Built-ins whose call as a statement changes nothing the program computes (print: only output);
# a split word list (noqa SIM905): two lines to read, not 27.
NO_EFFECT_CALLS = frozenset(
    "print len repr str int float bool isinstance issubclass id type hash abs min max sum sorted "  # noqa: SIM905
    "list tuple dict set frozenset range format round divmod callable".split()
)

MAX_PASSES = 8  # rounds of stripping (each linear): dead code that takes more stays


def strip(trees: dict, api: frozenset) -> None:
    for tree in trees.values():
        _identities(tree)  # first: a helper's own `return x * 1` is `return x`
    for _ in range(MAX_PASSES):
        # each round: a helper padded with dead code is one that passes its argument once stripped
        passing = _pass_through(trees)
        inlined = [_identities(tree, passing) for tree in trees.values()] if passing else []
        for tree in trees.values():
            _tidy(tree)
        reads = liveness.Reads(trees)
        dropped = liveness.drop_unused_definitions(trees, api, reads)
        if dropped:
            reads = liveness.Reads(trees)
        dropped |= liveness.drop_dead_stores(trees, api, reads)
        if not dropped and not any(inlined):  # what tidying changed was seen by both: nothing more to strip
            return


def _tidy(tree) -> bool:
    """Unreachable statements, constant branches and statements that do nothing, everywhere
    (repeated on what a constant branch brings up, until nothing changes)."""
    changed = False
    for _, _, block in reversed(list(blocks(tree))):  # inner blocks first: an emptied body is seen
        while True:
            kept = []
            for statement in block:
                kept.extend(_simplified(statement) or [])
                if kept and isinstance(kept[-1], TERMINAL):
                    break
            if len(kept) == len(block) and all(a is b for a, b in zip(kept, block, strict=True)):
                break
            block[:] = kept
            changed = True
    return changed


def _simplified(statement):
    """What `statement` becomes: a list of statements (itself, its live branch's), or None."""
    if isinstance(statement, ast.Pass):
        return None
    if isinstance(statement, ast.Expr) and isinstance(
        statement.value, (ast.Constant, ast.Name, ast.Attribute, ast.JoinedStr)
    ):
        return None  # docstrings, `...`, a bare name: nothing happens
    if isinstance(statement, ast.If):
        truth = _truth(statement.test)
        if truth is not None:
            return list(statement.body if truth else statement.orelse)
        if not statement.body and not statement.orelse and _pure(statement.test):
            return None
    if isinstance(statement, ast.While) and _truth(statement.test) is False:
        return list(statement.orelse)
    if isinstance(statement, (ast.For, ast.AsyncFor)) and not statement.body and not statement.orelse:
        return None
    if isinstance(statement, (ast.Try, getattr(ast, "TryStar", ast.Try))) and not statement.body:
        return list(statement.finalbody)
    if isinstance(statement, ast.Assert):
        return None  # a check that passes changes nothing a correct program computes
    if (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Call)
        and isinstance(statement.value.func, ast.Name)
        and statement.value.func.id in NO_EFFECT_CALLS
    ):
        return None
    if isinstance(statement, ast.AnnAssign):
        if statement.value is None:
            return None
        return [ast.copy_location(ast.Assign(targets=[statement.target], value=statement.value), statement)]
    if _no_op(statement):
        return None
    return [statement]


def _identities(tree, passing: dict = None) -> bool:
    """Expressions that are their operand: `x * 1`, `x + 0`, `1 * x`, `+x`, `-(-x)`,
    `x.contiguous()`, `x.clone()`, and a call of a function of the submission that returns one
    of its arguments as it is (`passing`: _pass_through), become `x` everywhere (a copier's free
    padding)."""
    passing = passing or {}
    changed = False
    for node in walk(tree):
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.expr):
                simpler = _operand(value, passing)
                while simpler is not None:
                    value, changed = simpler, True
                    simpler = _operand(value, passing)
                setattr(node, name, value)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    simpler = _operand(item, passing) if isinstance(item, ast.expr) else None
                    while simpler is not None:
                        value[i], changed = simpler, True
                        simpler = _operand(value[i], passing)
    return changed


def _pass_through(trees: dict) -> dict:
    """{name: index} of the module-level functions of the submission, in any of its files, whose
    whole body (a docstring aside) returns their positional argument `index` as it is:
    `def same(x): return x` wrapped around every value hides a copy from k-grams for free."""
    found = {}
    for tree in trees.values():
        for statement in tree.body:
            if isinstance(statement, ast.FunctionDef) and not statement.decorator_list:
                name, arguments, body = statement.name, statement.args, statement.body
                if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                    body = body[1:]  # its docstring
                result = body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else None
            elif (  # same = lambda x: x
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and isinstance(statement.value, ast.Lambda)
            ):
                name, arguments, result = statement.targets[0].id, statement.value.args, statement.value.body
            else:
                continue
            positional = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
            if isinstance(result, ast.Name) and result.id in positional:
                found[name] = positional.index(result.id)
    return found


_RIGHT_IDENTITY = {ast.Add: 0, ast.Sub: 0, ast.Mult: 1, ast.Div: 1, ast.FloorDiv: 1, ast.Pow: 1}
_LEFT_IDENTITY = {ast.Add: 0, ast.Mult: 1}
_SAME_VALUE_METHODS = ("contiguous", "clone")


def _operand(node, passing: dict = None):
    """The operand `node` is the identity of, or None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (passing or {}):
        index = passing[node.func.id]
        if not node.keywords and index < len(node.args) and not any(isinstance(a, ast.Starred) for a in node.args):
            return node.args[index]
    if isinstance(node, ast.BinOp):
        op = type(node.op)
        if op in _RIGHT_IDENTITY and _constant(node.right) == _RIGHT_IDENTITY[op]:
            return node.left
        if op in _LEFT_IDENTITY and _constant(node.left) == _LEFT_IDENTITY[op]:
            return node.right
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.UAdd):
            return node.operand
        if (
            isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.UnaryOp)
            and isinstance(node.operand.op, ast.USub)
        ):
            return node.operand.operand
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _SAME_VALUE_METHODS
        and not node.args
        and not node.keywords
    ):
        return node.func.value
    return None


def _no_op(statement) -> bool:
    """`x = x`, `x += 0`, `x *= 1`, `x = x + 0`, `x = x * 1` and the like."""
    identity = {ast.Add: 0, ast.Sub: 0, ast.Mult: 1, ast.Div: 1, ast.FloorDiv: 1, ast.Pow: 1}
    if isinstance(statement, ast.AugAssign):
        return type(statement.op) in identity and _constant(statement.value) == identity[type(statement.op)]
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target, value = statement.targets[0], statement.value
        if _same(target, value):
            return True
        if isinstance(value, ast.BinOp) and type(value.op) in identity and _same(target, value.left):
            return _constant(value.right) == identity[type(value.op)]
    return False


def _same(a, b) -> bool:
    if isinstance(a, ast.Name) and isinstance(b, ast.Name):
        return a.id == b.id
    if isinstance(a, ast.Attribute) and isinstance(b, ast.Attribute):
        return a.attr == b.attr and _same(a.value, b.value)
    return False


def _constant(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    return None


_COMPARE = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}


def _truth(node):
    """True or False where `node`'s truth is fixed whatever the program does (`False`, `0`,
    `not True`, `1 > 2`, `x or True` with a `x` that has no effect), else None."""
    if isinstance(node, ast.Constant):
        try:
            return bool(node.value)
        except Exception:  # noqa: BLE001 - a constant whose truth cannot be taken: unknown
            return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _truth(node.operand)
        return None if inner is None else not inner
    if isinstance(node, ast.BoolOp):
        values = [_truth(value) for value in node.values]
        decisive = isinstance(node.op, ast.Or)  # `or` is decided by a True, `and` by a False
        if any(value is decisive for value in values) and all(_pure(value) for value in node.values):
            return decisive
        if all(value is not None for value in values):
            return any(values) if decisive else all(values)
        return None
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        left, right = _literal(node.left), _literal(node.comparators[0])
        if left is not _UNKNOWN and right is not _UNKNOWN:
            try:
                return bool(_COMPARE[type(node.ops[0])](left, right))
            except TypeError:
                return None
    return None


_UNKNOWN = object()


def _literal(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
        if isinstance(node.value, str) and len(node.value) > 1000:
            return _UNKNOWN
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literal(node.operand)
        return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else _UNKNOWN
    return _UNKNOWN


def _pure(node) -> bool:
    """No call, no assignment expression, no await, no yield anywhere in `node`."""
    return not any(isinstance(n, (ast.Call, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)) for n in walk(node))
