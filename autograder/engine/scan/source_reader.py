"""The reader of the source policy: every statement of a graded file, against source_policy.py.

    findings(source)   # (Refusal, ...): the first is what the student is told, () when clean

source_policy.py says what is allowed and why (data); this module walks the AST and applies it.
One module, though long: _Reader is one visitor whose rules share its state (the file's aliases,
the names it binds, the strings it builds); split, each part would need all of it.
"""

import ast
import builtins
import codecs
import functools
import importlib.metadata
import re
import sys
from dataclasses import dataclass

from autograder.engine.scan import library
from autograder.engine.scan.source_policy import (
    _ALLOWED_ROOTS,
    _CODE_CHARS,
    ALLOWED_BUILTINS,
    ALLOWED_MODULES,
    CLASS_NAMES,
    DANGEROUS_NAMES,
    DECORATORS,
    DEFINABLE_DUNDERS,
    DUNDER_NAMES,
    DUNDERS,
    DYNAMIC_CODE,
    FRAME_ATTRIBUTES,
    GLOBAL_DENY,
    GLOBAL_DENY_MEMBERS,
    GLOBAL_DENY_MODULES,
    GRADER_MODULE_NAMES,
    GRADER_PACKAGES,
    GRADER_PATH,
    LOOKUPS,
    MAX_FINDINGS,
    MAX_FOLDED,
    MAX_FOLDED_TOTAL,
    MAX_SOURCE_CHARS,
    MODULE_DENY,
    NAME_CHANNELS,
    PUBLIC_UNDERSCORED,
    REBIND_DENY,
    SOME_MEMBERS,
    TORCH_HOOKS,
    UNSUBCLASSABLE,
)


@dataclass(frozen=True)
class Refusal:
    """One construct of a graded file outside what an attention exercise needs."""

    message_id: str  # why: an engine message id (`policy.*`), placeholders {code} and {name}
    code: str  # the construct as written: one line of the source, cut short
    name: str  # what it reaches: a module, a dotted name, an attribute, a built-in
    line: int  # 1-based line of the file


def _exceptions() -> frozenset:
    return frozenset(
        name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
    )


_BUILTIN_NAMES = frozenset(dir(builtins))
_ALLOWED_BUILTINS = ALLOWED_BUILTINS | _exceptions()


@functools.lru_cache(maxsize=1)
def _installed_roots() -> frozenset:
    """Top-level names of the Python installation's modules (the standard library and every
    installed distribution): an import of one that is not allowed is refused. Any other name is
    a file of the submission (or a missing module, which fails at import with its own message)."""
    try:
        distributions = set(importlib.metadata.packages_distributions())
    except Exception:  # noqa: BLE001 - a broken distribution's metadata: the standard library still counts
        distributions = set()
    return frozenset(sys.stdlib_module_names) | distributions | GRADER_PACKAGES


_loaded, _member, private_deny, _is_dunder = library.loaded, library.member, library.private_deny, library.is_dunder


_READABLE_DUNDER_NAMES = DUNDER_NAMES | DEFINABLE_DUNDERS
_HARMLESS_DUNDER_STRINGS = DUNDERS | DEFINABLE_DUNDERS | DUNDER_NAMES | {"__main__"}
_DUNDER = re.compile(r"__\w+__")


def library_private(attr: str) -> bool:
    """A private name that a library class or object owns (library.private_owners)."""
    return library.is_private(attr) and attr in library.private_owners()


@functools.lru_cache(maxsize=1)
def _channels() -> dict:
    """{id(library object): (first literal argument, keywords) or None (refused)} for NAME_CHANNELS."""
    found = {}
    for dotted, rule in NAME_CHANNELS.items():
        value = library.resolve(dotted)
        if value is not None:
            found[id(value)] = rule
    return found


@functools.lru_cache(maxsize=1)
def _decorators() -> frozenset:
    """ids of the DECORATORS' library objects."""
    return frozenset(id(v) for v in map(library.resolve, DECORATORS) if v is not None)


def _makes_enum(call) -> bool:
    """An enumeration called with names (its functional API) makes a class of them."""
    return len(call.args) >= 2 or any(k.arg in ("names", None) for k in call.keywords)


def _type_of_one_value(node, parent) -> bool:
    """`type(x)`: the type of one object, the only use of `type` graded code needs."""
    return (
        isinstance(parent, ast.Call)
        and parent.func is node
        and len(parent.args) == 1
        and not isinstance(parent.args[0], ast.Starred)
        and not parent.keywords
    )


