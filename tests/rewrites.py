"""Semantics-preserving rewrites of an assignment's package (issue 32, "Fair by equivalence, tested
by generation").

Each rewrite is an AST transform that any correct program survives with the same function: the
grader must give the rewritten reference full marks in every step, and a planted mistake, rewritten,
the same single charge (tests/test_rewrites.py). They apply to whatever code they are given (the
reference, or the reference with a mistake planted in it), wherever their pattern occurs, and they
compose: rewrite_package(root, package, [a, b]) applies a, then b, file by file.

    in-place and out-of-place      scores = scores.masked_fill(m, v) -> scores.masked_fill_(m, v)
                                   (where `scores` is a tensor the function made itself)
    einsum and matmul              a @ b -> torch.einsum(...), torch.matmul(a, b)
    additive and boolean masks     x.masked_fill(m, v) -> x + zeros_like(x).masked_fill(m, v)
                                   (v very negative), torch.where(m, full_like(x, v), x)
    other fill values              torch.finfo(t).min -> -1e9, -finfo.max, float('-inf') (where
                                   no row is blocked everywhere: the offset causal mask)
    views and copies               x.contiguous().view(s) <-> x.reshape(s); x.transpose(i, i+1)
                                   -> x.movedim(i, i+1); x.transpose(-2, -1) -> x.mT
    getattr on own objects         self.name -> getattr(self, "name"), setattr(self, "name", v)
    a bias-less key projection     the module's w_k = nn.Linear(..., bias=False): a key bias adds
                                   the same amount to a query's every score, the softmax cancels it
    a wrapped step function        functions a module imports from the package called through a
                                   small class (or a closure) around them
    a static cache                 KVCache.update's results copied into preallocated buffers and
                                   returned as views of them; reset() zeroes the buffers in place
    softmax spellings              torch.softmax(x, dim=d) -> x.softmax(dim=d), F.softmax(...),
                                   exp(x - max) / sum in a helper of the file's own
    the scale on the queries       q @ k^T / s -> (q / s) @ k^T
    sizes and transposes           x.size(i) -> x.shape[i]; x.transpose(i, j) -> x.transpose(j, i)
    other local names              every local a function assigns renamed (its parameters kept)
"""

import ast
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

FRESH_CALLS = frozenset(
    {"masked_fill", "softmax", "matmul", "einsum", "bmm", "baddbmm", "zeros", "ones", "full", "cat", "stack", "where"}
)


def torch_call(name: str, *args, **kwargs) -> ast.Call:
    """torch.<name>(*args, **kwargs): `name` may be dotted (nn.functional.softmax)."""
    func: ast.expr = ast.Name("torch", ast.Load())
    for part in name.split("."):
        func = ast.Attribute(func, part, ast.Load())
    return ast.Call(func, list(args), [ast.keyword(k, v) for k, v in kwargs.items()])


def method(receiver: ast.expr, name: str, *args, **kwargs) -> ast.Call:
    return ast.Call(
        ast.Attribute(receiver, name, ast.Load()), list(args), [ast.keyword(k, v) for k, v in kwargs.items()]
    )


def is_method(node, *names) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names


def constant(node) -> object:
    """The value of a literal number, -number or (-)float('inf'), else None."""
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        pass
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = constant(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and node.args:
        text = constant(node.args[0])
        return float(text) if isinstance(text, str) else None
    return None


def very_negative(node) -> bool:
    """A fill that blocks: finfo(...).min, -finfo(...).max, -inf, or a literal <= -1e4."""
    text = ast.unparse(node).replace(" ", "")
    if text.endswith(").min") and "finfo(" in text and not text.startswith("-"):
        return True
    if text.startswith("-") and text.endswith(").max") and "finfo(" in text:
        return True
    value = constant(node)
    return isinstance(value, (int, float)) and value <= -1e4


def ensure_import(tree: ast.Module, module: str) -> None:
    """`import <module>` at the top of the file where it has none (after the docstring)."""
    for node in tree.body:
        if isinstance(node, ast.Import) and any(alias.name == module and alias.asname is None for alias in node.names):
            return
    at = 1 if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant) else 0
    tree.body.insert(at, ast.Import([ast.alias(module)]))


