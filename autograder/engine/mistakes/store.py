"""The stored stages of an assignment (autograder/assignments/<id>/stages.json): the reference's
stages on every localisation probe's public inputs, and every known mistake's first finding
there. Made by `python -m autograder generate` (engine/generate/stage_build.py) from the
assignment's pipeline (mistakes/stages.py, instructor-only); read here, by the instructor's
grade and by a student's own run alike (the release ships the file: values of fixed public
inputs, no code), so that both localise alike.
"""

import hashlib
import json
from pathlib import Path

import torch

from autograder.engine.checks.folders import folder
from autograder.engine.mistakes.localise import localise
from autograder.engine.mistakes.scenario import Finding, Scenario, _tensor

STORE = "stages.json"
VERSION = 1
ENGINE = Path(__file__).resolve().parents[1]  # autograder/engine
_loaded = {}
_scenarios = {}


def path_of(assignment_id: str) -> Path:
    """Where an assignment's stored stages live: autograder/assignments/<id>/stages.json."""
    return folder(assignment_id) / STORE


def load(assignment_id: str) -> dict:
    """The stored stages of an assignment ({} when it has none): {"steps": {step: {"probes":
    {probe: Scenario JSON}, "mistakes": {"<mistake>#<variant>": [probe, Finding JSON] or None}}}}."""
    path = path_of(assignment_id)
    if path not in _loaded:
        _loaded[path] = json.loads(path.read_text()) if path.is_file() else {}
    return _loaded[path]


def same(a, b) -> bool:
    """Equal stores, tensors equal up to the last bits (BLAS may round differently elsewhere)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if "b64" in a and "b64" in b:
            x, y = _tensor(a), _tensor(b)
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if not x.is_floating_point():
                return torch.equal(x, y)
            return bool(torch.allclose(x.double(), y.double(), rtol=1e-5, atol=1e-7, equal_nan=True))
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))
    return a == b


def write(data: dict, path: Path) -> None:
    """Write a store (none where `data` is empty: an assignment without localisation)."""
    if data:
        path.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")
    elif path.is_file():
        path.unlink()
    _loaded.pop(path, None)
    _scenarios.clear()


def scenario_of(assignment_id: str, step_id: str, probe_key: str):
    """The stored Scenario of a step's localisation probe, or None."""
    key = assignment_id, step_id, probe_key
    if key not in _scenarios:
        data = load(assignment_id).get("steps", {}).get(step_id, {}).get("probes", {}).get(probe_key)
        _scenarios[key] = None if data is None else Scenario.from_json(data)
    return _scenarios[key]


def mistake_findings(assignment_id: str, step_id: str) -> dict:
    """{"<mistake>#<variant>": (probe, Finding) or None}: each known mistake's first finding on
    the step's localisation probes."""
    stored = load(assignment_id).get("steps", {}).get(step_id, {}).get("mistakes", {})
    return {key: None if value is None else (value[0], Finding.from_json(value[1])) for key, value in stored.items()}


def sources_digest(assignment_id: str) -> str:
    """A digest of what the stored stages are made from: the localisation and its relations, the
    recorder, the assignment's checks, observers and mistakes (its pipeline among them). When it
    changes, the store may be out of date."""
    here = folder(assignment_id)
    files = [
        ENGINE / "mistakes" / "localise.py",
        ENGINE / "mistakes" / "relations.py",
        ENGINE / "mistakes" / "raised.py",
        ENGINE / "mistakes" / "scenario.py",
        ENGINE / "build" / "stage_build.py",
        ENGINE.parent / "harness" / "trace.py",
        *sorted((here / "checks").glob("*.py")),
        *sorted((here / "observers").glob("*.py")),
        *sorted((here / "mistakes").glob("*.py")),
    ]
    text = "".join(f"{path.name}\n{path.read_text()}" for path in files if path.is_file())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def probe_key(probe) -> str:
    """A localisation probe's name in the store: its class name."""
    return type(probe).__name__


def probe_inputs(probe) -> dict:
    """A localisation probe's inputs: fixed, public (the same in the store and in every run)."""
    return probe.inputs(torch.Generator().manual_seed(2026))


def report_of(values):
    """The report to localise from a probe's observation: the run with earlier steps written out
    where the observer made one (an earlier step's mistake is charged there, not here)."""
    from autograder.harness.earlier import WRITTEN_OUT  # late: the key only, not the harness at start-up

    if isinstance(values, dict) and isinstance(values.get(WRITTEN_OUT), dict):
        written = values[WRITTEN_OUT].get("values")
        if isinstance(written, dict):
            return written
    return values


def first_finding(probes, run, assignment_id, step_id, tol):
    """(probe key, Finding, Scenario) of the first localisation probe whose run (`run(probe,
    inputs) -> observation values or None`) leaves the reference, or None."""
    for probe in probes:
        key = probe_key(probe)
        scenario = scenario_of(assignment_id, step_id, key)
        if scenario is None:
            continue
        values = run(probe, probe_inputs(probe))
        if values is None:
            continue
        with one_thread():
            finding = localise(report_of(values), scenario, tol)
        if finding is not None:
            return key, finding, scenario
    return None


class one_thread:
    """Tiny tensors, many ops: one thread (several only wait on each other, on a busy machine)."""

    def __enter__(self):
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.threads)
