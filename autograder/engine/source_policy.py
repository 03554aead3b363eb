"""What graded code may use: an allow-list, decided from the AST of each graded file.

Student code runs in the worker beside the grader's call watch. Whatever reaches the
interpreter's machinery from there (the module registry, frames, the import system, torch's
dispatcher, code built at run time) could switch the watch off or forge what the worker reports,
and a deny-list of known spellings misses every other spelling. So the judge reads each graded
file and accepts only what an attention exercise needs; anything else is *tampering*, and the
steps whose files run it score zero (runner.forbidden_in_source).

What is allowed, and why (derived from public attention implementations: nanoGPT, minGPT, the
annotated transformer, Raschka's book, lucidrains' and labml's implementations, course
solutions; see docs/security-model.md):

* Modules (ALLOWED_MODULES): torch and the public parts of it a model uses (nn, functional,
  init, linalg, fft, special, autograd, amp, cuda, backends, optim, testing ...), math, numpy
  (random, linalg, fft), typing, dataclasses, functools, copy, collections, itertools, abc,
  enum, numbers, warnings, random, __future__, einops, sys for its stdout and stderr (a student's
  debugging prints), and the submission's own files (relative imports,
  `<package>.x`, bare sibling names). Any other module of the Python installation is refused.
* Attributes of those modules: public names only. A name starting with `_` is torch's (or
  numpy's ...) internals; a member that is itself a module must be allowed too (`torch.os`,
  `F.importlib` are refused; sys only for SOME_MEMBERS), and a few public members are machinery an exercise
  has no use for (MODULE_DENY, and everywhere GLOBAL_DENY: torch.load and np.load unpickle,
  torch.compile and torch.jit generate code, torch.ops.load_library loads native code, ...).
* Any other object's attributes: anything but the names that reach the interpreter (frames,
  code objects, most dunders: DUNDERS lists the harmless ones), private names that are internals
  of an allowed module (private_deny(): `_C`, `_ops`, `_getframe` ...), and GLOBAL_DENY: the names
  through which a library module reached indirectly (through another graded file) would lead
  to the machinery (`x.sys`, `x.jit`, `x.overrides`, `x.load` ...).
* Built-ins: those in ALLOWED_BUILTINS. eval/exec/compile/__import__/globals/locals/vars/open
  ... are refused wherever they are named (DANGEROUS_NAMES); getattr/setattr/delattr only when
  the attribute's name is written in the code (a string literal, or an f-string whose literal
  start cannot begin a refused name: `getattr(self, f"w_{i}")`).
* No module used as a value (`f(torch)`, `[np]`): only `module.name`, or an alias `F = nn.functional`.
* No assignment to or deletion of what a library defines (`torch.x = ...`, `F.softmax = ...`,
  `nn.Module.forward = ...`, through an alias too), no rebinding of `__name__` or
  `__builtins__`, no `__torch_function__`/`__torch_dispatch__` of one's own.
* No string that names the grader (`"autograder"`, also built from literals).

Every statement is read: class bodies, decorators, default values, annotations, lambdas,
comprehensions, match statements. Not read (the grader never runs them): the body of a
module-level `if __name__ == "__main__":` (unless the file binds `__name__`), and the body (not
the decorators, defaults or annotations) of a test function nothing in its file refers to: a
module-level `def test_*`, or a `test_*` method of a module-level `class Test*` without bases,
metaclass or decorators, neither decorated. Another file may not reach them: importing or using
another graded file's `test_*` or `Test*` names is refused (also a name that only a
`from <own file> import *` can have brought). A file nested too deeply for Python's parser is refused as
unreadable, one larger than MAX_SOURCE_CHARS or declaring an encoding other than UTF-8 (which
Python would decode differently from the judge) is refused unread; walks here are iterative,
never recursive.

What remains possible: a file that imports another graded file's names cannot see what those
names are (each file is read alone). A library module handed over that way keeps the global
rules (GLOBAL_DENY, private_deny(), dunders), but an assignment into it through a further alias
(`t = other.torch_alias; t.softmax = f`) is not seen. Code that builds data the grader then
runs (a pickle, a native library) needs a refused name to run it.
"""

import ast
import builtins
import codecs
import functools
import importlib
import importlib.metadata
import importlib.util
import pkgutil
import re
import sys
import types
from dataclasses import dataclass