class Transform(ast.NodeTransformer):
    """A NodeTransformer that counts its changes and says which imports it needs."""

    needs = ("torch",)

    def __init__(self, file: str):
        self.file, self.changes = file, 0

    def changed(self, node):
        self.changes += 1
        return ast.copy_location(node, node) if hasattr(node, "lineno") else node


# ---------------------------------------------------------------------------- the transforms


class MatmulToEinsum(Transform):
    """a @ b -> torch.einsum('...ij,...jk->...ik', a, b); a @ b.transpose(-2, -1) -> '...ij,...kj->...ik'."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if not isinstance(node.op, ast.MatMult):
            return node
        right, spec = node.right, "...ij,...jk->...ik"
        if is_method(right, "transpose") and [constant(a) for a in right.args] == [-2, -1]:
            right, spec = right.func.value, "...ij,...kj->...ik"
        self.changes += 1
        return ast.copy_location(torch_call("einsum", ast.Constant(spec), node.left, right), node)


class MatmulToCall(Transform):
    """a @ b -> torch.matmul(a, b)."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if not isinstance(node.op, ast.MatMult):
            return node
        self.changes += 1
        return ast.copy_location(torch_call("matmul", node.left, node.right), node)


class InPlace(Transform):
    """name = name.masked_fill(...) -> name.masked_fill_(...), and name = name <op> other ->
    name <op>= other, where `name` holds a tensor this function made (its last assignment is
    arithmetic or a call that allocates): never a tensor the caller handed in."""

    needs = ()

    def visit_FunctionDef(self, node):
        fresh = set()
        body = []
        for statement in node.body:
            body.append(self.statement(statement, fresh))
        node.body = body
        return node

    def statement(self, node, fresh):
        if isinstance(node, (ast.If, ast.For, ast.While, ast.With)):
            node.body = [self.statement(s, set(fresh)) for s in node.body]
            if getattr(node, "orelse", None):
                node.orelse = [self.statement(s, set(fresh)) for s in node.orelse]
            return node
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            return node
        name, value = node.targets[0].id, node.value
        rewritten = None
        if name in fresh and is_method(value, "masked_fill") and ast.unparse(value.func.value) == name:
            rewritten = ast.Expr(
                method(
                    ast.Name(name, ast.Load()), "masked_fill_", *value.args, **{k.arg: k.value for k in value.keywords}
                )
            )
        elif (
            name in fresh
            and isinstance(value, ast.BinOp)
            and isinstance(value.op, (ast.Add, ast.Sub, ast.Mult, ast.Div))
            and ast.unparse(value.left) == name
        ):
            rewritten = ast.AugAssign(ast.Name(name, ast.Store()), value.op, value.right)
        if isinstance(value, ast.BinOp) or (
            isinstance(value, ast.Call) and getattr(value.func, "attr", getattr(value.func, "id", None)) in FRESH_CALLS
        ):
            fresh.add(name)
        else:
            fresh.discard(name)
        if rewritten is None:
            return node
        self.changes += 1
        return ast.copy_location(rewritten, node)


class AdditiveMask(Transform):
    """x.masked_fill(m, v) with v very negative -> x + torch.zeros_like(x).masked_fill(m, v)."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if not (is_method(node, "masked_fill") and len(node.args) == 2 and very_negative(node.args[1])):
            return node
        x = node.func.value
        bias = method(torch_call("zeros_like", copy.deepcopy(x)), "masked_fill", *node.args)
        self.changes += 1
        return ast.copy_location(ast.BinOp(copy.deepcopy(x), ast.Add(), bias), node)


class WhereMask(Transform):
    """x.masked_fill(m, v) -> torch.where(m, torch.full_like(x, v), x)."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if not (is_method(node, "masked_fill") and len(node.args) == 2):
            return node
        x, (m, v) = node.func.value, node.args
        self.changes += 1
        return ast.copy_location(torch_call("where", m, torch_call("full_like", copy.deepcopy(x), v), x), node)


