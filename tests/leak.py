"""The functional leak measure (issue 30): nothing shipped to students computes a step's answer.

    python tests/leak.py RELEASE OUT.json [--only TEXT]

Every function and class that the student release ships is tried in place of every step function
or class of the skeleton whose signature fits, and graded by the instructor's kit with hidden
checks (the reference's other parts around it). What counts as shipped: every .py file of the
release folder, of the grader each notebook carries (its base64 zip) and the notebooks' code
cells; in each, every function (nested ones, methods, lambdas, comprehension bodies aside),
every class and every callable object a module holds.

Forbidden calls are not watched: a shipped function that computes the answer with a built-in
the step forbids (an oracle made of F.scaled_dot_product_attention) still computes it.

A candidate *earns* a check when it passes a check that no trivial stand-in passes (raising a
ValueError, returning None, returning its first argument, ...): such checks (a ValueError for a
size that does not divide, the caller's lists left alone) say nothing about the answer. The
measure asserts that no candidate earns a check, public or hidden; it records the points too.

How a candidate is fitted to a slot, as a student who reads the release would do it:
* arguments: the slot's call as it is, else its arguments by position (defaults filled) cut to
  what the candidate takes, else repeated to the length it needs (causal(L) as causal(L, L));
* results: as they are, else a dict's values as a tuple (or its one value), else the first item;
* a class slot takes a class, or a function whose first parameter is the layers' weights
  (`state`/`states`): then a subclass of the reference's class forwards to it with its own
  layers' weights (an oracle that takes the weights as a dict).

Student code is never trusted, and neither are these candidates: the measure runs in its own
process, which forks once per candidate (its side effects, a watch installed or a signal set,
die with the fork), under a time limit per check and per fork.
"""

import argparse
import ast
import base64
import hashlib
import importlib
import inspect
import io
import json
import os
import re
import select
import shutil
import signal
import sys
import time
import types
import zipfile
from pathlib import Path
from types import SimpleNamespace

KIT = Path(__file__).resolve().parents[1]
SOLUTIONS = KIT / "solutions"
CHECK_TIMEOUT = 2.0  # seconds per check: a correct candidate takes milliseconds
FORK_TIMEOUT = 120.0  # seconds per candidate, all its slots: a fork past it is killed (no points)
SEED = 20261121  # the hidden checks' seed
NOT_SLOTS = {"cuda"}  # the cuda step judges the whole module's devices, not one function's values
COMPREHENSIONS = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<module>"}


# ---------------------------------------------------------------------------- what ships


def shipped_sources(release: Path) -> dict:
    """{label: source} of every .py the release ships: its folder, each notebook's grader zip,
    each notebook's code cells (one label per cell)."""
    sources = {}
    for path in sorted(release.rglob("*.py")):
        sources[f"release/{path.relative_to(release).as_posix()}"] = path.read_text()
    for notebook in sorted(release.rglob("*.ipynb")):
        cells = json.loads(notebook.read_text())["cells"]
        for number, cell in enumerate(cells):
            if cell["cell_type"] != "code":
                continue
            text = "".join(cell["source"])
            for blob in re.findall(r'"([A-Za-z0-9+/=]{200,})"', text):
                try:
                    archive = zipfile.ZipFile(io.BytesIO(base64.b64decode(blob)))
                except (ValueError, zipfile.BadZipFile):
                    continue
                for name in archive.namelist():
                    if name.endswith(".py"):
                        sources[f"{notebook.name}:zip/{name}"] = archive.read(name).decode()
            code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("%", "!")))
            sources[f"{notebook.name}:cell{number}"] = code
    return sources


