"""One module per step, named by the step id; each holds that step's checks.

A step module defines Check subclasses (see autograder/check.py): public ones first, then the
hidden ones, which compare against the reference solution on inputs made at grading time. It may
also define probes (Check subclasses with a `diagnosis` id, unscored) and FILES (the student
files the step grades, for the source scan). Its known mistakes live in autograder/mistakes/,
apart, because they quote the reference.
Adding a step = a reference function in solutions/mha/, a module here, an entry in grading.yml.
"""
import importlib
import inspect
import pkgutil

from ..check import Check

_modules = {}


def step_modules():
    """step id -> its checks module (with .CHECKS filled in), for every module in this package."""
    if not _modules:
        for info in pkgutil.iter_modules(__path__):
            _modules[info.name] = _load(info.name)
    return _modules


def _load(step_id):
    module = importlib.import_module(f"{__name__}.{step_id}")
    checks, probes = [], []
    for value in vars(module).values():
        if not (inspect.isclass(value) and issubclass(value, Check) and value.__module__ == module.__name__):
            continue
        if value.diagnosis or value.id:
            check = value()
            check.step = step_id
            (probes if check.diagnosis else checks).append(check)
    ids = [check.id for check in checks]
    duplicated = {i for i in ids if ids.count(i) > 1}
    if duplicated:
        raise RuntimeError(f"step {step_id}: check ids used twice: {sorted(duplicated)}")
    module.CHECKS = checks
    module.PROBES = probes
    module.FILES = getattr(module, "FILES", [])
    return module