def fill_value(replacement: str, files=None):
    """A Transform class replacing torch.finfo(t).min by `replacement` (an expression, {t} the
    finfo argument), in `files` only (None: every file)."""

    class FillValue(Transform):
        def visit_Attribute(self, node):
            self.generic_visit(node)
            if files is not None and self.file not in files:
                return node
            if not (
                node.attr == "min"
                and isinstance(node.value, ast.Call)
                and ast.unparse(node.value.func).endswith("finfo")
            ):
                return node
            argument = ast.unparse(node.value.args[0]) if node.value.args else "torch.float32"
            self.changes += 1
            return ast.copy_location(ast.parse(replacement.format(t=argument), mode="eval").body, node)

    return FillValue


class ReshapeView(Transform):
    """x.contiguous().view(s) -> x.reshape(s), and x.reshape(s) -> x.contiguous().view(s)."""

    needs = ()

    def visit_Call(self, node):
        self.generic_visit(node)
        if is_method(node, "view") and is_method(node.func.value, "contiguous") and not node.func.value.args:
            self.changes += 1
            return ast.copy_location(method(node.func.value.func.value, "reshape", *node.args), node)
        if is_method(node, "reshape") and node.args:
            self.changes += 1
            return ast.copy_location(method(method(node.func.value, "contiguous"), "view", *node.args), node)
        return node


class Transposes(Transform):
    """x.transpose(-2, -1) -> x.mT; x.transpose(i, i + 1) -> x.movedim(i, i + 1)."""

    needs = ()

    def visit_Call(self, node):
        self.generic_visit(node)
        if not (is_method(node, "transpose") and len(node.args) == 2 and not node.keywords):
            return node
        i, j = (constant(a) for a in node.args)
        if not (isinstance(i, int) and isinstance(j, int)):
            return node
        self.changes += 1
        if (i, j) in ((-2, -1), (-1, -2)):
            return ast.copy_location(ast.Attribute(node.func.value, "mT", ast.Load()), node)
        if abs(i - j) == 1 and (i < 0) == (j < 0):
            return ast.copy_location(method(node.func.value, "movedim", *node.args), node)
        return ast.copy_location(torch_call("transpose", node.func.value, *node.args), node)


class GetattrSelf(Transform):
    """self.name -> getattr(self, "name") when read; self.name = v -> setattr(self, "name", v)."""

    needs = ()

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "self" and isinstance(node.ctx, ast.Load):
            self.changes += 1
            return ast.copy_location(
                ast.Call(ast.Name("getattr", ast.Load()), [ast.Name("self", ast.Load()), ast.Constant(node.attr)], []),
                node,
            )
        return node

    def visit_FunctionDef(self, node):
        body = []
        for statement in node.body:
            target = statement.targets[0] if isinstance(statement, ast.Assign) and len(statement.targets) == 1 else None
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                value = self.visit(statement.value)
                self.changes += 1
                call = ast.Call(
                    ast.Name("setattr", ast.Load()),
                    [ast.Name("self", ast.Load()), ast.Constant(target.attr), value],
                    [],
                )
                body.append(ast.copy_location(ast.Expr(call), statement))
            else:
                body.append(self.visit(statement))
        node.body = body
        return node


