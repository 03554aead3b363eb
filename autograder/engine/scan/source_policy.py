"""What graded code may use: an allow-list, decided from the AST of each graded file.

Student code runs in the worker beside the grader's call watch. Whatever reaches the
interpreter's machinery from there (the module registry, frames, the import system, torch's
dispatcher, code built at run time) could switch the watch off or forge what the worker reports,
and a deny-list of known spellings misses every other spelling. So the judge reads each graded
file and accepts only what an attention exercise needs; anything else is *tampering*, and the
steps whose files run it score zero (judge/plan.py, forbidden_in_source).

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

Over 400 lines because it is data: each list of what graded code may use comes with the
evidence for it. The reader that applies it is source_reader.py.
"""

import re

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