# Modules graded code may import (by their real names). Evidence: of 256 public files with
# attention code (51 repositories: nanoGPT, minGPT, the annotated transformer, Raschka's book,
# lucidrains, labml, whisper, llama, course solutions ...), the number whose attention classes or
# functions use each: torch.nn 194, torch 189, einops 72 (+10 einops.layers.torch), F 45, math
# 35, typing 17+ (Optional; Any, Tuple, Callable ...), torch.nn.init 10, numpy 4, functools 2,
# random 2, copy, collections, itertools, abc 1 each; torch.cuda.is_available and
# torch.backends.*.is_available choose a device, torch.testing.assert_close makes self-tests,
# torch.autograd.Function custom gradients, torch.optim a training demo in the same file.
ALLOWED_MODULES = frozenset(
    {
        "torch",
        "torch.nn",
        "torch.nn.functional",
        "torch.nn.init",
        "torch.nn.parameter",  # Parameter, Buffer
        "torch.nn.utils",  # clip_grad_norm_, parametrize, rnn (pad_sequence: a step may forbid it)
        "torch.nn.utils.rnn",
        "torch.nn.utils.parametrize",
        "torch.nn.utils.parametrizations",
        "torch.linalg",
        "torch.fft",
        "torch.special",
        "torch.autograd",  # Function, grad
        "torch.autograd.function",  # once_differentiable
        "torch.amp",  # autocast
        "torch.cuda",  # is_available, synchronize (GLOBAL_DENY keeps its native parts out)
        "torch.cuda.amp",
        "torch.backends",  # backends.mps.is_available()
        "torch.backends.cuda",
        "torch.backends.cudnn",
        "torch.backends.mps",
        "torch.backends.cpu",
        "torch.testing",  # assert_close
        "torch.optim",
        "torch.optim.lr_scheduler",
        "torch.random",  # manual_seed, fork_rng
        "torch.version",  # torch.version.cuda
        "math",
        "numbers",
        "numpy",
        "numpy.random",
        "numpy.linalg",
        "numpy.fft",
        "numpy.typing",
        "typing",
        "typing_extensions",
        "dataclasses",
        "functools",
        "copy",
        "collections",
        "collections.abc",
        "itertools",
        "abc",
        "enum",
        "warnings",
        "random",
        "sys",  # for print(..., file=sys.stderr) only: SOME_MEMBERS
        "__future__",
        # not installed in the grader: importing it fails at run time with Python's own message;
        # allowed so that the message is that one ("No module named einops"), not "refused"
        "einops",
        "einops.layers",
        "einops.layers.torch",
    }
)
_ALLOWED_ROOTS = frozenset(name.split(".")[0] for name in ALLOWED_MODULES)
# The grader's own packages (an editable install is not always listed as a distribution).
GRADER_PACKAGES = frozenset({"autograder", "conftest", "tests"})

# Allowed modules of which only these members may be used (the rest of sys is the interpreter's
# machinery: modules, path, frames, tracing).
SOME_MEMBERS = {
    "sys": frozenset(
        {"stdout", "stderr", "exit", "version", "version_info", "platform", "maxsize", "float_info", "byteorder"}
    ),
}
# Public members of allowed modules that are machinery, refused on those modules only.
MODULE_DENY = {
    "torch": frozenset({"ops", "classes", "cond", "while_loop", "library", "overrides"}),
}