def biasless_key(files):
    """A Transform class making the layer assigned to self.w_k bias-less, in `files` (modules whose
    output is an attention over the keys, where a key bias cancels)."""

    class BiaslessKey(Transform):
        needs = ()

        def visit_Assign(self, node):
            self.generic_visit(node)
            target = node.targets[0]
            if self.file not in files or not (isinstance(target, ast.Attribute) and target.attr == "w_k"):
                return node
            if not (isinstance(node.value, ast.Call) and ast.unparse(node.value.func).endswith("Linear")):
                return node
            keywords = [k for k in node.value.keywords if k.arg != "bias"] + [ast.keyword("bias", ast.Constant(False))]
            node.value.keywords = keywords
            self.changes += 1
            return node

    return BiaslessKey


def wrapped_imports(kind: str):
    """A Transform class calling every function a file imports from its own package (from .x import f)
    through a wrapper: a small class (kind "class") or a closure ("closure") around it."""

    class WrappedImports(Transform):
        needs = ()

        def visit_Module(self, node):
            names = [
                alias.asname or alias.name
                for statement in node.body
                if isinstance(statement, ast.ImportFrom) and statement.level >= 1
                for alias in statement.names
            ]
            if not names:
                return node
            if kind == "class":
                helper = ast.parse(
                    "class _Step:\n"
                    "    def __init__(self, function):\n"
                    "        self.function = function\n\n"
                    "    def __call__(self, *args, **kwargs):\n"
                    "        return self.function(*args, **kwargs)\n"
                ).body
                wraps = [ast.parse(f"{name} = _Step({name})").body[0] for name in names]
            else:
                helper = ast.parse(
                    "def _through(function):\n"
                    "    def call(*args, **kwargs):\n"
                    "        return function(*args, **kwargs)\n"
                    "    return call\n"
                ).body
                wraps = [ast.parse(f"{name} = _through({name})").body[0] for name in names]
            last_import = max(i for i, s in enumerate(node.body) if isinstance(s, (ast.Import, ast.ImportFrom)))
            node.body[last_import + 1 : last_import + 1] = helper + wraps
            self.changes += len(names)
            return node

    return WrappedImports


class StaticCache(Transform):
    """In a class with update(k, v) and reset(): what update returns is copied into preallocated
    buffers (grown when too short) and returned as views of them; reset() zeroes the buffers in
    place, and the next update writes over them. A value a caller kept from before the reset
    changes then, as a static cache's does."""

    HELPERS = (
        "def _into_buffers(self, *tensors):\n"
        "    import torch\n"
        "    buffers = getattr(self, '_buffers_of_update', None) or [None] * len(tensors)\n"
        "    self._buffers_of_update = buffers\n"
        "    views = []\n"
        "    for i, t in enumerate(tensors):\n"
        "        if not isinstance(t, torch.Tensor) or t.dim() < 3:\n"
        "            views.append(t)\n"
        "            continue\n"
        "        b = buffers[i]\n"
        "        if b is None or b.shape[:2] != t.shape[:2] or b.shape[3:] != t.shape[3:] or b.shape[2] < t.shape[2]:\n"
        "            b = buffers[i] = torch.zeros(*t.shape[:2], max(64, 2 * t.shape[2]), *t.shape[3:], dtype=t.dtype, device=t.device)\n"
        "        if b.dtype != t.dtype:\n"
        "            b = buffers[i] = b.to(t.dtype)\n"
        "        b[:, :, :t.shape[2]] = t\n"
        "        views.append(b[:, :, :t.shape[2]])\n"
        "    return tuple(views)\n"
        "\n"
        "def _zero_buffers(self):\n"
        "    for b in getattr(self, '_buffers_of_update', None) or ():\n"
        "        if b is not None:\n"
        "            b.zero_()\n"
    )

    needs = ()

    def visit_ClassDef(self, node):
        methods = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
        if "update" not in methods or "reset" not in methods:
            return node
        for statement in ast.walk(methods["update"]):
            if isinstance(statement, ast.Return) and isinstance(statement.value, ast.Tuple):
                statement.value = ast.Call(
                    ast.Attribute(ast.Name("self", ast.Load()), "_into_buffers", ast.Load()), statement.value.elts, []
                )
                self.changes += 1
        reset = methods["reset"]
        reset.body.insert(0, ast.parse("self._zero_buffers()").body[0])
        node.body += ast.parse(self.HELPERS).body
        return node