def trees(sources: dict) -> dict:
    """{tree label: {relative path: source}}: the release's files, each notebook's zip whose files
    differ from the release's, each notebook's cells; a file identical to one in an earlier tree
    is left out (it ships the same code)."""
    grouped = {}
    for label, text in sources.items():
        if label.startswith("release/"):
            tree, path = "release", label[len("release/") :]
        elif ":zip/" in label:
            tree, path = label.split("/", 1)
        else:
            tree, path = label.split(":", 1)[0] + ":cells", label.split(":", 1)[1] + ".py"
        grouped.setdefault(tree, {})[path] = text
    seen, kept = set(), {}
    for tree, files in grouped.items():
        fresh = {}
        for path, text in files.items():
            digest = hashlib.sha256(f"{path}\0{text}".encode()).hexdigest()
            if digest not in seen:
                seen.add(digest)
                fresh[path] = text
        if fresh:
            kept[tree] = files if any(path.startswith("autograder/") for path in fresh) else fresh
    return kept


def install(tree_files: dict, root: Path, name: str) -> Path:
    """Write a tree under root/<name>/, its `autograder` package renamed `name` (so that it loads
    beside the instructor's kit, which grades); returns the folder to put on sys.path."""
    base = root / name
    for path, text in tree_files.items():
        target = base / (name + path[len("autograder") :] if path.startswith("autograder/") else path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(re.sub(r"\bautograder\b", name, text) if path.startswith("autograder/") else text)
    return base


def load_modules(release: Path, root: Path) -> list:
    """(label, namespace, source path, error) of every shipped file. The grader's modules are
    imported (renamed: module docstring); other files (the skeleton, notebook cells: the setup
    cell installs things) are only compiled, their functions made with an empty namespace."""
    import autograder  # noqa: F401 - the instructor's kit first: the renamed copies never shadow it

    modules = []
    for number, (tree, files) in enumerate(trees(shipped_sources(release)).items()):
        name = f"shipped{number}"
        base = install(files, root, name)
        if (base / name).is_dir():
            sys.path.insert(0, str(base))
        for path in sorted(base.rglob("*.py")):
            relative = path.relative_to(base)
            label, parts = f"{tree}/{relative.as_posix()}", list(relative.with_suffix("").parts)
            if parts[0] != name:
                modules.append(
                    (label, {"__name__": f"{name}.{'.'.join(parts)}", "__builtins__": __builtins__}, str(path), None)
                )
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            try:
                module = importlib.import_module(".".join(parts))
            except BaseException as error:  # noqa: BLE001 - a missing extra (a route's own library)
                modules.append(
                    (label, {"__name__": ".".join(parts)}, str(path), f"{type(error).__name__}: {error}"[:200])
                )
                continue
            modules.append((label, vars(module), str(path), None))
    return modules


# ---------------------------------------------------------------------------- candidates


def candidates(modules) -> list:
    """(name, object, kind) of every function ("function"), class ("class") and callable object
    ("function") the modules define, nested functions and lambdas included, each code once."""
    found, codes = [], set()

    def add(name, obj, kind):
        code = getattr(obj, "__code__", None)
        if code is not None:
            if code in codes:
                return
            codes.add(code)
        found.append((name, obj, kind))

    def walk_class(prefix, cls, depth=0):
        if depth > 4:
            return
        add(prefix, cls, "class")
        for key, value in list(vars(cls).items()):
            target = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if isinstance(value, property):
                for part in (value.fget, value.fset):
                    if part is not None:
                        add(f"{prefix}.{key}", part, "function")
            elif inspect.isfunction(target):
                add(f"{prefix}.{key}", target, "function")
                if isinstance(value, classmethod):
                    add(f"{prefix}.{key}(bound)", getattr(cls, key), "function")
            elif inspect.isclass(value) and value.__module__ == cls.__module__:
                walk_class(f"{prefix}.{key}", value, depth + 1)

    for label, namespace, path, _ in modules:
        module_name = namespace.get("__name__")
        for key, value in list(namespace.items()):
            if inspect.isfunction(value) and value.__module__ == module_name:
                add(f"{label}:{key}", value, "function")
            elif inspect.isclass(value) and value.__module__ == module_name:
                walk_class(f"{label}:{key}", value)
            elif (
                callable(value)
                and not inspect.isclass(value)
                and not inspect.isroutine(value)
                and getattr(type(value), "__module__", "") == module_name
            ):
                add(f"{label}:{key}(object)", value, "function")
        # every code object the file compiles to: nested functions and lambdas, those of methods too
        source = Path(path).read_text()
        try:
            compiled = compile(source, path, "exec")
        except SyntaxError:
            continue
        known = {(c.co_qualname, c.co_firstlineno) for c in codes}
        for code in nested_codes(compiled):
            if code.co_name in COMPREHENSIONS or (code.co_qualname, code.co_firstlineno) in known:
                continue
            if not code.co_flags & inspect.CO_NEWLOCALS:  # a class body
                continue
            cells = tuple(
                types.CellType(namespace[n]) if n in namespace else types.CellType() for n in code.co_freevars
            )
            function = types.FunctionType(code, namespace, code.co_name, None, cells or None)
            add(f"{label}:{code.co_qualname}@{code.co_firstlineno}", function, "function")
    return found


def nested_codes(code):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from nested_codes(const)


# ---------------------------------------------------------------------------- slots


def slots(release: Path) -> list:
    """(assignment, step, file, name, kind) of every step function and class of the skeleton:
    the top-level definitions of the files each step grades (its FILES)."""
    from autograder.engine.course import config as grading_config

    found = []
    for config in grading_config.load_all():
        for step_id, module in config.step_modules().items():
            if step_id in NOT_SLOTS:
                continue
            for file in module.FILES:
                tree = ast.parse((release / "assignments" / config.package / file).read_text())
                for node in tree.body:
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                        kind = "class" if isinstance(node, ast.ClassDef) else "function"
                        found.append((config.id, step_id, file[:-3], node.name, kind))
    return found


def positional_counts(signature):
    """(required, most) positional arguments a signature takes (most None: *args)."""
    required = most = 0
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            most += 1
            required += parameter.default is parameter.empty
        elif parameter.kind == parameter.VAR_POSITIONAL:
            return required, None
        elif parameter.kind == parameter.KEYWORD_ONLY and parameter.default is parameter.empty:
            return None, None  # a required keyword: no call of the slot's names it
    return required, most


def signature_of(obj):
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def fits(candidate_signature, slot_signature) -> bool:
    """Whether some call the adapter makes (fitted) binds: the slot's arguments, a prefix of them,
    or them repeated by one."""
    required, most = positional_counts(candidate_signature)
    if required is None:
        return False
    slot_required, slot_most = positional_counts(slot_signature)
    low, high = slot_required, (slot_most or slot_required) + 1
    return required <= high and (most is None or most >= min(low, 1))


def fitted(candidate, candidate_signature, slot_signature):
    """A callable with the slot's signature that calls `candidate` (see the module docstring)."""

    def call(*args, **kwargs):
        try:
            candidate_signature.bind(*args, **kwargs)
            return candidate(*args, **kwargs)
        except TypeError as error:
            if not _binding_error(error):
                raise
        bound = slot_signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = [v for name, v in bound.arguments.items() if slot_signature.parameters[name].kind <= 1]
        for n in range(len(values), -1, -1):
            try:
                candidate_signature.bind(*values[:n])
            except TypeError:
                continue
            return candidate(*values[:n])
        padded = values + values[-1:]
        return candidate(*padded)

    return call


def _binding_error(error) -> bool:
    text = str(error)
    return "argument" in text and ("missing" in text or "unexpected" in text or "takes" in text)


def adapt_result(result, how):
    if how == "dict_values" and isinstance(result, dict):
        values = tuple(result.values())
        return values[0] if len(values) == 1 else values
    if how == "first":
        if isinstance(result, dict) and result:
            return next(iter(result.values()))
        if isinstance(result, (tuple, list)) and result:
            return result[0]
    return result


RESULT_ADAPTERS = ("as_is", "dict_values", "first")


# ---------------------------------------------------------------------------- grading


def reference_package(package):
    from autograder.engine.judge.verdict import load_reference

    return load_reference(SOLUTIONS, package)


def with_slot(reference, file, name, replacement):
    """The reference package with `file`.`name` replaced (a namespace per file)."""
    files = {}
    for path in (SOLUTIONS / reference._directory.name).glob("*.py"):
        if path.stem != "__init__":
            module = getattr(reference, path.stem)
            files[path.stem] = SimpleNamespace(**vars(module))
    setattr(files[file], name, replacement)
    return SimpleNamespace(**files)


def grade_step(config, step_id, package):
    """{check id: (passed, visibility, points)} of the step, hidden checks too."""
    from autograder.engine.judge.in_process import observe
    from autograder.engine.judge.plan import cached_inputs, check_seed
    from autograder.engine.judge.score import score_step
    from autograder.engine.judge.verdict import cached_expectation, judge

    step = next(s for s in config.steps if s.id == step_id)
    reference = reference_package(config.package)
    outcomes = []
    for check in config.step_modules()[step_id].CHECKS:
        inputs = cached_inputs(check, check_seed(check, SEED))
        # no forbidden list: a shipped function that computes the answer with a built-in the step
        # forbids (F.scaled_dot_product_attention) still computes it
        observation = observe(check, package, inputs, CHECK_TIMEOUT)
        try:
            expected = cached_expectation(check, inputs, reference, SEED)
            fail = judge(check, inputs, observation, expected, step.tolerance)
        except Exception:  # noqa: BLE001 - a judge that cannot read what the candidate gave
            fail = True
        outcomes.append((check, fail is None, None))
    result = score_step(step, outcomes)
    return {c.id: (c.passed, c.visibility, c.points) for c in result.checks}


def warm_expectations(configs):
    """Every check's inputs and expectation, made once here: each fork inherits them."""
    from autograder.engine.judge.plan import cached_inputs, check_seed
    from autograder.engine.judge.verdict import cached_expectation

    for config in configs:
        reference = reference_package(config.package)
        for path in (SOLUTIONS / config.package).glob("*.py"):
            if path.stem != "__init__":
                getattr(reference, path.stem)  # imported here, not in every fork
        for step_id, module in config.step_modules().items():
            if step_id in NOT_SLOTS:
                continue
            for check in module.CHECKS:
                cached_expectation(check, cached_inputs(check, check_seed(check, SEED)), reference, SEED)


def trivial_stand_ins(kind, slot_signature):
    """Stand-ins that compute nothing: what they pass says nothing about the answer."""
    import torch

    def raises(kind_of_error):
        def stand_in(*args, **kwargs):
            raise kind_of_error("stand-in")

        return stand_in

    first = lambda *args, **kwargs: args[0] if args else None  # noqa: E731
    functions = [
        raises(ValueError),
        raises(TypeError),
        raises(RuntimeError),
        raises(IndexError),
        lambda *args, **kwargs: None,
        first,
        lambda *args, **kwargs: args,
        lambda *args, **kwargs: (args[0], args[0]) if args else None,
        lambda *args, **kwargs: torch.zeros_like(args[0]) if args and isinstance(args[0], torch.Tensor) else None,
    ]
    if kind == "function":
        return functions

    class Module(torch.nn.Module):
        def __init__(self, *args, **kwargs):
            super().__init__()

        def forward(self, *args, **kwargs):
            return args[0] if args else None

    class Plain:
        def __init__(self, *args, **kwargs):
            self.seen = []

        def update(self, k, v):
            return k, v

        def __len__(self):
            return 0

        def reset(self):
            pass

    class Raising:
        def __init__(self, *args, **kwargs):
            raise ValueError("stand-in")

    return [Module, Plain, Raising]


def stand_ins(config, slot):
    """(replacement, trial kind) of the trivial stand-ins for a slot (trivial_stand_ins), and for a
    module class the state adapter around each trivial function."""
    import torch

    assignment, step_id, file, name, kind = slot
    reference_object = slot_object(config, file, name)
    made = [(stand_in, kind) for stand_in in trivial_stand_ins(kind, signature_of(reference_object))]
    if kind == "class" and issubclass(reference_object, torch.nn.Module):
        for function in trivial_stand_ins("function", None):
            made.append(
                (
                    state_adapter(reference_object, function, inspect.Signature([inspect.Parameter("states", 1)])),
                    "state",
                )
            )
    return made


def slot_object(config, file, name):
    return getattr(getattr(reference_package(config.package), file), name)


def state_adapter(reference_class, candidate, candidate_signature):
    """A subclass of the reference's class whose forward calls `candidate` with the weights of
    its own layers (a dict by attribute name, or the one layer's for a `state` parameter), the
    forward's arguments (None: the first one, self-attention) and the constructor's, by name."""
    import torch

    first = next(iter(candidate_signature.parameters))
    slot_init = signature_of(reference_class)

    class Adapted(reference_class):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            bound = slot_init.bind(*args, **kwargs)
            bound.apply_defaults()
            self._made_with = dict(bound.arguments)

        def forward(self, *args, **kwargs):
            layers = {
                key: {"weight": layer.weight, **({"bias": layer.bias} if layer.bias is not None else {})}
                for key, layer in self.named_children()
                if isinstance(layer, torch.nn.Linear)
            }
            weights = next(iter(layers.values())) if first == "state" else layers
            forward = signature_of(reference_class.forward).bind(self, *args, **kwargs)
            forward.apply_defaults()
            given = {key: value for key, value in forward.arguments.items() if key != "self"}
            lead = next(iter(given.values()))
            given = {key: lead if value is None and key in ("key", "value") else value for key, value in given.items()}
            names = list(candidate_signature.parameters)[1:]
            call = {key: value for key, value in {**self._made_with, **given}.items() if key in names}
            positional = [given[key] for key in given if key not in names]
            return candidate(weights, *positional, **call)

    return Adapted


def trials(config, slot, objects):
    """(label, replacement) of every way the candidates `objects` ([(name, obj, kind)]) stand in
    for `slot`; each replacement records the kinds of results it gave (for the result adapters)."""
    assignment, step_id, file, name, kind = slot
    reference_object = slot_object(config, file, name)
    slot_signature = signature_of(reference_object)
    for label, obj, candidate_kind in objects:
        signature = signature_of(obj)
        if signature is None:
            continue
        if kind == "function" and candidate_kind == "function" and fits(signature, slot_signature):
            yield label, "function", fitted(obj, signature, slot_signature)
        elif kind == "class" and candidate_kind == "class" and fits(signature, slot_signature):
            yield label, "class", obj
        elif kind == "class" and candidate_kind == "function" and is_module(reference_object):
            parameters = list(signature.parameters)
            if parameters and parameters[0] in ("state", "states"):
                yield label, "state", state_adapter(reference_object, obj, signature)


def recorded_calls(config, slot) -> list:
    """The calls the step's checks make of the slot on the reference (its arguments, copied):
    for a class, ("make", args, kwargs) and ("forward", args, kwargs) of its instances."""
    import copy

    import torch

    from autograder.engine.judge.in_process import observe
    from autograder.engine.judge.plan import cached_inputs, check_seed

    assignment, step_id, file, name, kind = slot
    original = slot_object(config, file, name)
    calls = []
    if kind == "function":

        def replacement(*args, **kwargs):
            calls.append(("call", copy.deepcopy(args), copy.deepcopy(kwargs)))
            return original(*args, **kwargs)

    else:

        class replacement(original):
            def __init__(self, *args, **kwargs):
                calls.append(("make", copy.deepcopy(args), copy.deepcopy(kwargs)))
                super().__init__(*args, **kwargs)

            if issubclass(original, torch.nn.Module):

                def forward(self, *args, **kwargs):
                    calls.append(
                        (
                            "forward",
                            [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args],
                            dict(kwargs),
                        )
                    )
                    return super().forward(*args, **kwargs)

    package = with_slot(reference_package(config.package), file, name, replacement)
    for check in config.step_modules()[step_id].CHECKS:
        observe(check, package, cached_inputs(check, check_seed(check, SEED)), 10)
    return calls


def holds_tensor(value, depth=0) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return True
    if depth < 3 and isinstance(value, (tuple, list)):
        return any(holds_tensor(item, depth + 1) for item in value[:8])
    if depth < 3 and isinstance(value, dict):
        return any(holds_tensor(item, depth + 1) for item in list(value.values())[:8])
    return False


def may_earn(kind, replacement, calls) -> bool:
    """Whether a replacement gives anything on the slot's recorded calls that a check could judge
    right (a function: a result holding a tensor; a class: an instance, and a module's forward a
    tensor). One that raises on every call, or returns no tensor, earns only what the trivial
    stand-ins earn: it is not graded."""
    import copy

    from autograder.harness.observe import CheckTimeout, time_limit

    def attempt(work):
        try:
            with time_limit(CHECK_TIMEOUT):
                return True, work()
        except (Exception, CheckTimeout):  # noqa: BLE001 - candidates raise for most calls
            return False, None

    if kind == "function":
        return any(
            attempt(lambda a=a, k=k: holds_tensor(replacement(*copy.deepcopy(a), **copy.deepcopy(k))))[1]
            for _, a, k in calls
        )
    makes = [(a, k) for what, a, k in calls if what == "make"]
    forwards = [(a, k) for what, a, k in calls if what == "forward"]
    for args, kwargs in makes:
        made, instance = attempt(lambda: replacement(*copy.deepcopy(args), **copy.deepcopy(kwargs)))  # noqa: B023 - called at once
        if not made:
            continue
        if not forwards or kind != "state":
            return True
        return any(
            attempt(
                lambda a=a, k=k, instance=instance: holds_tensor(
                    instance.double()(*copy.deepcopy(a), **copy.deepcopy(k))
                )
            )[1]
            for a, k in forwards
        )
    return False


def is_module(obj) -> bool:
    import torch

    return inspect.isclass(obj) and issubclass(obj, torch.nn.Module)


def run_trial(config, slot, replacement, kind):
    """{adapter: {check id: (passed, visibility, points)}} of one replacement in its slot."""
    assignment, step_id, file, name, _ = slot
    results = {}
    if kind == "function":
        seen = set()

        def recording(how):
            def call(*args, **kwargs):
                result = replacement(*args, **kwargs)
                seen.add(type(result).__name__)
                return adapt_result(result, how)

            return call

        results["as_is"] = grade_step(
            config, step_id, with_slot(reference_package(config.package), file, name, recording("as_is"))
        )
        if seen & {"dict"}:
            results["dict_values"] = grade_step(
                config, step_id, with_slot(reference_package(config.package), file, name, recording("dict_values"))
            )
        if seen & {"dict", "tuple", "list"}:
            results["first"] = grade_step(
                config, step_id, with_slot(reference_package(config.package), file, name, recording("first"))
            )
    else:
        results["as_is"] = grade_step(
            config, step_id, with_slot(reference_package(config.package), file, name, replacement)
        )
    return results


def start_fork(work):
    """(pid, read end) of a forked child that writes work()'s JSON-able result and exits."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its side effects die with it
        os.close(read)
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            for descriptor in (0, 1, 2):
                os.dup2(devnull, descriptor)
            data = json.dumps(work()).encode()
        except BaseException:  # noqa: BLE001
            data = b"null"
        with os.fdopen(write, "wb") as out:
            out.write(data)
        os._exit(0)
    os.close(write)
    return pid, os.fdopen(read, "rb")


def in_forks(jobs, processes=2, timeout=FORK_TIMEOUT):
    """{key: work()'s result, or None where the child died or ran past `timeout`} of every
    (key, work) in `jobs`, `processes` children at a time."""
    results, running, pending = {}, {}, list(jobs)
    while pending or running:
        while pending and len(running) < processes:
            key, work = pending.pop(0)
            pid, source = start_fork(work)
            running[source] = (key, pid, time.monotonic(), [])
        ready, _, _ = select.select(list(running), [], [], 1.0)
        for source in ready:
            chunk = source.read1(1 << 20)
            key, pid, started, chunks = running[source]
            if chunk:
                chunks.append(chunk)
                continue
            del running[source]
            source.close()
            os.waitpid(pid, 0)
            try:
                results[key] = json.loads(b"".join(chunks) or b"null")
            except ValueError:
                results[key] = None
        for source, (key, pid, started, _) in list(running.items()):
            if time.monotonic() - started > timeout:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                source.close()
                del running[source]
                results[key] = None
    return results


def safely(work):
    try:
        return work()
    except BaseException:  # noqa: BLE001 - one trial's failure costs only that trial
        return None


def measure(release: Path, out: Path, only: str = None, workdir: Path = None, processes: int = 2) -> dict:
    """Run the measure; writes and returns {"slots", "baseline", "earned", "tried", "unloaded"}."""
    import torch

    torch.set_num_threads(1)  # before any fork: forked children of a multi-threaded parent can hang
    from autograder.engine.course import config as grading_config
    from autograder.engine.judge.plan import warm_up_grader

    configs = {config.id: config for config in grading_config.load_all()}
    warm_up_grader(list(configs.values()))
    warm_expectations(configs.values())
    workdir = Path(workdir or out.parent / "leak-shipped")
    shutil.rmtree(workdir, ignore_errors=True)
    modules = load_modules(release, workdir)
    found = [c for c in candidates(modules) if only is None or only in c[0]]
    all_slots = slots(release)
    names = {slot: f"{slot[0]}:{slot[1]}:{slot[3]}" for slot in all_slots}

    # the reference through every check first, in this process: what a check pays once (a first
    # `triu` on 'meta' imports torch._dynamo) is paid here, not in every fork under its time limit
    calls = {slot: recorded_calls(configs[slot[0]], slot) for slot in all_slots}
    jobs = []
    for slot in all_slots:
        config = configs[slot[0]]
        for number, (stand_in, kind) in enumerate(stand_ins(config, slot)):
            jobs.append(
                (
                    (names[slot], number),
                    lambda c=config, s=slot, r=stand_in, k=kind: safely(lambda: run_trial(c, s, r, k)),
                )
            )
    baseline = {}
    for (slot_name, _), graded in in_forks(jobs, processes).items():
        for checks in (graded or {}).values():
            baseline.setdefault(slot_name, set()).update(check for check, (passed, _, _) in checks.items() if passed)

    jobs, tried = [], 0
    for candidate in found:
        planned = [
            (slot, kind, replacement)
            for slot in all_slots
            for _, kind, replacement in trials(configs[slot[0]], slot, [candidate])
        ]
        tried += len(planned)
        if planned:
            jobs.append(
                (
                    candidate[0],
                    lambda planned=planned: [
                        # safely() calls each lambda at once, in this iteration
                        (names[slot], kind, safely(lambda: run_trial(configs[slot[0]], slot, replacement, kind)))  # noqa: B023
                        for slot, kind, replacement in planned
                        if safely(lambda: may_earn(kind, replacement, calls[slot]))  # noqa: B023
                    ],
                )
            )
    earned = []
    for label, graded in in_forks(jobs, processes).items():
        for slot_name, kind, adapters in graded or []:
            for how, checks in (adapters or {}).items():
                won = {
                    c: (v, p) for c, (passed, v, p) in checks.items() if passed and c not in baseline.get(slot_name, ())
                }
                if won:
                    earned.append(
                        {
                            "candidate": label,
                            "slot": slot_name,
                            "adapter": how if kind == "function" else kind,
                            "checks": sorted(won),
                            "public": round(sum(p for v, p in won.values() if v == "public"), 2),
                            "hidden": round(sum(p for v, p in won.values() if v == "hidden"), 2),
                        }
                    )
    report = {
        "slots": list(names.values()),
        "candidates": len(found),
        "tried": tried,
        "baseline": {key: sorted(value) for key, value in baseline.items()},
        "unloaded": {label: error for label, _, _, error in modules if error},
        "earned": sorted(earned, key=lambda row: (row["slot"], row["candidate"])),
    }
    out.write_text(json.dumps(report, indent=1))
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", help="only candidates whose name contains this")
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args(argv)
    report = measure(args.release.resolve(), args.out.resolve(), args.only, processes=args.processes)
    for row in report["earned"]:
        print(
            f"{row['candidate']:80s} {row['slot']:40s} {row['adapter']:12s} public {row['public']:6g} hidden {row['hidden']:6g}"
        )
    print(f"{report['tried']} trials, {len(report['earned'])} earned a check")


if __name__ == "__main__":
    main()
