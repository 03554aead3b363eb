"""Earlier steps' functions in an integration step: one mistake, one charge (issue 22).

An integration step runs the student's whole module, which may call functions graded in earlier
steps (split_heads, the attention function, the masks). When one of those is wrong, the module's
output is wrong too, but the mistake is that step's. So an observer of the module runs it as
usual, and where an earlier function differs from its written-out version on a probe (or raises
there), runs it once more with the written-out versions in place of the student's, wherever the
package holds them; the judge decides what the two runs mean (engine/checks/earlier.py).

    EARLIER = [Earlier("attention", "attention", "scaled_dot_product_attention", by_hand, calls)]
    got = with_earlier_steps(package, EARLIER, run)   # run() -> the module's observations

Written-out versions are plain torch ops, defined by the assignment's observers: never the
reference's code, never a forbidden call. They import what they use inside their bodies, so that
their code can stand in for the student's function (its __code__ swapped, every reference to it
then runs ours) whatever the student's module imports.
"""

import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import torch

from autograder.harness import watch
from autograder.harness.contract import ContractError
from autograder.harness.observe import trapped, where_text

WRITTEN_OUT = "with_earlier_steps_written_out"  # the observation of the second run
OWN_RAISED = "with_earlier_steps_own_raised"  # the module's own run raised: its report instead of values
# How close the student's function must be to the written-out one on the probe for no second run:
# far tighter than any check's tolerance, so that the judge sees every function it deems wrong.
CLOSE = {"rtol": 1e-9, "atol": 1e-12}


@dataclass(frozen=True)
class Earlier:
    """An earlier step's function that a module may call."""

    step: str  # the step that grades it
    file: str  # the package's module that defines it ("heads" for mha/heads.py)
    name: str  # the function
    by_hand: Callable  # the written-out version: plain torch ops, the contract's signature
    calls: Callable  # () -> [(args, kwargs)]: the probe, calls that tell a wrong version apart
    care: Callable = None  # (args, kwargs) -> bool tensor or None: where the contract fixes the result
    exercise: Callable = None  # (function) -> [results]: a probe of its own (a class: make, use); else calls

    def results(self, function):
        """`function`'s results on the probe, each a tensor or a list of them (None: not one)."""
        if self.exercise is not None:
            return [plain(result) for result in self.exercise(function)]
        return [plain(function(*args, **kwargs)) for args, kwargs in self.calls()]


def probe(function, entry):
    """The function's results on the entry's probe (tensors, or lists of them), or None if it
    raised or returned something else."""
    try:
        results = entry.results(function)
    except Exception:  # noqa: BLE001 - student code
        return None
    except GeneratorExit as error:  # trapped where it hung before (observe.trap): stopped at once
        if trapped(error) is None:
            raise
        return None
    return None if any(result is None for result in results) else results


def plain(result):
    """A result as tensors (detached) or a list of them, or None for anything else."""
    if isinstance(result, torch.Tensor):
        return result.detach()
    if isinstance(result, (tuple, list)) and 0 < len(result) <= 4 and all(isinstance(r, torch.Tensor) for r in result):
        return [r.detach() for r in result]
    return None


def close(theirs, mine) -> bool:
    if isinstance(mine, list):
        return isinstance(theirs, list) and len(theirs) == len(mine) and all(map(close, theirs, mine))
    if not isinstance(theirs, torch.Tensor) or theirs.shape != mine.shape or theirs.dtype != mine.dtype:
        return False
    if not mine.is_floating_point():
        return torch.equal(theirs, mine)
    return bool(torch.allclose(theirs, mine, equal_nan=True, **CLOSE))


