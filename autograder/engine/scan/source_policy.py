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
  of an allowed module (private_deny(): `_C`, `_ops`, `_getframe` ...), the private parts of
  tensors, storages and arrays (they take raw addresses: `_new_with_weak_ptr`, `_set_cdata`) and
  the state nn.Module answers attribute lookups from (`_buffers`, `_modules`: library.py finds
  them), and GLOBAL_DENY: the names through which a library module reached indirectly (through
  another graded file) would lead to the machinery, files or raw memory (`x.sys`, `x.jit`,
  `x.load`, `x.fromfile` ...). A class's own definition of such a name is its own: `self.x`,
  `cls.x`, `super().x` in a class of the file that defines `x`, `Config.x` of a class that does.
* Protocols (issue 31): a dunder a file defines (a def, a class-level or module-level name, a
  keyword, a string that names one anywhere: namespaces, slots, setattr) must be one of
  DEFINABLE_DUNDERS, Python's ordinary protocols. The others are how the interpreter and the
  libraries read an object: numpy reads raw memory from `__array_interface__`, `__getattr__`
  answers every such lookup. No subclass of a tensor, storage, array or dict type (UNSUBCLASSABLE);
  no metaclass but as `metaclass=`, and `type` only as `type(x)`, `x.__class__` only for its
  name (a metaclass makes classes from a namespace built at run time); none of NAME_CHANNELS,
  the library calls that make attributes from names given at run time, unless their names are
  written in the code; no enumeration called with names, or without members.
