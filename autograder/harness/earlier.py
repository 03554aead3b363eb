"""Earlier steps' functions in an integration step: one mistake, one charge.

An integration step runs the student's whole module, which may call functions graded in earlier
steps (split_heads, the attention function, the masks), or something that computes one of them:
a class or closure around it, a helper the function hands its work to. When one of those is
wrong, the module's output is wrong too, but the mistake is that step's. So an observer of the
module runs it as usual and then tries each earlier function on a probe (fixed inputs):

    EARLIER = Table("mha", ("mha.py",), [Earlier("attention", "attention", "scaled_dot_product_attention", calls)])
    got = with_earlier_steps(package, EARLIER, run)   # run() -> the module's observations

* In the instructor's kit, which holds the earlier steps written out (autograder/assignments/<id>/
  written_out.py, loaded in the worker server; never in a student release), a function that
  differs from its written-out version on the probe (or raises there, or makes a forbidden call
  there) is written out and the module runs once more (WRITTEN_OUT: "values").
* In a student release, which holds none, the probe's expected results are the ones the release
  stores (harness/answers.py) and nothing is written out: the report says which wrong functions
  the module's run reached ("reached"), so that the judge can say the module depends on them.

The judge decides what the runs mean (engine/checks/earlier.py).

What computes an earlier function is found on its probe, by what it does: the student's function
itself and every function of the student's code that its call runs with the probe's arguments
(the same objects) and that returns its result (a callable class's __call__, the function a
decorator wraps, a helper it hands its work to). Each is written out by swapping its code for an
adapter with as many free variables as it has (a closure, a method using super(), a decorated
function are written out too) that hands its arguments, by name, to the written-out version: every
reference to it, however held (an attribute, a default, a partial, a wrapper's closure), then
runs the written-out version. A class (the kv_cache step's KVCache) is written out where the
package's modules name it.

Forbidden calls are told apart by the stack they were made on (forbidden_own): a call made inside
a code that computes a wrong earlier function, where that function made the same call on its
probe, is that function's (its own step charges it); a call made by the integration step's own
files, or by nothing earlier, is the module's own ("forbidden_own"), which the judge never
excuses.
"""

import importlib
import inspect
import os
import sys
import threading
import types
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from contextlib import nullcontext as _nothing
from dataclasses import dataclass, field

from autograder.harness import answers, phases, watch
from autograder.harness.contract import ContractError
from autograder.harness.observe import TRAPS, trapped, where_text
from autograder.harness.write_out import (
    Adapted,
    Mapping,
    Tracer,
    close,
    code_of,
    functions_with,
    holders,
    places,
    plain,
    pointed,
    positional,
    profiled,
    student_code,
    swapped,
    wrapped,
)

WRITTEN_OUT = "with_earlier_steps_written_out"  # the report, beside the module's own observations
OWN_RAISED = "with_earlier_steps_own_raised"  # the module's own run raised: its report instead of values
ASSIGNMENTS = __name__.rsplit(".", 2)[0] + ".assignments"  # autograder.assignments
SERVER = __name__.rsplit(".", 2)[0] + ".sandbox.fork_server"  # never imported here (a release has none)


@dataclass(frozen=True)
class Earlier:
    """An earlier step's function that a module may call, and its probe."""

    step: str  # the step that grades it
    file: str  # the package's module that defines it ("heads" for mha/heads.py)
    name: str  # the function (or class)
    calls: Callable = None  # () -> [(args, kwargs)]: the probe, calls that tell a wrong version apart
    care: Callable = None  # (args, kwargs) -> bool tensor or None: where the contract fixes the result
    exercise: Callable = None  # (callable) -> [results]: a probe of its own (a class: make, use); else calls

    def results(self, function):
        """`function`'s results on the probe, each a tensor or a list of them (None: not one)."""
        if self.exercise is not None:
            return [plain(result) for result in self.exercise(function)]
        return [plain(function(*args, **kwargs)) for args, kwargs in self.calls()]


@dataclass(frozen=True)
class Table:
    """An assignment's earlier functions, for its integration step (whose observers hold it)."""

    assignment: str
    own: tuple  # the integration step's own files ("mha.py"): a forbidden call written there is its own
    entries: list

    def __iter__(self):
        return iter(self.entries)


@dataclass
class Found:
    """What the probe found of a student's earlier function."""

    function: object  # the student's function (or class)
    results: list = None  # its results on the probe (None: it raised or returned something else)
    forbidden: list = field(default_factory=list)  # the forbidden calls it made there
    codes: dict = field(default_factory=dict)  # code -> Mapping: what computes it, by what it does
    wrapper: object = None  # the function itself where a library made it around the student's (a decorator)


# ---------------------------------------------------------------------------- the written-out versions

_versions = {}
_versions_lock = threading.Lock()