def wrong_functions(package, table, forbidden_in: dict) -> dict:
    """{entry: (the student's function, its results on the probe)} of the entries whose function
    differs from the written-out one on the probe (or raises there), or makes a forbidden call
    there: its name -> [the calls] into `forbidden_in`, and out of the watch's record (the probe
    is the grader's run, not the module's). Files that cannot be loaded are left out: their own
    step says so."""
    wrong = {}
    for entry in table:
        try:
            module = getattr(package, entry.file)
        except Exception:  # noqa: BLE001 - a broken or missing file
            continue
        theirs = getattr(module, entry.name, None)
        if not callable(theirs):
            continue
        with watch.apart() as seen:
            got = probe(theirs, entry)
        calls = sorted(seen)
        if calls:
            forbidden_in[entry.name] = calls
        mine = entry.results(entry.by_hand)
        if got is None or calls or not all(map(close, got, mine)):
            wrong[entry] = (theirs, got)
    return wrong


@contextmanager
def written_out(package, wrong):
    """Within the block, each wrong function runs its written-out version: its code swapped where
    it can be (every reference to it, however imported, then runs ours), and every module of the
    package (or the package's namespace) that holds it pointed to the written-out function."""
    swapped, pointed = [], []
    try:
        for entry, (theirs, _) in wrong.items():
            function = getattr(theirs, "__func__", theirs)
            try:
                saved = (function.__code__, function.__defaults__, function.__kwdefaults__)
                function.__code__ = entry.by_hand.__code__
                function.__defaults__, function.__kwdefaults__ = (
                    entry.by_hand.__defaults__,
                    entry.by_hand.__kwdefaults__,
                )
                swapped.append((function, saved))
            except (AttributeError, TypeError, ValueError):  # a closure, a builtin, a callable object
                pass
            for holder in holders(package, entry):
                for name, value in list(vars(holder).items()):
                    if value is theirs:
                        pointed.append((holder, name, value))
                        setattr(holder, name, entry.by_hand)
        yield
    finally:
        for holder, name, value in reversed(pointed):
            setattr(holder, name, value)
        for function, (code, defaults, kwdefaults) in reversed(swapped):
            function.__code__, function.__defaults__, function.__kwdefaults__ = code, defaults, kwdefaults


def holders(package, entry):
    """The modules of a package loaded from files (every one under its name), or else the
    package's own namespace for the entry's file (a model package made of namespaces)."""
    loaded = getattr(package, "_module", None)
    if loaded is not None:
        prefix = loaded.__name__ + "."
        return [module for key, module in list(sys.modules.items()) if key.startswith(prefix) and module is not None]
    try:
        return [getattr(package, entry.file)]
    except Exception:  # noqa: BLE001
        return []


def with_earlier_steps(package, table, run):
    """run() (the module's observations), and where an earlier function is wrong, under
    WRITTEN_OUT: {"steps", "functions", "probes": {function: the student's results on the probe,
    None if it raised}, "values": run() with the written-out versions (None if that raised),
    "forbidden_in": {function: the forbidden calls it made on the probe}, "written_out_forbidden":
    the forbidden calls of the run with the written-out versions}.
    When the module's own run raises and the written-out run does not, the observation is
    {OWN_RAISED: {"type", "message", "where"}, WRITTEN_OUT: ...}; otherwise the error stands."""
    try:
        got, own_error = run(), None
    except ContractError:  # the module's own form (a missing layer): no earlier function's doing
        raise
    except Exception as error:  # noqa: BLE001 - student code
        got, own_error = None, error
    except GeneratorExit as error:  # an earlier function trapped where it hung: the hang is its step's
        if trapped(error) is None:
            raise
        got, own_error = None, error
    forbidden_in = {}
    wrong = wrong_functions(package, table, forbidden_in)
    if not wrong:
        if own_error is not None:
            raise own_error
        return got
    with watch.apart(keep=True) as seen:
        try:
            with written_out(package, wrong):
                values = run()
        except Exception:  # noqa: BLE001 - student code
            values = None
    written_out_forbidden = sorted(seen)
    if own_error is not None and values is None:
        raise own_error
    report = {
        "steps": sorted({entry.step for entry in wrong}),
        "functions": sorted(entry.name for entry in wrong),
        "probes": {entry.name: results for entry, (_, results) in wrong.items()},
        "values": values,
        "forbidden_in": forbidden_in,
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