class SoftmaxMethod(Transform):
    """torch.softmax(x, dim=d) -> x.softmax(dim=d)."""

    needs = ()

    def visit_Call(self, node):
        self.generic_visit(node)
        if ast.unparse(node.func) == "torch.softmax" and node.args:
            self.changes += 1
            return ast.copy_location(
                method(node.args[0], "softmax", *node.args[1:], **{k.arg: k.value for k in node.keywords}), node
            )
        return node


class SoftmaxFunctional(Transform):
    """torch.softmax(x, dim=d) / x.softmax(dim=d) -> torch.nn.functional.softmax(x, dim=d)."""

    def visit_Call(self, node):
        self.generic_visit(node)
        keywords = {k.arg: k.value for k in node.keywords}
        if ast.unparse(node.func) == "torch.softmax" and node.args:
            self.changes += 1
            return ast.copy_location(torch_call("nn.functional.softmax", *node.args, **keywords), node)
        # a method of a tensor, not a function of a module (F.softmax(x) is already functional)
        if is_method(node, "softmax") and ast.unparse(node.func.value) not in ("torch", "torch.nn.functional", "F"):
            self.changes += 1
            return ast.copy_location(torch_call("nn.functional.softmax", node.func.value, *node.args, **keywords), node)
        return node


class ScaleOnQuery(Transform):
    """(a @ b) / s -> (a / s) @ b: the scale applied to the queries instead of the scores."""

    needs = ()

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if not (
            isinstance(node.op, ast.Div) and isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.MatMult)
        ):
            return node
        self.changes += 1
        scaled = ast.BinOp(node.left.left, ast.Div(), node.right)
        return ast.copy_location(ast.BinOp(scaled, ast.MatMult(), node.left.right), node)


class SoftmaxByExp(Transform):
    """torch.softmax(x, dim=d), x.softmax(dim=d), F.softmax(x, dim=d) -> a helper of the file's own
    that subtracts the row's maximum, exponentiates and divides by the sum."""

    HELPER = (
        "def _softmax_by_exp(x, dim):\n"
        "    e = torch.exp(x - x.amax(dim=dim, keepdim=True))\n"
        "    return e / e.sum(dim=dim, keepdim=True)\n"
    )

    def visit_Module(self, node):
        self.generic_visit(node)
        if self.changes:
            last_import = max(
                (i for i, s in enumerate(node.body) if isinstance(s, (ast.Import, ast.ImportFrom))), default=0
            )
            node.body[last_import + 1 : last_import + 1] = ast.parse(self.HELPER).body
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        name = ast.unparse(node.func)
        if name in ("torch.softmax", "F.softmax", "torch.nn.functional.softmax") and node.args:
            x, rest = node.args[0], node.args[1:]
        elif is_method(node, "softmax") and not name.startswith(("torch.", "F.")):
            x, rest = node.func.value, node.args
        else:
            return node
        keywords = {k.arg: k.value for k in node.keywords}
        dim = rest[0] if rest else keywords.pop("dim", None)
        if dim is None or len(rest) > 1 or keywords:  # a dtype= or a positional dtype: left as it is
            return node
        self.changes += 1
        return ast.copy_location(ast.Call(ast.Name("_softmax_by_exp", ast.Load()), [x, dim], []), node)


class SizeToShape(Transform):
    """x.size(i) -> x.shape[i] (a literal or a name as the index)."""

    needs = ()

    def visit_Call(self, node):
        self.generic_visit(node)
        if not (is_method(node, "size") and len(node.args) == 1 and not node.keywords):
            return node
        self.changes += 1
        shape = ast.Attribute(node.func.value, "shape", ast.Load())
        return ast.copy_location(ast.Subscript(shape, node.args[0], ast.Load()), node)