* Built-ins: those in ALLOWED_BUILTINS (not `id`: an address, which nothing here needs).
  eval/exec/compile/__import__/globals/locals/vars/open ... are refused wherever they are named
  (DANGEROUS_NAMES). getattr/setattr/delattr/hasattr with a name written in the code obey the
  rules above; with a name computed at run time they are ordinary Python on one's own objects
  (issue 32) and the same rules are applied where the name is known, in the student's process
  (autograder/harness/lookups.py, given source_reader.lookup_rule()).
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
runs (a pickle, a native library) needs a refused name to run it. A library call that makes an
attribute from a name given at run time and that NAME_CHANNELS does not list would take a name
the run-time rule never sees (tests/test_source_policy.py reads the allowed modules for them).

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
        "get_origin",  # typing: get_origin(Type[int]) hands over `type`, a metaclass
        "singledispatch",  # register() evaluates annotation strings
        "singledispatchmethod",
        "attrgetter",  # lookups by computed names
        "methodcaller",
        "Timer",
        # built-ins that run code or reach the interpreter, as members of anything (a module
        # reached through another file must not hand them over; not `eval`: nn.Module.eval())
        "exec",
        "globals",
        "locals",
        "breakpoint",
    }
)
# Members that read files or hand over raw memory: numpy's and torch's file readers and writers
# (derived from the allowed modules' signatures: every public callable with a file parameter;
# tests/test_source_policy.py keeps the list complete), the constructors that view or free memory
# at an address or a foreign buffer, and the allocator entry points that take raw pointers. An
# attention exercise reads no file and makes its tensors from numbers (torch.tensor, zeros,
# randn ...).
RAW_MEMORY_MEMBERS = frozenset(
    {
        "from_file",  # torch.from_file, UntypedStorage.from_file: a file mapped into a tensor
        "fromfile",  # numpy
        "fromregex",
        "genfromtxt",
        "loadtxt",
        "memmap",
        "open_memmap",
        "DataSource",
        "save",
        "savetxt",
        "savez",
        "savez_compressed",
        "dump",
        "tofile",
        "prepare_multiprocessing_environment",  # torch: where shared-memory files go
        "warn_explicit",  # warnings: shown with a line read from any file named (linecache)
        "showwarning",
        "formatwarning",
        "frombuffer",  # numpy, torch: an array over another object's memory
        "from_dlpack",  # a tensor over memory another library hands over (a capsule)
        "to_dlpack",
        "caching_allocator_alloc",  # torch.cuda: raw device pointers
        "caching_allocator_delete",
        "ExternalStream",  # a stream from a raw pointer
    }
)
GLOBAL_DENY_MEMBERS = GLOBAL_DENY_MEMBERS | RAW_MEMORY_MEMBERS
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
# Dunders graded code may define (a def, a class-level or module-level name, a string naming
# one): Python's ordinary protocols for one's own objects (construction, printing, comparison,
# arithmetic, containers, calls, context managers) and a module's metadata. Every other dunder is
# a hook through which the interpreter or a library reads the object: numpy reads an array's
# memory address from `__array_interface__` (and from `__array_struct__`), torch a device pointer
# from `__cuda_array_interface__` and a capsule from `__dlpack__`; `__getattr__` and
# `__getattribute__` answer every such lookup at once; `__class__`, `__init_subclass__`,
# `__set_name__`, `__class_getitem__`, `__prepare__`, `__mro_entries__`, `__instancecheck__` ...
# take part in making classes and telling types apart; `__reduce__`, `__getstate__`,
# `__setstate__` let copy.copy set attributes by name; `__del__` runs code whenever the collector
# decides; `__index__`, `__int__`, `__float__` run Python code inside C routines that size memory.
# Evidence: of 506 public files with attention code (24 repositories: benchmarks/policy_corpus.py),
# the dunders defined are __init__ (1604), __all__ (74), __getitem__ (34), __len__ (32),
# __call__ (20), __post_init__ (8), __enter__/__exit__ (7), __author__ (5), __iter__/__next__
# (2), __new__ (2), __repr__ (1), and, outside attention code, __reduce_ex__ (2), __setstate__,
# __copy__, __getattribute__, __array_finalize__, __torch_dispatch__ (1 each: a tensor or array
# subclass's plumbing).
DEFINABLE_DUNDERS = frozenset(
    {
        "__init__",
        "__new__",
        "__post_init__",
        "__call__",
        "__repr__",
        "__str__",
        "__format__",
        "__hash__",
        "__bool__",
        "__eq__",
        "__ne__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__len__",
        "__length_hint__",
        "__getitem__",
        "__setitem__",
        "__delitem__",
        "__contains__",
        "__iter__",
        "__reversed__",
        "__next__",
        "__enter__",
        "__exit__",
        "__copy__",
        "__deepcopy__",
        *(
            f"__{prefix}{op}__"
            for op in (
                "add",
                "sub",
                "mul",
                "matmul",
                "truediv",
                "floordiv",
                "mod",
                "divmod",
                "pow",
                "lshift",
                "rshift",
                "and",
                "xor",
                "or",
            )
            for prefix in ("", "r", "i")
        ),
        "__neg__",
        "__pos__",
        "__abs__",
        "__invert__",
        "__round__",
        "__slots__",  # the names it lists are strings: read like every other string
        "__match_args__",
        "__all__",
        "__doc__",
        "__version__",
        "__author__",
        "__constants__",  # TorchScript's constant attributes of a module
    }
)
# Dunders graded code may read as plain names (`__name__`; `__class__` inside a method is the
# class that defines it, as zero-argument super() uses it).
DUNDER_NAMES = frozenset({"__name__", "__doc__", "__file__", "__debug__", "__class__", "__qualname__", "__module__"})
# `x.__class__` only to name the class (its `__name__` ...): the class of a class is a metaclass,
# which makes classes from a namespace built at run time (use type(x) for the class itself).
CLASS_NAMES = frozenset({"__name__", "__qualname__", "__module__", "__doc__"})
# Names with a leading underscore that libraries document as public API: namedtuple's methods and
# enum's hooks. Not private to anyone.
PUBLIC_UNDERSCORED = frozenset(
    {
        "_asdict",
        "_replace",
        "_make",
        "_fields",
        "_field_defaults",
        "_value_",
        "_name_",
        "_missing_",
        "_generate_next_value_",
        "_ignore_",
        "_order_",
    }
)
# Library classes graded code may not subclass: tensors, storages and arrays. Their natively
# implemented private members (storages' `_new_with_weak_ptr`, `_set_cdata`, `_free_weak_ref` ...)
# take raw addresses; a subclass would make them its own (`self._...`).
UNSUBCLASSABLE = ("torch.Tensor", "torch.UntypedStorage", "torch.TypedStorage", "numpy.ndarray", "numpy.generic")
# Library APIs that make attributes or class members from names and values given at run time
# (found by reading the allowed modules' code: tests/test_source_policy.py lists every public
# function that calls setattr or type() with a name from its parameters, each decided here or
# harmless there): with a name computed at run time, one of them could give an object a
# protocol that the allow-list refuses in the code (a dunder above). The value: None (refused:
# attention code never needs it), or (positions, keywords): those arguments must be names
# written in the code (a string built from literals, or a tuple or list of them). An
# enumeration called with names (its functional API) makes a class with them
# (source_reader: _makes_enum).
NAME_CHANNELS = {
    "dataclasses.make_dataclass": None,  # a class from a list of names and a namespace
    "torch.nn.ParameterDict": None,  # any value, set as an attribute under its key
    "torch.nn.utils.parametrize.register_parametrization": ((1,), ("tensor_name",)),  # a property
    "functools.update_wrapper": ((2, 3), ("assigned", "updated")),  # attributes copied by name
    "functools.wraps": ((1, 2), ("assigned", "updated")),
}
# Library calls that change the class or function they are given: dataclass writes its __init__,
# __repr__, __eq__; total_ordering its comparisons; update_wrapper (and wraps) copy __module__,
# __name__, __qualname__, __doc__ and the __dict__ onto it; update_abstractmethods rewrites its
# abstract methods. Handed a library's class or function, each would change what the library
# defines, which graded code may not do itself (`F.softmax = ...`): they are for the file's own
# definitions, as decorators or called on a name the file defines (found by reading the
# allowed modules' code: tests/test_source_policy.py).
DECORATORS = frozenset(
    {
        "dataclasses.dataclass",
        "functools.total_ordering",
        "functools.update_wrapper",
        "functools.wraps",
        "abc.update_abstractmethods",
    }
)

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