# Attribute names refused on every object: what a library module reached indirectly (an alias
# exported by another graded file) leads to. Modules (a first step from an allowed module to
# one that is not: tests/test_source_policy.py checks that every module-valued member of an
# allowed module is allowed, listed here, or in HARMLESS_MODULE_MEMBERS) ...
GLOBAL_DENY_MODULES = frozenset(
    {
        "sys",
        "os",
        "builtins",
        "bltns",  # enum's name for builtins
        "importlib",
        "inspect",
        "types",  # CodeType, FunctionType: code from bytes
        "threading",
        "traceback",  # frames
        "operator",  # attrgetter: a lookup by a computed name
        "ctypes",
        "ctypeslib",
        "signal",
        "gc",
        "subprocess",
        "pickle",
        "marshal",
        "socket",
        "asyncio",
        "multiprocessing",
        "distributed",
        "utils",  # torch.utils: cpp_extension (native code), benchmark.Timer (runs a string)
        "jit",  # scripting, fork (another thread)
        "fx",  # generates and runs code
        "library",  # kernels of one's own for torch's operators (the watch's among them)
        "overrides",  # torch-function modes
        "hub",
        "package",  # imports code from an archive
        "export",
        "compiler",
        "ao",
        "quantization",
        "jiterator",
        "lib",  # numpy.lib.stride_tricks.as_strided: memory outside an array
        "f2py",
        "distutils",
        "core",  # numpy.core: numpy's internals
        "benchmark",
        "timeit",
        "cpp_extension",
        "copyreg",  # pickling's registry
        "io",
        "onnx",  # exports through tracing, writes files
        "nativert",  # runs exported programs
    }
)
# ... and members that run code, load native code or unpickle.
GLOBAL_DENY_MEMBERS = frozenset(
    {
        "load",  # torch.load, numpy.load: unpickling runs code
        "load_inline",
        "load_library",  # torch.ops / torch.classes: native code
        "import_module",
        "compile",  # torch.compile: generated code
        "cudart",
        "CUDAPluggableAllocator",  # loads a native library
        "change_current_allocator",
        "decompose",  # an operator's decomposition, around its kernel
        "redispatch",
        "py_kernels",
        "py_impl",
        "get_type_hints",  # evaluates annotation strings
        "get_annotations",
        "ForwardRef",
        "evaluate_forward_ref",
        "singledispatch",  # register() evaluates annotation strings
        "singledispatchmethod",
        "attrgetter",  # lookups by computed names
        "methodcaller",
        "Timer",
    }
)
# ... and what reaches the interpreter's frames and code.
FRAME_ATTRIBUTES = frozenset(
    {
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_code",
        "f_trace",
        "f_lasti",
        "tb_frame",
        "tb_next",
        "gi_frame",
        "gi_code",
        "gi_yieldfrom",
        "cr_frame",
        "cr_code",
        "cr_await",
        "cr_origin",
        "ag_frame",
        "ag_code",
        "ag_await",
    }
)
GLOBAL_DENY = GLOBAL_DENY_MODULES | GLOBAL_DENY_MEMBERS | FRAME_ATTRIBUTES