def versions(assignment: str):
    """{name: the written-out version} from the kit's autograder/assignments/<id>/written_out.py
    (in the worker server, from the text it read while root: fork_server.ROOT_ONLY), or None where
    the kit has none (a student release). Loaded once per process, in the worker server before any
    student code (serve.warm_up); the student's code never finds it by name (serve.forget_grader)."""
    with _versions_lock:
        if assignment not in _versions:
            name, server = f"{ASSIGNMENTS}.{assignment}.written_out", sys.modules.get(SERVER)
            try:
                module = server.root_read_module(name) if server is not None else None
                _versions[assignment] = dict((module or importlib.import_module(name)).WRITTEN_OUT)
            except ModuleNotFoundError as error:
                if error.name != name:
                    raise
                _versions[assignment] = None
        return _versions[assignment]


_expected = {}


def expected_results(table: Table, entry: Earlier):
    """The written-out version's results on the entry's probe, else the release's stored ones (None: neither)."""
    key = (table.assignment, entry.name)
    if key not in _expected:
        found = versions(table.assignment)
        if found is not None and entry.name in found:
            _expected[key] = entry.results(found[entry.name])
        else:
            stored = answers.load(table.assignment)
            _expected[key] = None if stored is None else stored.get(f"probe::{entry.name}")
    return _expected[key]


# ---------------------------------------------------------------------------- the probe, traced


def probe(function, entry, package, traced=True):
    """A Found: the function's results on the entry's probe (None if it raised or returned
    something else), and, `traced`, what computes it (the codes its calls ran that took the
    probe's arguments and gave its results)."""
    found = Found(function)
    try:
        if entry.exercise is not None:
            found.results = [plain(result) for result in entry.exercise(function)]
        else:
            found.results = []
            for args, kwargs in entry.calls():
                tracer = Tracer(package)
                with profiled(tracer) if traced else _nothing():
                    result = function(*args, **kwargs)
                found.results.append(plain(result))
                arguments = list(enumerate(args)) + list(kwargs.items())
                for code, values, returned, value in tracer.frames.values():
                    if not returned or not close(plain(value), plain(result)):
                        continue
                    mapping = places(code, arguments, values)
                    if mapping is not None and len(mapping.places) >= len(found.codes.get(code, Mapping(())).places):
                        found.codes[code] = mapping
    except Exception:  # noqa: BLE001 - student code
        found.results = None
    except GeneratorExit as error:  # trapped where it hung before (observe.trap): stopped at once
        if trapped(error) is None:
            raise
        found.results = None
    if found.results is not None and any(result is None for result in found.results):
        found.results = None
    own = code_of(function)
    if own is not None and student_code(own, package) and own not in found.codes:
        found.codes[own] = positional(own, _calls(entry))  # it raised before it ran, or returned another thing
    inner = wrapped(function, package)
    if inner is not None and (own is None or not student_code(own, package)):
        found.wrapper = function  # the decorator's wrapper is the function the step graded: written out whole
        found.codes.setdefault(inner.__code__, positional(inner.__code__, _calls(entry)))
    if inspect.isclass(function):  # a class: its methods are its code
        for value in vars(function).values():
            value = getattr(value, "__func__", value)
            if isinstance(value, types.FunctionType) and student_code(value.__code__, package):
                found.codes.setdefault(value.__code__, None)
    return found


def _calls(entry):
    return entry.calls() if entry.calls is not None else []


_probed = {}  # (entry, id(function), TRAPS) -> (function, Found or None): of one package at a time


@phases.worker_phase("earlier-step probes")
def wrong_functions(package, table) -> dict:
    """{entry: Found} of the entries whose function differs from the written-out one on the
    probe (or raises there, or makes a forbidden call there: kept in Found.forbidden, out of the
    watch's record, since the probe is the grader's run, not the module's). Files that cannot
    be loaded are left out: their own step says so. Each function is probed once per package
    (every run of its module asks; the probe's inputs are fixed), again once a trap was set."""
    if _probed.get("package", (None,))[0] is not package:
        _probed.clear()
        _probed["package"] = (package,)
    wrong = {}
    for entry in table:
        try:
            module = getattr(package, entry.file)
        except Exception:  # noqa: BLE001 - a broken or missing file
            continue
        theirs = getattr(module, entry.name, None)
        if not callable(theirs):
            continue
        key = (entry, id(theirs), TRAPS[0])
        if key not in _probed or _probed[key][0] is not theirs:
            _probed[key] = theirs, wrong_function(theirs, entry, package, table)
        if _probed[key][1] is not None:
            wrong[entry] = _probed[key][1]
    return wrong


def wrong_function(theirs, entry, package, table):
    """The Found of `theirs` where it is wrong on the entry's probe, else None."""
    mine = expected_results(table, entry)
    with watch.apart() as seen:
        found = probe(theirs, entry, package, traced=False)  # the common case, a right function: quick
    forbidden = sorted(seen)
    if mine is None or found.results is None or forbidden or not all(map(close, found.results, mine)):
        with watch.apart():  # once more, traced: what computes it (its verdict stays the first run's)
            results, found = found.results, probe(theirs, entry, package)
        found.results, found.forbidden = results, forbidden
        return found
    return None


# ---------------------------------------------------------------------------- writing out


