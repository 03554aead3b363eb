"""A submission's code as the similarity section compares it: what is left once the disguises a
copier can add for free are taken away.

    units = package_units({"attention.py": text, "util/helpers.py": text}, api_names(skeleton))
    units[0].tokens        # ["def", "V", "(", "V", ",", ...]: one function, normalised
    units[0].places        # per token: (file, first line, last line) of the statement it is from

A package becomes units: each function and method of it, each class's own statements and each
file's own statements (constants; not its imports). A unit does not care which file it is in nor where in
the file, so a function moved into a sub-package, or a file split in two, is the same units. In a
unit:

- names are normalised: every name the submission binds (variables, parameters, its functions,
  classes and attributes) is `V`; a module imported under another name is its dotted name
  (`F` -> `torch.nn.functional`); every string literal is `'STR'`; numbers are their value
  as a float (`1` and `1.0` alike); annotations are dropped;
- dead code is stripped (dead_code.py): comments, docstrings, `pass`, code after a `return`,
  branches on constants, no-op updates, assignments and imports nothing reads, functions and
  methods nothing calls that the skeleton does not define (the API the grader calls: `api`);
- statements that do not depend on each other are put in one canonical order (order.py), so
  swapping them changes nothing.

A file Python cannot parse (or nested deeper than this process can walk) is one unit of its raw
tokens, names and strings normalised, comments dropped. Everything here is iterative or bounded
in depth by Python's parser; a walk too deep for it falls back the same way.
"""

import ast
import builtins
import io
import keyword
import re
import tokenize
from dataclasses import dataclass, field

from autograder.publish.report import dead_code, order, syntax

NAME = "V"  # every name the submission binds
STRING = "STR"  # every string literal
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|==|!=|<=|>=|\*\*|//|->|<<|>>|\S")
_BUILTINS = frozenset(dir(builtins))
_KEYWORDS = frozenset(keyword.kwlist)


@dataclass
class Unit:
    """One function, method, class body or file body, normalised."""

    file: str
    tokens: list = field(default_factory=list)
    places: list = field(default_factory=list)  # per token: (file, first line, last line)


def api_names(files: dict) -> frozenset:
    """The names the skeleton defines (its functions, classes, their methods, its module-level
    names): the grader calls them, so they are live however little the submission uses them."""
    names = set()
    for text in files.values():
        tree = _parse(text)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, syntax.DEFS):
                names.add(node.name)
                if isinstance(node, ast.ClassDef):
                    names.update(item.name for item in node.body if isinstance(item, syntax.DEFS))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in syntax.walk(t) if isinstance(n, ast.Name))
    return frozenset(names)


def package_units(files: dict, api: frozenset = frozenset()) -> list:
    """The units of a package: `files` {path inside the package: text}; `api` the names the
    grader calls (api_names of the skeleton)."""
    trees, units = {}, []
    for path, text in sorted(files.items()):
        tree = _parse(text)
        if tree is None:
            units.append(raw_unit(path, text))
        else:
            trees[path] = tree
    if not trees:
        return [unit for unit in units if unit.tokens]
    try:
        facts = _Facts(trees, files)
        dead_code.strip(trees, api)
        for tree in trees.values():
            order.note_effects(tree)
        _rename(trees, facts)
    except RecursionError:  # a tree deeper than this process walks: every file as raw tokens
        return [unit for unit in (raw_unit(path, files[path]) for path in sorted(files)) if unit.tokens]
    for path, tree in trees.items():
        try:
            units.extend(_units(path, tree))
        except RecursionError:
            units.append(raw_unit(path, files[path]))
    return [unit for unit in units if unit.tokens]


def _parse(text: str):
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