# Module-valued members of allowed modules that are neither allowed nor refused everywhere:
# harmless, and their names are common attribute names (`x.cpu()`, `self.random`), so they are
# refused only on the modules themselves (`torch.cpu` as a module: not allowed). torch.ops and
# torch.classes are machinery, but what in them loads code is refused by name (load_library).
HARMLESS_MODULE_MEMBERS = frozenset(
    {
        "conftest",
        "tests",
        "matlib",
        "lapack_lite",
        "mypy_plugin",
        "contrib",
        "numa",
        "gradcheck",
        "variable",
        "comm",
        "prune",
        "spectral_norm",
        "weight_norm",
        "adadelta",
        "adagrad",
        "adam",
        "adamax",
        "adamw",
        "asgd",
        "lbfgs",
        "nadam",
        "optimizer",
        "radam",
        "rmsprop",
        "rprop",
        "sgd",
        "sparse_adam",
        "ops",
        "classes",
        "distributions",
        "hooks",
        "common",
        "stateless",
        "clip_grad",
        "convert_parameters",
        "fusion",
        "memory_format",
        "accelerator",
        "cpu",
        "cuda",
        "mps",
        "xpu",
        "mtia",
        "nested",
        "masked",
        "sparse",
        "quasirandom",
        "return_types",
        "torch_version",
        "storage",
        "serialization",  # its load is refused by name
        "func",
        "futures",
        "monitor",
        "profiler",
        "windows",
        "cpp",
        "glob",
        "platform",
        "textwrap",
        "functional",
        "grad",
        "modules",
        "attention",
        "common_types",
        "intrinsic",
        "parallel",
        "qat",
        "quantizable",
        "quantized",
        "anomaly_mode",
        "forward_ad",
        "grad_mode",
        "graph",
        "profiler_legacy",
        "profiler_util",
        "autocast_mode",
        "grad_scaler",
        "swa_utils",
        "gds",
        "graphs",
        "green_contexts",
        "memory",
        "nccl",
        "nvtx",
        "streams",
        "tunable",
        "cusparselt",
        "kleidiai",
        "m",
        "miopen",
        "mkl",
        "mkldnn",
        "nnpack",
        "openmp",
        "opt_einsum",
        "python_native",
        "dtypes",
        "emath",
        "exceptions",
        "matrixlib",
        "version",
        "bit_generator",
        "mtrand",
        "contextlib",
        "stdlib_re",
        "re",
        "keyword",
        "char",
        "rec",
        "ma",
        "polynomial",
        "strings",
        "testing",
        "typing",
        "random",
        "linalg",
        "fft",
        "np",
        "math",
        "abc",
        "collections",
        "copy",
        "functools",
        "itertools",
        "warnings",
        "dataclasses",
        "torch",
        "nn",
        "init",
        "amp",
        "backends",
        "autograd",
        "optim",
        "lr_scheduler",
        "special",
        "parameter",
        "rnn",
        "parametrize",
        "parametrizations",
        "cudnn",
    }
)
HARMLESS_PACKAGES = ("torch.backends.",)  # flags of torch's backends, whatever their names
# Private functions of allowed modules that load native code or import by name, and the
# interpreter's frame and dispatcher entry points: refused on any object (see private_deny).
PRIVATE_ESCAPES = frozenset(
    {
        "_getframe",
        "_current_frames",
        "_import_dotted_name",
        "_load_global_deps",
        "_preload_cuda_deps",
        "_preload_cuda_lib",
        "_register_device_module",
        "_compile_kernel",
        "_lazy_call",
        "_op",
        "_op_dk",
        "_opname",
        "_python_dispatch",
        "_disable_current_modes",
        "_pop_mode",
        "_push_mode",
        "_set_eval_frame",
    }
)
# Harmless dunders: names, documentation, the constructor through super(), container protocols.
DUNDERS = frozenset(
    {
        "__init__",
        "__new__",
        "__post_init__",
        "__name__",
        "__qualname__",
        "__doc__",
        "__module__",
        "__class__",
        "__version__",
        "__call__",
        "__len__",
        "__getitem__",
        "__setitem__",
        "__contains__",
        "__iter__",
        "__next__",
        "__repr__",
        "__str__",
        "__enter__",
        "__exit__",
    }
)
# Dunder methods of one's own that hook into torch's dispatch (the call watch lives there).
TORCH_HOOKS = frozenset({"__torch_function__", "__torch_dispatch__"})

# Built-ins that run code, reach the interpreter or files: refused wherever they are named
# (also where the file binds the name: scopes are not followed).
DYNAMIC_CODE = frozenset({"eval", "exec", "compile", "__import__"})
DANGEROUS_NAMES = DYNAMIC_CODE | frozenset(
    {
        "breakpoint",  # a debugger: sys.breakpointhook decides what runs
        "globals",
        "locals",
        "vars",
        "open",
        "help",
        "__builtins__",
        "__spec__",
        "__loader__",
        "__build_class__",
    }
)
LOOKUPS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
# Built-ins attention code uses; any other one (input, dir, memoryview, exit ...) is refused
# where the file does not bind that name itself. Exceptions and warnings are all allowed.
ALLOWED_BUILTINS = frozenset(
    {
        "abs",
        "all",
        "any",
        "ascii",
        "bin",
        "bool",
        "bytearray",
        "bytes",
        "callable",
        "chr",
        "classmethod",
        "complex",
        "dict",
        "divmod",
        "enumerate",
        "filter",
        "float",
        "format",
        "frozenset",
        "hash",
        "hex",
        "id",
        "int",
        "isinstance",
        "issubclass",
        "iter",
        "len",
        "list",
        "map",
        "max",
        "min",
        "next",
        "object",
        "oct",
        "ord",
        "pow",
        "print",
        "property",
        "range",
        "repr",
        "reversed",
        "round",
        "set",
        "slice",
        "sorted",
        "staticmethod",
        "str",
        "sum",
        "super",
        "tuple",
        "type",
        "zip",
        "aiter",
        "anext",
        "NotImplemented",
        "Ellipsis",
        "__name__",
        "__doc__",
        "__debug__",
    }
)
# Names whose rebinding changes what Python or the grader relies on.
REBIND_DENY = frozenset(
    {"__name__", "__builtins__", "__import__", "__spec__", "__loader__", "__path__", "__file__", "__package__"}
)
# Strings that name the grader's modules: the package or a path into it ("autograder",
# "autograder.engine", "autograder/sandbox"), or the name of one of its parts alone. A sentence
# that mentions the autograder ("the autograder expects ...") is not one.
GRADER_PATH = re.compile(r"(?i)\bautograder(?=$|[./\\:])")
GRADER_MODULE_NAMES = frozenset({"harness", "sandbox", "fork_server", "fake_cuda", "forbidden", "runner", "wire"})