def is_main_test(test) -> bool:
    """`__name__ == "__main__"` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
    )


def _docstring_ids(expressions) -> set:
    """Statement-level strings (docstrings and bare string statements): text, not values."""
    return {
        id(node.value)
        for node in expressions
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }


_ONLY_PERCENT_S = re.compile(r"(?:[^%]|%[s%])*", re.DOTALL)


def _int_literal(node):
    """None for no bound, the int of `3` or `-1`, else False (not a literal bound)."""
    if node is None:
        return None
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sign, node = -1, node.operand
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return sign * node.value
    return False


def _folded_strings(every) -> dict:
    """{id(node): str} for each expression built from string literals ('auto' + 'grader',
    f'{"auto"}grader', ''.join([...]), 'redargotua'[::-1], '%s' % 'x'), computed bottom-up
    (`every`: the candidate nodes in breadth-first order, children after parents), without
    recursion."""
    value, budget = {}, MAX_FOLDED_TOTAL
    for node in reversed(every):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
        elif isinstance(node, ast.BinOp):
            left, right = value.get(id(node.left)), value.get(id(node.right))
            if isinstance(node.op, ast.Add) and left is not None and right is not None:
                text = left + right
            elif isinstance(node.op, ast.Mod) and left is not None and _ONLY_PERCENT_S.fullmatch(left):
                # only %s: a width or precision ('%0999999999d') would make the judge build it
                parts = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
                if (
                    all(id(p) in value for p in parts)
                    and len(left) + sum(len(value[id(p)]) for p in parts) <= MAX_FOLDED
                ):
                    try:
                        text = left % tuple(value[id(p)] for p in parts)
                    except (TypeError, ValueError):
                        text = None
            elif isinstance(node.op, ast.Mult) and left is not None and isinstance(node.right, ast.Constant):
                count = node.right.value
                text = left * count if isinstance(count, int) and 0 <= count * len(left) <= MAX_FOLDED else None
        elif isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.FormattedValue) else v for v in node.values]
            if all(id(p) in value for p in parts):
                text = "".join(value[id(p)] for p in parts)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) <= 1:
            glue, arg = value.get(id(node.func.value)), (node.args or [None])[0]
            if glue is not None and node.func.attr == "join" and isinstance(arg, (ast.List, ast.Tuple)):
                if all(id(e) in value for e in arg.elts):
                    size = sum(len(value[id(e)]) for e in arg.elts) + len(glue) * len(arg.elts)
                    text = glue.join(value[id(e)] for e in arg.elts) if size <= MAX_FOLDED else None
            elif glue is not None and node.func.attr == "decode":
                text = glue
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and id(node.value) in value:
            bounds = [_int_literal(b) for b in (node.slice.lower, node.slice.upper, node.slice.step)]
            if all(b is None or isinstance(b, int) for b in bounds) and bounds[2] != 0:
                text = value[id(node.value)][slice(*bounds)]
        if isinstance(node, ast.Constant) and text is not None:
            value[id(node)] = text  # the source's own: no new memory
        elif text is not None and len(text) <= min(MAX_FOLDED, budget):
            budget -= len(text)
            value[id(node)] = text
    return value


_STRING_BUILDERS = (ast.Constant, ast.BinOp, ast.JoinedStr, ast.FormattedValue, ast.Call, ast.Subscript)


class _Reader:
    """One file's findings: bindings first (names, aliases), then every graded node."""

    def __init__(self, source: str, tree):
        self.lines = re.split(r"\r\n|\r|\n", source.removeprefix("\ufeff"))  # Python's lines, not splitlines()
        self.tree = tree
        self.found = []
        # One breadth-first pass (a node before its children): each node's parent, and the nodes
        # by type, so that each rule looks only at the nodes it is about.
        self.parent = {}
        self.nodes = {}
        order = [tree]
        for node in order:
            self.nodes.setdefault(type(node), []).append(node)
            for child in ast.iter_child_nodes(node):
                self.parent[id(child)] = node
                order.append(child)
        strings = [n for n in order if isinstance(n, _STRING_BUILDERS)]
        del order
        self.bound = self._bound_names()
        self.kinds = {}  # Name id -> ('module', dotted) | ('object', owner) | ('own',) | ('own_module',)
        self._expression_kinds = {}
        self._bind_imports()
        self._bind_aliases()
        self.folded = _folded_strings(strings)
        self.docstrings = _docstring_ids(self.of(ast.Expr))
        self._defined = {}  # id(ClassDef) -> the names it defines

    def of(self, *types_) -> list:
        """The nodes of these AST types."""
        if len(types_) == 1:
            return self.nodes.get(types_[0], [])
        return [node for t in types_ for node in self.nodes.get(t, [])]

    # -------------------------------------------------------------- reporting

    def report(self, message_id: str, node, name: str) -> None:
        if len(self.found) >= 4 * MAX_FINDINGS:  # keep the first ones by line, in bounded memory
            self.found.sort(key=lambda f: f.line)
            del self.found[MAX_FINDINGS:]
        line = getattr(node, "lineno", 1)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        start = getattr(node, "col_offset", 0) if getattr(node, "end_lineno", None) == line else 0
        end = getattr(node, "end_col_offset", None) if getattr(node, "end_lineno", None) == line else None
        code = text.encode("utf-8")[start:end].decode("utf-8", "replace").strip() or text.strip()
        if len(code) > _CODE_CHARS:
            code = code[: _CODE_CHARS - 3] + "..."
        self.found.append(Refusal(message_id, code, str(name)[:_CODE_CHARS], line))

    # -------------------------------------------------------------- bindings

    def _bound_names(self) -> set:
        """Every name the file binds somewhere (a scope-blind over-approximation)."""
        bound = {node.id for node in self.of(ast.Name) if not isinstance(node.ctx, ast.Load)}
        bound.update(node.arg for node in self.of(ast.arg))
        bound.update(node.name for node in self.of(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        bound.update(node.asname or node.name.split(".")[0] for node in self.of(ast.alias))
        bound.update(name for node in self.of(ast.Global, ast.Nonlocal) for name in node.names)
        bound.update(node.name for node in self.of(ast.ExceptHandler, ast.MatchAs, ast.MatchStar) if node.name)
        bound.update(node.rest for node in self.of(ast.MatchMapping) if node.rest)
        return bound

    def _bind(self, name: str, kind) -> None:
        """Flow-insensitive: a name once bound to a library module or object keeps that kind
        (the stricter reading), whatever else it is bound to elsewhere."""
        if kind is None:
            return
        old = self.kinds.get(name)
        rank = {"module": 3, "object": 2, "own_module": 1, "own": 1}
        if old is None or rank[kind[0]] > rank[old[0]]:
            self.kinds[name] = kind

    @staticmethod
    def _root_kind(top: str):
        """'allowed' (a library graded code may import), 'refused' (any other module of the Python
        installation, or the grader) or 'own' (a file of the submission, or nothing)."""
        if top in _ALLOWED_ROOTS:
            return "allowed"
        return "refused" if top in _installed_roots() else "own"

    def _bind_imports(self) -> None:
        for node in self.of(ast.Import, ast.ImportFrom):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    root = self._root_kind(alias.name.split(".")[0])
                    if root == "own":
                        self._bind(alias.asname or alias.name.split(".")[0], ("own_module",))
                    elif root == "allowed":
                        bound = alias.name if alias.asname else alias.name.split(".")[0]
                        self._bind(alias.asname or bound, ("module", bound))
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level or self._root_kind(module.split(".")[0]) == "own":
                    # `from . import heads`, `from <package> import heads`: a module of the
                    # submission; `from .heads import x`: something defined there
                    kind = ("own_module",) if not node.module or "." not in module and not node.level else ("own",)
                    for alias in node.names:
                        self._bind(alias.asname or alias.name, kind)
                elif self._root_kind(module.split(".")[0]) == "allowed":
                    for alias in node.names:
                        if alias.name != "*":
                            self._bind(alias.asname or alias.name, self._step(("module", module), alias.name))

    def _bind_aliases(self) -> None:
        """`X = <a library module or object>` (`F = nn.functional`, `T = torch.Tensor`): X has
        that kind too. Repeated until nothing changes (aliases of aliases)."""
        assignments = [node for node in self.of(ast.Assign, ast.AnnAssign) if node.value is not None]
        for _ in range(8):
            before = dict(self.kinds)
            self._expression_kinds = {}
            for node in assignments:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                kind = self.kind(node.value)
                if kind is not None and all(isinstance(t, ast.Name) for t in targets):
                    for target in targets:
                        self._bind(target.id, kind if kind[0] != "own_module" else ("own",))
            if self.kinds == before:
                break
        self._expression_kinds = {}

    @staticmethod
    def _step(kind, attr: str):
        """The kind of `<kind>.attr`."""
        if kind is None:
            return None
        if kind[0] == "module":
            member = _member(kind[1], attr)
            if member is not None and member[0] == "module":
                return member
            return ("object", f"{kind[1]}.{attr}")
        if kind[0] == "object":
            return ("object", f"{kind[1]}.{attr}")
        return ("own",)

    def kind(self, node):
        """What an expression statically is: a library module, an object of a library, something of
        the submission's own files, or None (anything else: self, locals, calls ...)."""
        chain = []
        while isinstance(node, ast.Attribute) and id(node) not in self._expression_kinds:
            chain.append(node)
            node = node.value
        if isinstance(node, ast.Attribute):
            kind = self._expression_kinds[id(node)]
        elif isinstance(node, ast.Name):
            kind = self.kinds.get(node.id)
        else:
            kind = None
        for attribute in reversed(chain):
            kind = self._step(kind, attribute.attr)
            self._expression_kinds[id(attribute)] = kind
        return kind

    # -------------------------------------------------------------- what is graded

    def skipped(self) -> set:
        """Ids of the nodes that are not graded code: the body of a module-level
        `if __name__ == "__main__":` and the bodies of unreferenced test functions."""
        roots = []
        referenced = self._referenced()
        for node in self.tree.body:
            if (
                isinstance(node, ast.If)
                and is_main_test(node.test)
                and "__name__" not in self._rebound()
                or self._unreferenced_test(node, referenced)
            ):
                roots.extend(node.body)
            elif (
                isinstance(node, ast.ClassDef)
                and node.name.startswith("Test")
                and not node.decorator_list
                and not node.keywords  # a metaclass gets the class body's functions ...
                and not node.bases  # ... also one inherited from a base
            ):
                for method in node.body:
                    if self._unreferenced_test(method, referenced):
                        roots.extend(method.body)
        skipped = set()
        for root in roots:
            skipped.update(id(node) for node in ast.walk(root))
        return skipped

    def _rebound(self) -> set:
        return {n for n in REBIND_DENY if n in self.bound}

    def _referenced(self):
        """Names the file may call a test function by: every name and attribute it mentions and
        every string; None where it looks an attribute up by a computed name (anything may be)."""
        for node in self.of(ast.Call):
            if (
                isinstance(node.func, ast.Name)
                and node.func.id in LOOKUPS
                and len(node.args) >= 2
                and id(node.args[1]) not in self.folded
            ):
                return None
        names = {node.id for node in self.of(ast.Name)}
        names.update(node.attr for node in self.of(ast.Attribute))
        names.update(node.value for node in self.of(ast.Constant) if isinstance(node.value, str))
        names.update(name for node in self.of(ast.Global, ast.Nonlocal) for name in node.names)
        return names

    @staticmethod
    def _unreferenced_test(node, referenced) -> bool:
        return (
            referenced is not None
            and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name.startswith("test_")
            and node.name not in referenced
            and not node.decorator_list
        )

    # -------------------------------------------------------------- the rules

    def read(self) -> list:
        skipped = self.skipped()

        def graded(*types_):
            return [node for node in self.of(*types_) if id(node) not in skipped]

        for node in graded(ast.Import):
            self._import(node)
        for node in graded(ast.ImportFrom):
            self._import_from(node)
        for node in graded(ast.Attribute):
            self._attribute(node, node.value, node.attr, node.ctx)
        for node in graded(ast.Name):
            self._name(node)
        for node in graded(ast.Call):
            self._call(node)
        for node in graded(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler):
            if node.name:
                self._binding(node, node.name)
        for node in graded(ast.ClassDef):
            self._class(node)
        for node in graded(ast.keyword):
            if node.arg and _is_dunder(node.arg) and node.arg not in _HARMLESS_DUNDER_STRINGS:
                self.report("policy.protocol", node, node.arg)
        for node in graded(ast.MatchAs, ast.MatchStar):
            if node.name:
                self._binding(node, node.name)
        for node in graded(ast.MatchMapping):
            if node.rest:
                self._binding(node, node.rest)
        for node in graded(ast.arg):
            self._binding(node, node.arg)
        for node in graded(ast.Global, ast.Nonlocal):
            for name in node.names:
                self._binding(node, name)
        for node in graded(*_STRING_BUILDERS):
            if id(node) in self.folded and id(node) not in self.docstrings:
                self._string(node)
        return sorted(self.found, key=lambda f: f.line)[:MAX_FINDINGS]

    # -------------------------------------------------------------- classes

    def _enclosing_class(self, node):
        """(ClassDef, the first parameter's name) when `node` is in a method of a class of this
        file (not a staticmethod, not in a nested function), else (None, None)."""
        function = self.parent.get(id(node))
        while function is not None and not isinstance(
            function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
        ):
            function = self.parent.get(id(function))
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None, None
        owner = self.parent.get(id(function))
        if not isinstance(owner, ast.ClassDef):
            return None, None
        if any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in function.decorator_list):
            return owner, None
        positional = function.args.posonlyargs + function.args.args
        return owner, positional[0].arg if positional else None

    def _defines(self, classdef) -> set:
        """The names a class of this file defines: in its body (methods, class attributes,
        annotations, __slots__) and as `self.name = ...` in its methods."""
        key = id(classdef)
        if key in self._defined:
            return self._defined[key]
        names = set()
        for statement in classdef.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(statement.name)
                positional = (
                    statement.args.posonlyargs + statement.args.args if not isinstance(statement, ast.ClassDef) else []
                )
                if positional:
                    first = positional[0].arg
                    for inner in ast.walk(statement):
                        if (
                            isinstance(inner, ast.Attribute)
                            and isinstance(inner.ctx, ast.Store)
                            and isinstance(inner.value, ast.Name)
                            and inner.value.id == first
                        ):
                            names.add(inner.attr)
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                for target in targets:
                    for inner in ast.walk(target):
                        if isinstance(inner, ast.Name):
                            names.add(inner.id)
                if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in targets) and statement.value:
                    for inner in ast.walk(statement.value):
                        if isinstance(self.folded.get(id(inner)), str):
                            names.add(self.folded[id(inner)])
        self._defined[key] = names
        return names

    def _own_override(self, base, attr: str, of_library: bool = False) -> bool:
        """`self.attr`, `cls.attr` or `super().attr` in a method of a class of this file that
        defines `attr` itself (overriding a library's method of that name, or a name that happens
        to be a library's too), or `Name.attr` of a class of this file that defines it: the
        class's own. Never the state nn.Module keeps per object."""
        if base is None or of_library or attr in library.module_state():
            return False
        if isinstance(base, ast.Name) and base.id in self._module_classes and base.id not in self.kinds:
            return attr in self._defines(self._module_classes[base.id])
        classdef, first = self._enclosing_class(base)
        if classdef is None:
            return False
        is_self = isinstance(base, ast.Name) and first is not None and base.id == first
        is_super = isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super"
        return (is_self or is_super) and attr in self._defines(classdef)

    def _base_value(self, base):
        """The library object a base class expression stands for (a builtin such as dict too)."""
        if isinstance(base, ast.Name) and base.id not in self.kinds:
            return getattr(builtins, base.id, None) if base.id not in self.bound else None
        kind = self.kind(base)
        return library.resolve(kind[1]) if kind is not None and kind[0] == "object" else None

    @functools.cached_property
    def _module_classes(self) -> dict:
        """{name: ClassDef} of the classes this file defines at module level."""
        return {node.name: node for node in self.tree.body if isinstance(node, ast.ClassDef)}

    @functools.cached_property
    def _own_enums(self) -> set:
        """Names of the classes of this file that are enumerations (through a library enumeration
        or another such class of the file)."""
        classes = {node.name: node for node in self.of(ast.ClassDef)}
        enums = set()
        for _ in range(len(classes) + 1):
            before = len(enums)
            for name, node in classes.items():
                for base in node.bases:
                    if (isinstance(base, ast.Name) and base.id in enums) or library.is_enum_class(
                        self._base_value(base)
                    ):
                        enums.add(name)
            if len(enums) == before:
                break
        return enums

    def _class(self, node) -> None:
        """A class definition: its bases (no tensor, storage, array or dict type), its metaclass
        (a library's), an enumeration with members (one without is a maker of classes)."""
        for base in node.bases:
            value = self._base_value(base)
            if library.unsubclassable(value):
                self.report("policy.subclass", base, library.qualified(value))
        for keyword in node.keywords:
            if keyword.arg == "metaclass":
                kind = self.kind(keyword.value)
                value = library.resolve(kind[1]) if kind is not None and kind[0] == "object" else None
                if not library.is_metaclass(value):
                    self.report("policy.metaclass", keyword.value, "metaclass")
        if node.name in self._own_enums:
            members = [
                s
                for s in node.body
                if isinstance(s, (ast.Assign, ast.AnnAssign))
                and any(
                    isinstance(t, ast.Name) and not t.id.startswith("_")
                    for t in (s.targets if isinstance(s, ast.Assign) else [s.target])
                )
            ]
            if not members:
                self.report("policy.name_channel", node, f"{node.name} (an enumeration without members)")

    def _binding(self, node, name: str) -> None:
        if name in REBIND_DENY:
            self.report("policy.rebind", node, name)
        elif name in TORCH_HOOKS:
            self.report("policy.machinery", node, name)
        elif _is_dunder(name) and name not in DEFINABLE_DUNDERS:
            self.report("policy.protocol", node, name)

    def _import(self, node) -> None:
        for alias in node.names:
            root = self._root_kind(alias.name.split(".")[0])
            if root == "refused" or (root == "allowed" and alias.name not in ALLOWED_MODULES):
                self.report("policy.module", node, alias.name)
            if alias.asname:
                self._binding(node, alias.asname)

    def _import_from(self, node) -> None:
        module = node.module or ""
        root = "own" if node.level else self._root_kind(module.split(".")[0])
        for alias in node.names:
            if alias.asname or alias.name != "*":
                self._binding(node, alias.asname or alias.name)
        if root == "own":  # names the other file made with code read there; a star import: see _name
            for alias in node.names:
                if alias.name.startswith(("test_", "Test")):
                    self.report("policy.test_function", node, alias.name)
            return
        if root == "refused" or module not in ALLOWED_MODULES:
            self.report("policy.module", node, module)
            return
        for alias in node.names:
            if alias.name == "*":
                self.report("policy.star_import", node, module)
            else:
                self._member_rules(node, ("module", module), alias.name)

    def _member_rules(self, node, base_kind, attr: str, ctx=None, base=None) -> None:
        """The rules for reading (or, with ctx Store/Del, changing) `attr` of something of
        `base_kind` (see kind()); `base`: the expression, where the code has one."""
        of_library = base_kind is not None and base_kind[0] in ("module", "object")
        shown = f"{base_kind[1]}.{attr}" if of_library else attr
        changes = isinstance(ctx, (ast.Store, ast.Del))
        if base_kind is not None and base_kind[0] in ("own", "own_module") and attr.startswith(("test_", "Test")):
            # another file's test functions are not read there (see skipped()): not callable here
            self.report("policy.test_function", node, attr)
            return
        if _is_dunder(attr):
            if attr not in DUNDERS or changes:
                self.report("policy.reflection", node, attr)
            return
        if attr.startswith("_") and not _is_dunder(attr) and (of_library or attr in private_deny()):
            self.report("policy.private", node, shown)
            return
        if library_private(attr) and not self._own_override(base, attr, of_library):
            owner = min(library.private_owners()[attr], key=len)
            self.report("policy.private", node, f"{attr} ({owner})")
            return
        if attr in FRAME_ATTRIBUTES and not self._own_override(base, attr, of_library):
            self.report("policy.reflection", node, attr)
            return
        if base_kind is not None and base_kind[0] == "module" and attr not in SOME_MEMBERS.get(base_kind[1], (attr,)):
            self.report("policy.reflection", node, shown)
            return
        member = _member(base_kind[1], attr) if base_kind is not None and base_kind[0] == "module" else None
        if member is not None and member[0] == "module":  # known precisely: allowed or not
            if member[1] not in ALLOWED_MODULES:
                self.report("policy.module", node, member[1])
                return
        elif attr in GLOBAL_DENY_MODULES and not self._own_override(base, attr, of_library):
            self.report("policy.module", node, shown)
            return
        if (attr in GLOBAL_DENY_MEMBERS and not self._own_override(base, attr, of_library)) or (
            of_library and attr in MODULE_DENY.get(base_kind[1], ())
        ):
            self.report("policy.machinery", node, shown)
            return
        if changes and (of_library or (base_kind is not None and base_kind[0] == "own")):
            self.report("policy.patch", node, shown)

    def _attribute(self, node, base, attr, ctx) -> None:
        if attr == "__class__" and isinstance(ctx, ast.Load):
            parent = self.parent.get(id(node))
            if not (isinstance(parent, ast.Attribute) and parent.attr in CLASS_NAMES):
                self.report("policy.reflection", node, attr)
                return
        self._member_rules(node, self.kind(base), attr, ctx, base)
        if isinstance(ctx, ast.Load):
            self._module_value(node)
            self._library_object(node)

    def _library_object(self, node) -> None:
        """A library object that makes classes or attributes from names given at run time: a
        metaclass (only as `metaclass=` of a class definition), an API of NAME_CHANNELS (only
        called, with its names written in the code), an enumeration called with names."""
        kind = self.kind(node)
        if kind is None or kind[0] != "object":
            return
        value = library.resolve(kind[1])
        if value is None:
            return
        parent = self.parent.get(id(node))
        called = isinstance(parent, ast.Call) and parent.func is node
        if id(value) in _decorators() and not self._on_own_definition(node, parent, called):
            self.report("policy.patch", node, f"{kind[1]} (on a library's class or function)")
            return
        if library.is_metaclass(value):
            if not (isinstance(parent, ast.keyword) and parent.arg == "metaclass"):
                self.report("policy.metaclass", node, kind[1])
        elif id(value) in _channels():
            literal_from = _channels()[id(value)]
            if literal_from is None or not called or not self._names_written(parent, *literal_from):
                self.report("policy.name_channel", node, kind[1])
        elif called and library.is_enum_class(value) and _makes_enum(parent):
            self.report("policy.name_channel", node, kind[1])

    def _in_annotation(self, node) -> bool:
        """Whether `node` is part of an annotation (`cls: type[nn.Module]`): read, never called."""
        child, parent = node, self.parent.get(id(node))
        while parent is not None:
            if isinstance(parent, (ast.arg, ast.AnnAssign)) and parent.annotation is child:
                return True
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and parent.returns is child:
                return True
            if isinstance(parent, (ast.stmt, ast.arg)):
                return False
            child, parent = parent, self.parent.get(id(parent))
        return False

    def _on_own_definition(self, node, parent, called: bool) -> bool:
        """A decorator of a definition of this file (`@dataclass`, `@dataclass(frozen=True)`,
        `@functools.wraps(f)`), or a call whose first argument names one (`update_wrapper(w, f)`)."""
        place = self.parent.get(id(parent)) if called else parent
        expression = parent if called else node
        if (
            isinstance(place, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and expression in place.decorator_list
        ):
            return True
        # called with what it changes: functools.wraps(f) and dataclass(frozen=True) return a
        # decorator, which changes whatever it is applied to next (only a decorator position says)
        makes_decorator = called and (not parent.args or library.resolve("functools.wraps") is self._resolved(node))
        return (
            called
            and not makes_decorator
            and isinstance(parent.args[0], ast.Name)
            and parent.args[0].id in self._definitions
            and parent.args[0].id not in self.kinds
        )

    def _resolved(self, node):
        kind = self.kind(node)
        return library.resolve(kind[1]) if kind is not None and kind[0] == "object" else None

    @functools.cached_property
    def _definitions(self) -> set:
        """Names of the functions and classes this file defines (anywhere in it)."""
        return {node.name for node in self.of(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)}

    def _names_written(self, call, positions: tuple, keywords: tuple) -> bool:
        """Whether the arguments of `call` at `positions`, and its `keywords`, are names written in
        the code: strings built from literals, or tuples and lists of them."""
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return False  # *args, **kwargs: which argument is the name cannot be told
        values = [a for i, a in enumerate(call.args) if i in positions]
        values += [k.value for k in call.keywords if k.arg in keywords]
        for value in values:
            parts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
            if any(not isinstance(self.folded.get(id(part)), str) for part in parts):
                return False
        return True

    def _module_value(self, node) -> None:
        """A library module used other than as `module.name` or as an alias's value."""
        kind = self.kind(node)
        if kind is None or kind[0] != "module":
            return
        parent = self.parent.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        if (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id in ("getattr", "hasattr")
            and parent.args
            and parent.args[0] is node
        ):
            return
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is node:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if all(isinstance(t, ast.Name) for t in targets):
                return
        self.report("policy.module_value", node, kind[1])

    def _name(self, node) -> None:
        name = node.id
        if not isinstance(node.ctx, ast.Load):
            self._binding(node, name)
            return
        if _is_dunder(name) and name not in DANGEROUS_NAMES and name not in _READABLE_DUNDER_NAMES:
            self.report("policy.reflection", node, name)
            return
        if (
            name == "type"
            and name not in self.bound
            and not _type_of_one_value(node, self.parent.get(id(node)))
            and not self._in_annotation(node)
        ):
            self.report("policy.metaclass", node, name)
            return
        if name in self.kinds:
            self._library_object(node)
        elif name in self._own_enums:
            parent = self.parent.get(id(node))
            if isinstance(parent, ast.Call) and parent.func is node and _makes_enum(parent):
                self.report("policy.name_channel", node, name)
        if name in DANGEROUS_NAMES:
            self.report("policy.dynamic_code" if name in DYNAMIC_CODE else "policy.builtin", node, name)
        elif name in LOOKUPS:
            parent = self.parent.get(id(node))
            if not (isinstance(parent, ast.Call) and parent.func is node):
                self.report("policy.lookup", node, name)
        elif name in _BUILTIN_NAMES and name not in self.bound and name not in _ALLOWED_BUILTINS:
            self.report("policy.builtin", node, name)
        elif name.startswith(("test_", "Test")) and name not in self.bound and self.star_imports_own_file:
            self.report("policy.test_function", node, name)  # from another file's `import *`
        else:
            self._module_value(node)

    @functools.cached_property
    def star_imports_own_file(self) -> bool:
        """Whether the file has `from <a file of the submission> import *` (names it cannot see)."""
        return any(
            alias.name == "*" and (node.level or self._root_kind((node.module or "").split(".")[0]) == "own")
            for node in self.of(ast.ImportFrom)
            for alias in node.names
        )

    def _call(self, node) -> None:
        """getattr/hasattr/setattr/delattr with a name written in the code: the rules of that
        attribute. A name computed at run time is checked where it is known, in the worker
        (autograder/harness/lookups.py applies lookup_rule(), the same rules)."""
        func = node.func
        if not (isinstance(func, ast.Name) and func.id in LOOKUPS and func.id not in self.bound):
            return
        if len(node.args) < 2 or any(isinstance(a, ast.Starred) for a in node.args[:2]):
            return
        base, name = node.args[0], node.args[1]
        literal = self.folded.get(id(name))
        if not isinstance(literal, str):
            return
        if literal == "__class__" and func.id != "hasattr":
            self.report("policy.reflection", node, literal)
            return
        ctx = {"setattr": ast.Store(), "delattr": ast.Del()}.get(func.id, ast.Load())
        self._member_rules(node, self.kind(base), literal, ctx, base)

    def _string(self, node) -> None:
        text = self.folded[id(node)]
        parent = self.parent.get(id(node))
        if id(parent) in self.folded:
            return  # the larger expression is read instead
        if GRADER_PATH.search(text.strip()) or text.strip().lower() in GRADER_MODULE_NAMES:
            self.report("policy.grader_name", node, text.strip())
        elif _DUNDER.fullmatch(text) and text not in _HARMLESS_DUNDER_STRINGS:
            self.report("policy.protocol", node, text)


# PEP 263: a comment on line 1 or 2 that names the file's encoding.
_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_UTF8 = frozenset({"utf-8", "ascii"})


def _declared_encoding(source: str):
    """(line, name, number) of an encoding declaration other than UTF-8 (or ASCII), else None. The
    judge reads a file as UTF-8, but Python decodes it as declared: under `# coding: utf-7` a
    comment `# +AAo-import os` holds a line of code the judge never sees."""
    for number, line in enumerate(source.split("\n", 2)[:2], 1):
        match = _CODING.match(line)
        if match:
            try:
                name = codecs.lookup(match.group(1)).name
            except LookupError:
                return None  # Python refuses to import it: "unknown encoding"
            return None if name in _UTF8 else (line, match.group(1), number)
        if not line.strip().startswith("#") and line.strip():
            return None  # line 2 counts only after a comment or blank line 1
    return None


def parse(source: str):
    """The AST of `source` parsed as an import reads it (as bytes: a UTF-8 byte-order mark, which
    a str parse refuses and an import skips, must not leave the file unread), or the exception
    that stopped it (SyntaxError, ValueError, RecursionError, MemoryError)."""
    try:
        return ast.parse(source.encode("utf-8", "surrogatepass"))
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return error


def findings(source: str, parsed=None) -> tuple:
    """The Refusals of a graded file's source, by line (empty for a file Python cannot parse:
    importing it fails with its own message). `parsed`: parse(source), where the caller has it
    (forbidden.SourceScan parses each file of a submission once, for every rule that reads it)."""
    if len(source) > MAX_SOURCE_CHARS:
        return (Refusal("policy.too_large", f"{MAX_SOURCE_CHARS >> 10} KiB", f"{len(source) >> 10} KiB", 1),)
    declared = _declared_encoding(source)
    if declared is not None:
        line, name, number = declared
        return (Refusal("policy.encoding", line.strip()[:_CODE_CHARS], name[:_CODE_CHARS], number),)
    tree = parse(source) if parsed is None else parsed
    if isinstance(tree, (SyntaxError, ValueError)):
        return ()
    if isinstance(tree, BaseException):
        return (Refusal("policy.unreadable", "", "", 1),)
    try:
        return tuple(_Reader(source, tree).read())
    except (RecursionError, MemoryError):
        return (Refusal("policy.unreadable", "", "", 1),)


@functools.lru_cache(maxsize=1)
def lookup_rule() -> dict:
    """The rule for attribute names made at run time (`getattr(self, name)`), as plain data for
    the worker (autograder/harness/lookups.py applies it where the name is known): the same lists
    this reader applies to names written in the code. (Private names need no list there: the
    object at hand says whose they are.)"""
    return {
        "readable_dunders": sorted(DUNDERS),
        "definable_dunders": sorted(DEFINABLE_DUNDERS),
        "refused_names": sorted(GLOBAL_DENY | FRAME_ATTRIBUTES),
        "public_underscored": sorted(PUBLIC_UNDERSCORED),
        "module_state": sorted(library.module_state()),
        "memory_types": sorted(UNSUBCLASSABLE),
        "allowed_modules": sorted(ALLOWED_MODULES),
        "some_members": {module: sorted(names) for module, names in SOME_MEMBERS.items()},
        "module_deny": {module: sorted(names) for module, names in MODULE_DENY.items()},
    }