class TransposeSwapped(Transform):
    """x.transpose(i, j) -> x.transpose(j, i): the same tensor, the axes named the other way round."""

    needs = ()

    def visit_Call(self, node):
        self.generic_visit(node)
        if not (is_method(node, "transpose") and len(node.args) == 2 and not node.keywords):
            return node
        self.changes += 1
        return ast.copy_location(method(node.func.value, "transpose", node.args[1], node.args[0]), node)


class LocalNames(Transform):
    """Every local a function assigns (not its parameters, not a global or nonlocal it declares)
    renamed, consistently through the function and what it nests: `scores` -> `scores_`, and a
    call's keyword names kept."""

    needs = ()

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        arguments = node.args
        parameters = {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
        parameters |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
        declared = {n for s in ast.walk(node) if isinstance(s, (ast.Global, ast.Nonlocal)) for n in s.names}
        assigned = {
            n.id for s in node.body for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        local = assigned - parameters - declared
        if not local:
            return node
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in local:
                n.id += "_"
        self.changes += 1
        return node


# ---------------------------------------------------------------------------- rewrites


@dataclass(frozen=True)
class Rewrite:
    """A named transform, and the assignments it applies to (all where empty)."""

    id: str
    transform: Callable  # a Transform class: transform(file).visit(tree)
    assignments: tuple = ()
    note: str = field(default="", compare=False)

    def applies_to(self, assignment: str) -> bool:
        return not self.assignments or assignment in self.assignments

    def source(self, text: str, file: str) -> str:
        """`text` rewritten (the same text where nothing matched)."""
        tree = ast.parse(text)
        transform = self.transform(file)
        tree = transform.visit(tree)
        if not transform.changes:
            return text
        for module in transform.needs:
            ensure_import(tree, module)
        return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


REWRITES = [
    Rewrite("in_place", InPlace),
    Rewrite("einsum", MatmulToEinsum),
    Rewrite("matmul_call", MatmulToCall),
    Rewrite("additive_mask", AdditiveMask),
    Rewrite("where_mask", WhereMask),
    Rewrite("fill_minus_1e9", fill_value("-1e9")),
    Rewrite("fill_minus_max", fill_value("-torch.finfo({t}).max")),
    # -inf only where no row is blocked everywhere: the offset causal mask of a decoding chunk
    Rewrite("fill_minus_inf", fill_value("float('-inf')", files={"decode.py"}), ("kv_cache",)),
    Rewrite("reshape_view", ReshapeView),
    Rewrite("transposes", Transposes),
    Rewrite("getattr_self", GetattrSelf),
    Rewrite("biasless_key", biasless_key({"mha.py", "decoder.py"})),
    Rewrite("wrapped_class", wrapped_imports("class")),
    Rewrite("wrapped_closure", wrapped_imports("closure")),
    Rewrite("static_cache", StaticCache, ("kv_cache",)),
    Rewrite("softmax_method", SoftmaxMethod),
    Rewrite("softmax_functional", SoftmaxFunctional),
    Rewrite("softmax_by_exp", SoftmaxByExp),
    Rewrite("scale_on_query", ScaleOnQuery),
    Rewrite("size_to_shape", SizeToShape),
    Rewrite("transpose_swapped", TransposeSwapped),
    Rewrite("local_names", LocalNames),
]


def of(assignment: str) -> list:
    return [r for r in REWRITES if r.applies_to(assignment)]


def rewrite_package(folder: Path, rewrites) -> set:
    """Rewrite every .py file of the package `folder` in place, each rewrite after the other;
    the names of the files that changed."""
    changed = set()
    for path in sorted(folder.glob("*.py")):
        text = original = path.read_text(encoding="utf-8")
        for rewrite in rewrites:
            text = rewrite.source(text, path.name)
        if text != original:
            path.write_text(text, encoding="utf-8")
            changed.add(path.name)
    return changed