MAX_FINDINGS = 50  # per file: the first one is reported; a hostile file may hold millions
# A graded file larger than this is refused unread: parsing costs the judge about 400 bytes of
# memory and 10 µs per source byte, and no attention file comes near it (the largest public
# one read for this list, a whole library of attention variants, has 157 KiB).
MAX_SOURCE_CHARS = 256 << 10
MAX_FOLDED = 4096  # characters of a string built from literals that are kept to be looked at
MAX_FOLDED_TOTAL = 1 << 20  # ... and of all those a file builds (its literals are the source's own)
_CODE_CHARS = 60  # of the construct quoted in a finding


@dataclass(frozen=True)
class Finding:
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


@functools.lru_cache(maxsize=None)
def _loaded(module_name: str):
    """The module object of an allowed module, imported here in the judge (trusted library code),
    or None where it is not installed (einops)."""
    if module_name not in ALLOWED_MODULES:
        return None
    try:
        return importlib.import_module(module_name)
    except Exception:  # noqa: BLE001 - not installed or broken: its members stay unknown
        return None


@functools.lru_cache(maxsize=8192)
def _member(module_name: str, attr: str):
    """What `attr` of the allowed module `module_name` is: ('module', real dotted name),
    ('object',) or None where this process cannot tell (a missing name fails at run time)."""
    module = _loaded(module_name)
    if module is None or not attr.isidentifier():  # `getattr(torch, "a.b")`: nothing, and nothing to import
        return None
    value = vars(module).get(attr, _member)
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    if value is not _member:
        return ("object",)
    try:  # a submodule not imported yet (torch and numpy load some lazily)
        spec = importlib.util.find_spec(f"{module_name}.{attr}")
    except (ImportError, ValueError, AttributeError):
        spec = None
    return ("module", f"{module_name}.{attr}") if spec is not None else None