def raw_unit(path: str, text: str) -> Unit:
    """A file Python cannot parse, as its tokens (up to the first it cannot read): names `V`
    (keywords and built-ins kept), strings `'STR'`, comments and layout dropped."""
    unit = Unit(path)
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in skip or token.type == tokenize.ENDMARKER:
                continue
            if token.type == tokenize.NAME:
                word = token.string if token.string in _KEYWORDS or token.string in _BUILTINS else NAME
            elif token.type == tokenize.STRING:  # as a parsed file's: the literal 'STR'
                for word in ("'", STRING, "'"):
                    unit.tokens.append(word)
                    unit.places.append((path, token.start[0], token.end[0]))
                continue
            elif token.type == tokenize.NUMBER:
                word = _number(token.string)
            else:
                word = token.string
            unit.tokens.append(word)
            unit.places.append((path, token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return unit


def _number(text: str) -> str:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    return _number_value(value)


def _number_value(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return repr(value)
    return repr(_float(value))


def _float(value) -> float:
    """A number as a float (`1` and `1.0` alike; an int too large for one: infinity)."""
    try:
        return float(value)
    except OverflowError:
        return float("inf")


# ------------------------------------------------------------------------------- the package's facts
class _Facts:
    """What the whole package binds, imports and reads (before anything is stripped)."""

    def __init__(self, trees: dict, files: dict):
        own = {path.rsplit("/", 1)[-1].removesuffix(".py") for path in files} | {
            part for path in files for part in path.split("/")[:-1]
        }
        self.own = own  # the package's own module and folder names
        self.modules = {}  # alias -> dotted name of an imported module or member (not the package's own)
        self.bound = set()  # names the submission binds
        self.attributes = set()  # attribute names it assigns or defines (methods)
        self.parameters = set()  # parameter names of its functions
        for tree in trees.values():
            for node in syntax.walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        root = alias.name.split(".")[0]
                        if root in own:
                            self.bound.add(alias.asname or root)
                        elif alias.asname:
                            self.modules[alias.asname] = alias.name
                        else:
                            self.modules[root] = root
                elif isinstance(node, ast.ImportFrom):
                    external = node.level == 0 and node.module and node.module.split(".")[0] not in own
                    for alias in node.names:
                        local = alias.asname or alias.name
                        if external and alias.name != "*":
                            self.modules[local] = f"{node.module}.{alias.name}"
                        else:
                            self.bound.add(local)
                elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    self.bound.add(node.id)
                elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
                    self.attributes.add(node.attr)
                elif isinstance(node, syntax.DEFS):
                    self.bound.add(node.name)
                    if isinstance(node, ast.ClassDef):
                        self.attributes.update(item.name for item in node.body if isinstance(item, syntax.DEFS))
                elif isinstance(node, ast.arg):
                    self.bound.add(node.arg)
                    self.parameters.add(node.arg)
                elif isinstance(node, ast.ExceptHandler) and node.name:
                    self.bound.add(node.name)
                elif isinstance(node, (ast.Global, ast.Nonlocal)):
                    self.bound.update(node.names)
        for name in self.bound:
            self.modules.pop(name, None)  # an alias also bound otherwise is a name like any other


# ---------------------------------------------------------------------------------------- names
def _rename(trees: dict, facts: _Facts) -> None:
    for tree in trees.values():
        for node in syntax.walk(tree):
            if isinstance(node, ast.Name):
                node.id = facts.modules.get(node.id) or (NAME if node.id in facts.bound else node.id)
            elif isinstance(node, ast.Attribute):
                if node.attr in facts.attributes:
                    node.attr = NAME
            elif isinstance(node, syntax.DEFS):
                node.name = NAME
            elif isinstance(node, ast.arg):
                node.arg, node.annotation = NAME, None
            elif isinstance(node, ast.keyword):
                if node.arg in facts.parameters:
                    node.arg = NAME
            elif isinstance(node, ast.ExceptHandler):
                node.name = NAME if node.name else None
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    alias.name = NAME if alias.name.split(".")[0] in facts.own else alias.name
                    alias.asname = None
            elif isinstance(node, ast.ImportFrom):
                own = node.level or not node.module or node.module.split(".")[0] in facts.own
                if own:
                    node.module, node.level = NAME, 0
                for alias in node.names:
                    alias.name = NAME if own and alias.name != "*" else alias.name
                    alias.asname = None
            elif isinstance(node, ast.Constant):
                if isinstance(node.value, (str, bytes)):
                    node.value, node.kind = STRING, None
                elif isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
                    node.value = _float(node.value)
            elif isinstance(node, ast.JoinedStr):
                node.values = [ast.Constant(value=STRING)]
            if isinstance(node, syntax.FUNCTIONS):
                node.returns = None


# ---------------------------------------------------------------------------------------- units
def _units(path: str, tree) -> list:
    """A file's units: each top-level function, each method, each class's own statements, and
    the file's own statements but its imports (where a name comes from is in the names already:
    `F.softmax` is `torch.nn.functional.softmax`)."""
    units, residue = [], []
    for node in tree.body:
        if isinstance(node, syntax.FUNCTIONS):
            units.append(_unit(path, [node]))
        elif isinstance(node, ast.ClassDef):
            methods = [item for item in node.body if isinstance(item, syntax.FUNCTIONS)]
            units.extend(_unit(path, [method]) for method in methods)
            shell = ast.ClassDef(
                name=node.name,
                bases=node.bases,
                keywords=node.keywords,
                body=[item for item in node.body if not isinstance(item, syntax.FUNCTIONS)],
                decorator_list=node.decorator_list,
            )
            units.append(_unit(path, [ast.copy_location(shell, node)]))
        elif not isinstance(node, (ast.Import, ast.ImportFrom)):  # every student imports torch: no evidence
            residue.append(node)
    units.append(_unit(path, residue))
    return units


def _unit(path: str, statements: list) -> Unit:
    unit = Unit(path)
    for text, first, last in _emit_block(statements):
        unit.tokens.append(text)
        unit.places.append((path, first, last))
    return unit


def _expression(node) -> list:
    return _TOKEN.findall(ast.unparse(node)) if node is not None else []


def _emit_block(statements: list) -> list:
    """The tokens of a block, its statements in canonical order: [(token, first, last line)]."""
    emitted = [_emit(statement) for statement in statements]
    ranks = order.canonical_order(statements, emitted)
    return [token for index in ranks for token in emitted[index]]


def _emit(statement) -> list:
    first = getattr(statement, "lineno", 0)
    last = getattr(statement, "end_lineno", first) or first

    def head(words, end=None):
        return [(word, first, end or first) for word in words]

    def block(statements, *opening):
        inner = _emit_block(statements)
        return head(opening) + [("{", first, first)] + inner + [("}", last, last)] if statements else []

    if isinstance(statement, syntax.FUNCTIONS):
        words = [w for d in statement.decorator_list for w in ["@", *_expression(d)]]
        words += ["def", NAME, "(", *_TOKEN.findall(ast.unparse(statement.args)), ")", ":"]
        return head(words) + block(statement.body)
    if isinstance(statement, ast.ClassDef):
        words = [w for d in statement.decorator_list for w in ["@", *_expression(d)]]
        words += ["class", NAME, "(", *[w for b in statement.bases for w in [*_expression(b), ","]], ")", ":"]
        return head(words) + block(statement.body)
    if isinstance(statement, ast.If):
        return (
            head(["if", *_expression(statement.test), ":"])
            + block(statement.body)
            + block(statement.orelse, "else", ":")
        )
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        words = ["for", *_expression(statement.target), "in", *_expression(statement.iter), ":"]
        return head(words) + block(statement.body) + block(statement.orelse, "else", ":")
    if isinstance(statement, ast.While):
        return (
            head(["while", *_expression(statement.test), ":"])
            + block(statement.body)
            + block(statement.orelse, "else", ":")
        )
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        words = ["with"]
        for item in statement.items:
            words += _expression(item.context_expr) + (
                ["as", *_expression(item.optional_vars)] if item.optional_vars else []
            )
        return head([*words, ":"]) + block(statement.body)
    if isinstance(statement, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        out = head(["try", ":"]) + block(statement.body)
        for handler in statement.handlers:
            words = ["except", *_expression(handler.type), *(["as", NAME] if handler.name else []), ":"]
            out += [(w, handler.lineno, handler.lineno) for w in words] + block(handler.body)
        return out + block(statement.orelse, "else", ":") + block(statement.finalbody, "finally", ":")
    return head(_TOKEN.findall(ast.unparse(statement)), last)