@contextmanager
def written_out(package, table, wrong):
    """Within the block, every code that computes a wrong function runs its written-out version
    (harness/write_out.py: an adapter in its place), and a wrong class is replaced by its
    written-out version in every module of the package that names it."""
    found_versions = versions(table.assignment) or {}
    with ExitStack() as stack:
        targets = []
        for entry, found in wrong.items():
            version = found_versions.get(entry.name)
            if version is None:
                continue
            if inspect.isclass(found.function):
                stack.enter_context(pointed(holders(package, [entry.file]), found.function, version))
                continue
            mapped = {code: mapping for code, mapping in found.codes.items() if mapping is not None}
            functions = functions_with(package, [found.function], set(mapped))
            if isinstance(found.wrapper, types.FunctionType):  # a decorator's wrapper: its code is the library's
                functions.insert(0, found.wrapper)
            for function in functions:
                if function.__code__ in mapped:  # its own parameters hold the arguments
                    signature = inspect.signature(function, follow_wrapped=False)
                    targets.append((function, Adapted(version, signature, mapped[function.__code__])))
                else:  # a library's wrapper: the parameters of the function it wraps
                    inner = wrapped(function, package)
                    targets.append((function, Adapted(version, inspect.signature(inner), mapped[inner.__code__])))
        stack.enter_context(swapped(targets))
        yield


# ---------------------------------------------------------------------------- the module's runs


class _Reached:
    """The codes a run ran (a profile function: calls only)."""

    def __init__(self):
        self.codes = set()

    def __call__(self, frame, event, arg):
        if event == "call":
            self.codes.add(frame.f_code)


def forbidden_own(stacks, wrong, package, table) -> list:
    """The forbidden calls of the module's own run (`stacks`: {(name, codes on its stack,
    innermost first)}) that no wrong function made. Whose a call is, the stack says, read from
    the call outward through the student's code: the first frame that runs a code computing a
    wrong function which made that call on its probe makes it that function's; the first frame
    of a file of the integration step's own (Table.own) makes it the module's (a method of a
    tensor subclass it wrote there too), as does a stack with neither; a helper in another file
    is read past. So the module's own code never hides a call inside a function it calls."""
    directory = getattr(package, "_directory", None)
    own_files = {os.path.join(str(directory), name) for name in table.own} if directory is not None else set()
    own = set()
    for name, codes in stacks:
        makers = [found for found in wrong.values() if name in found.forbidden]
        owner = "module"
        for code in codes:
            if not student_code(code, package):
                continue
            if any(code in found.codes for found in makers):
                owner = "earlier"
                break
            if code.co_filename in own_files:
                break
        if owner == "module":
            own.add(name)
    return sorted(own)


def with_earlier_steps(package, table, run):
    """run() (the module's observations) and, where an earlier function is wrong on its probe,
    under WRITTEN_OUT: {"steps", "functions", "probes": {function: the student's results on the
    probe, None if it raised}, "forbidden_in": {function: the forbidden calls it made on the
    probe}, "forbidden_own": the forbidden calls of the module's own run made outside every
    wrong function, "reached": the wrong functions the module's run ran (a student release
    only), "values": run() with the wrong functions written out (None if that raised, or where
    the kit has no written-out versions), "written_out_forbidden": that run's forbidden calls}.
    When the module's own run raises, the observation is {OWN_RAISED: {"type", "message",
    "where"}, WRITTEN_OUT: ...} where a function is wrong; otherwise the error stands."""
    local = versions(table.assignment) is None
    reached = _Reached() if local else None
    try:
        with watch.attributed() as stacks, profiled(reached) if local else _nothing():
            got, own_error = run(), None
    except ContractError:  # the module's own form (a missing layer): no earlier function's doing
        raise
    except Exception as error:  # noqa: BLE001 - student code
        got, own_error = None, error
    except GeneratorExit as error:  # an earlier function trapped where it hung: the hang is its step's
        if trapped(error) is None:
            raise
        got, own_error = None, error
    wrong = wrong_functions(package, table)
    if not wrong:
        if own_error is not None:
            raise own_error
        return got
    values, written_out_forbidden = None, []
    if not local:
        with watch.apart(keep=True) as seen, phases.worker_phase("written-out runs"):
            try:
                with written_out(package, table, wrong):
                    values = run()
            except Exception:  # noqa: BLE001 - student code
                values = None
        written_out_forbidden = sorted(seen)
        if own_error is not None and values is None:
            raise own_error
    report = {
        "steps": sorted({entry.step for entry in wrong}),
        "functions": sorted(entry.name for entry in wrong),
        "probes": {entry.name: found.results for entry, found in wrong.items()},
        "forbidden_in": {entry.name: found.forbidden for entry, found in wrong.items() if found.forbidden},
        "forbidden_own": forbidden_own(stacks, wrong, package, table),
        "reached": sorted(e.name for e, f in wrong.items() if local and not reached.codes.isdisjoint(f.codes)),
        "values": values,
        "written_out_forbidden": written_out_forbidden,
    }
    if own_error is not None:
        text = str(own_error).strip().splitlines()
        got = {
            OWN_RAISED: {
                "type": type(own_error).__name__,
                "message": (text[0] if text else "")[:300],
                "where": where_text(own_error, package) if hasattr(package, "_directory") else "",
            }
        }
    got[WRITTEN_OUT] = report
    return got