@functools.lru_cache(maxsize=1)
def private_deny() -> frozenset:
    """Private names that lead into a library's internals from any object (an object handed
    over from another graded file may be such a library module): the private submodules of the
    allowed packages (torch._C, torch._ops, torch._dynamo, numpy._core ...), the private
    module-valued members of the allowed modules (random._os, collections._sys), and a few
    private functions that load code or reach frames. Other private names (`self._cache`) stay
    the student's own."""
    names = set(PRIVATE_ESCAPES)
    for module_name in ALLOWED_MODULES:
        module = _loaded(module_name)
        if module is None:
            continue
        for name, value in vars(module).items():
            if name.startswith("_") and not _is_dunder(name) and isinstance(value, types.ModuleType):
                names.add(name)
        for found in pkgutil.iter_modules(getattr(module, "__path__", None) or []):
            if found.name.startswith("_") and not _is_dunder(found.name):
                names.add(found.name)
    return frozenset(names)


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _is_main_test(test) -> bool:
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
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) == 1:
            glue, arg = value.get(id(node.func.value)), node.args[0]
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
        self.found.append(Finding(message_id, code, str(name)[:_CODE_CHARS], line))

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
            if isinstance(node, ast.If) and _is_main_test(node.test) and "__name__" not in self._rebound():
                roots.extend(node.body)
            elif self._unreferenced_test(node, referenced):
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

    def _binding(self, node, name: str) -> None:
        if name in REBIND_DENY:
            self.report("policy.rebind", node, name)
        elif name in TORCH_HOOKS:
            self.report("policy.machinery", node, name)

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

    def _member_rules(self, node, base_kind, attr: str, ctx=None) -> None:
        """The rules for reading (or, with ctx Store/Del, changing) `attr` of something of
        `base_kind` (see kind())."""
        library = base_kind is not None and base_kind[0] in ("module", "object")
        shown = f"{base_kind[1]}.{attr}" if library else attr
        changes = isinstance(ctx, (ast.Store, ast.Del))
        if base_kind is not None and base_kind[0] in ("own", "own_module") and attr.startswith(("test_", "Test")):
            # another file's test functions are not read there (see skipped()): not callable here
            self.report("policy.test_function", node, attr)
            return
        if _is_dunder(attr):
            if attr not in DUNDERS or changes:
                self.report("policy.reflection", node, attr)
            return
        if attr.startswith("_") and (library or attr in private_deny()):
            self.report("policy.private", node, shown)
            return
        if attr in FRAME_ATTRIBUTES:
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
        elif attr in GLOBAL_DENY_MODULES:
            self.report("policy.module", node, shown)
            return
        if attr in GLOBAL_DENY_MEMBERS or (library and attr in MODULE_DENY.get(base_kind[1], ())):
            self.report("policy.machinery", node, shown)
            return
        if changes and (library or (base_kind is not None and base_kind[0] == "own")):
            self.report("policy.patch", node, shown)

    def _attribute(self, node, base, attr, ctx) -> None:
        self._member_rules(node, self.kind(base), attr, ctx)
        if isinstance(ctx, ast.Load):
            self._module_value(node)

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
        """getattr/hasattr/setattr/delattr: the name must be written in the code."""
        func = node.func
        if not (isinstance(func, ast.Name) and func.id in LOOKUPS):
            return
        if len(node.args) < 2 or node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            if func.id != "hasattr":
                self.report("policy.lookup", node, func.id)
            return
        base, name = node.args[0], node.args[1]
        ctx = {"setattr": ast.Store(), "delattr": ast.Del()}.get(func.id, ast.Load())
        literal = self.folded.get(id(name))
        if isinstance(literal, str):
            self._member_rules(node, self.kind(base), literal, ctx)
            return
        if func.id == "hasattr":
            return  # a yes or no: nothing reached
        prefix = self._literal_prefix(name)
        kind = self.kind(base)
        if prefix and not (kind and kind[0] in ("module", "object", "own")):
            return  # getattr(self, f"w_{i}"): no refused name starts that way
        self.report("policy.lookup", node, func.id)

    @staticmethod
    def _literal_prefix(node) -> str:
        """The literal start of an f-string, where no refused name (private, dunder, GLOBAL_DENY)
        can begin with it; else ''."""
        if not (isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant)):
            return ""
        prefix = str(node.values[0].value)
        if not prefix or prefix.startswith("_") or any(n.startswith(prefix) for n in GLOBAL_DENY):
            return ""
        return prefix

    def _string(self, node) -> None:
        text = self.folded[id(node)]
        parent = self.parent.get(id(node))
        if id(parent) in self.folded:
            return  # the larger expression is read instead
        if GRADER_PATH.search(text.strip()) or text.strip().lower() in GRADER_MODULE_NAMES:
            self.report("policy.grader_name", node, text.strip())


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


@functools.lru_cache(maxsize=32)  # a submission's files; the keys (sources) are bounded in size
def findings(source: str) -> tuple:
    """The Findings of a graded file's source, by line (empty for a file Python cannot parse:
    importing it fails with its own message). Parsed and read once per source."""
    if len(source) > MAX_SOURCE_CHARS:
        return (Finding("policy.too_large", f"{MAX_SOURCE_CHARS >> 10} KiB", f"{len(source) >> 10} KiB", 1),)
    declared = _declared_encoding(source)
    if declared is not None:
        line, name, number = declared
        return (Finding("policy.encoding", line.strip()[:_CODE_CHARS], name[:_CODE_CHARS], number),)
    try:
        # As bytes, as an import reads the file: a UTF-8 byte-order mark (which a str parse
        # refuses, and an import skips) must not leave the file unread.
        tree = ast.parse(source.encode("utf-8", "surrogatepass"))
    except (SyntaxError, ValueError):
        return ()
    except (RecursionError, MemoryError):
        return (Finding("policy.unreadable", "", "", 1),)
    try:
        return tuple(_Reader(source, tree).read())
    except (RecursionError, MemoryError):
        return (Finding("policy.unreadable", "", "", 1),)
