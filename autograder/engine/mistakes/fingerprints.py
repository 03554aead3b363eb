"""Fingerprints of the known mistakes on the public checks: diagnosis without the reference.

The public checks' inputs are fixed, so what each known mistake observes on them is fixed too.
`python -m autograder fingerprints` runs every mistake variant (an assignment's mistakes/) on every
public check it fails and stores a fingerprint of each observation in the assignment's fingerprints.json,
which the student release ships instead of the mistakes themselves. `pytest assignments/` then
compares the student's observations with the stored fingerprints (diagnosis.diagnose), by the
same rule as the instructor's grade.

A fingerprint keeps a tensor's form (shape, dtype, device type), exactly for integer and bool
tensors (a digest), and for floating ones a few fixed projections (sums weighted by a fixed
sequence) and where the non-finite entries are. Two tensors equal within the tolerance have
projections equal within a bound computed from that tolerance, so a match in the kit is a
match in the grader; different tensors practically never share four projections. Errors keep
their message id and a digest of their parameters (minus the file position). What ships: the
ids of mistakes that show on a public check, and numbers and digests, no code.
"""

import hashlib
import json
from pathlib import Path

import torch

from autograder import KIT
from autograder.engine.checks.folders import folder
from autograder.engine.mistakes.evidence import Evidence, best_variant, compared, says_nothing, without_where

ENGINE = Path(__file__).resolve().parents[1]  # autograder/engine
PROJECTIONS = 4
VERSION = 1


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _weights(n):
    """(PROJECTIONS, n) fixed weights: cosines at incommensurate frequencies, same on every machine."""
    i = torch.arange(1, n + 1, dtype=torch.float64)
    return torch.stack(
        [torch.cos(i * (0.7548776662466927 * (j + 1)) + 0.5698402909980532 * j) for j in range(PROJECTIONS)]
    )


def _float_values(t):
    """The values of a floating tensor in float64 on the CPU, or None (a fake tensor has none)."""
    try:
        return t.detach().cpu().to(torch.float64).flatten()
    except Exception:  # noqa: BLE001 - fake or meta tensors
        return None


def _form(t) -> list:
    """A tensor's shape, dtype and device type: what a fingerprint and a match compare first."""
    return [list(t.shape), str(t.dtype), t.device.type]


def _special(x, finite):
    """A digest of where the float64 values `x` are NaN, +inf or -inf (None: all are finite)."""
    if bool(finite.all()):
        return None
    return digest(str(torch.stack([torch.isnan(x), torch.isposinf(x), torch.isneginf(x)]).to(torch.uint8).tolist()))


def fingerprint(value) -> dict:
    """A JSON-able fingerprint of an observed value (see the module docstring)."""
    if isinstance(value, torch.Tensor):
        form = _form(value)
        if value.is_floating_point():
            x = _float_values(value)
            if x is None:
                return {"tensor": form}
            finite = torch.isfinite(x)
            special = _special(x, finite)
            x = torch.where(finite, x, torch.zeros_like(x))
            # 12 significant digits: far below any tolerance, and a smaller file
            return {
                "tensor": form,
                "special": special,
                "proj": [float(f"{p:.12g}") for p in (_weights(x.numel()) @ x).tolist()],
            }
        try:
            return {"tensor": form, "hash": digest(str(value.detach().cpu().flatten().tolist()))}
        except Exception:  # noqa: BLE001 - fake or meta tensors
            return {"tensor": form}
    if isinstance(value, dict):
        return {"dict": {str(key): fingerprint(item) for key, item in value.items()}}
    if isinstance(value, (list, tuple)):
        return {"list": [fingerprint(item) for item in value]}
    if isinstance(value, float):
        return {"float": value}
    return {"hash": digest(repr(value))}


def matches(value, fp: dict, tol: dict) -> bool:
    """True if `value` (the student's) could equal the value that gave `fp`, within `tol`."""
    try:
        return _matches(value, fp, tol)
    except Exception:  # noqa: BLE001 - values the student's code made: unreadable is no match
        return False


def _matches(value, fp, tol):
    if "tensor" in fp:
        if not isinstance(value, torch.Tensor):
            return False
        if _form(value) != fp["tensor"]:
            return False
        if "proj" in fp:
            x = _float_values(value)
            finite = torch.isfinite(x)
            special = _special(x, finite)
            if special != fp["special"]:
                return False
            x = torch.where(finite, x, torch.zeros_like(x))
            rtol, atol = tol[value.dtype]
            w = _weights(x.numel())
            # |w . (a - b)| <= |w| . |a - b| <= |w| . (atol + rtol |b|); |b| ~ |a|, hence the margin
            bound = 2 * (w.abs() @ (atol + rtol * x.abs())) + 1e-12
            return bool(((w @ x - torch.tensor(fp["proj"], dtype=torch.float64)).abs() <= bound).all())
        if "hash" in fp:
            return digest(str(value.detach().cpu().flatten().tolist())) == fp["hash"]
        return True
    if "dict" in fp:
        return isinstance(value, dict) and all(_matches(value.get(key), item, tol) for key, item in fp["dict"].items())
    if "list" in fp:
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(fp["list"])
            and all(_matches(v, item, tol) for v, item in zip(value, fp["list"], strict=True))
        )
    if "float" in fp:
        rtol, atol = tol[torch.float64]
        return isinstance(value, (int, float)) and abs(value - fp["float"]) <= atol + rtol * abs(fp["float"])
    return digest(repr(value)) == fp["hash"]


def observation_fingerprint(observation) -> dict:
    """The fingerprint of an observation.Observation: of its values, or of its error."""
    if observation.error is not None:
        params = without_where(observation.error.params)
        return {"error": observation.error.message_id, "params": digest(repr(sorted(params.items())))}
    return {"values": fingerprint(compared(observation.values))}


def observation_matches(observation, fp: dict, tol: dict) -> bool:
    if observation.error is not None or "error" in fp:
        return observation_fingerprint(observation) == fp
    return matches(compared(observation.values), fp["values"], tol)


def key(check, inputs) -> str:
    """Fingerprints are kept per check, and per device mode for the cuda step."""
    return f"{check.id}@{inputs['mode']}" if "mode" in inputs else check.id


# ---------------------------------------------------------------------------- the file


def path_of(assignment_id: str) -> Path:
    """Where an assignment's fingerprints live: autograder/assignments/<id>/fingerprints.json."""
    return folder(assignment_id) / "fingerprints.json"


def sources_digest(assignment_id: str) -> str:
    """A digest of what the fingerprints are made from: the checks, the mistakes, the judging
    and grading.yml. When it changes, the fingerprints may be out of date (a fast test)."""
    here = folder(assignment_id)
    files = [
        ENGINE / "checks" / "check.py",
        ENGINE / "mistakes" / "fingerprints.py",
        ENGINE / "generate" / "fingerprint_build.py",
        KIT / "grading.yml",
        *sorted((here / "checks").glob("*.py")),
        *sorted((here / "mistakes").glob("*.py")),
    ]
    return digest("".join(f"{path.name}\n{path.read_text()}" for path in files))


def write(data: dict, path: Path) -> None:
    path.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")


def same(a, b) -> bool:
    """Equal fingerprint files, floats equal up to the last bits (BLAS may round differently)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return a == b


_loaded = {}


def load(assignment_id: str, path: Path = None) -> dict:
    """The shipped fingerprints of an assignment ({} when the file is absent)."""
    path = path or path_of(assignment_id)
    if path not in _loaded:
        _loaded[path] = json.loads(path.read_text()) if path.is_file() else {}
    return _loaded[path]


# ---------------------------------------------------------------------------- matching


def evidence(fingerprints: dict, step_id: str, records: list, tol: dict) -> dict:
    """{mistake id: (the message id of its strongest variant, the failing checks it reproduces)}
    for the known mistakes that the fingerprints say explain the step's records, by
    diagnosis.variant_evidence's rule: a variant that fails no check the student passes (a
    variant absent from a check's fingerprints passes it) and reproduces at least one failure."""
    step = fingerprints.get("steps", {}).get(step_id)
    if not step:
        return {}
    variants = {}  # variant -> {check key: its fingerprint}
    for check_key, groups in step["checks"].items():
        for group in groups:
            for variant in group["variants"]:
                variants.setdefault(variant, {})[check_key] = group["fp"]
    found = {}
    for variant, fps in variants.items():
        reproduced, also_failing = set(), set()
        for record in records:
            if record.fail is not None and says_nothing(record.fail, record.check):
                continue
            fp = fps.get(key(record.check, record.inputs))
            if fp is None:  # the variant passes this check
                continue
            if record.fail is None:  # the variant fails a check the student passes
                reproduced = None
                break
            also_failing.add(record.check.id)
            if observation_matches(record.observation, fp, tol):
                reproduced.add(record.check.id)
        evidence_of_variant = None if reproduced is None else Evidence(reproduced, also_failing)
        found.setdefault(variant.split("#")[0], []).append((variant, evidence_of_variant))
    says = step.get("says", {})
    explained = {}
    for mistake_id in step["order"]:
        variants = sorted(found.get(mistake_id, ()), key=lambda item: int(item[0].split("#")[1]))
        strongest = best_variant(reproduced for _, reproduced in variants)
        if strongest:
            variant = variants[strongest[0]][0]
            explained[mistake_id] = (says.get(variant, mistake_id), strongest[1])
    return explained


def shipped_ids(fingerprints: dict) -> set:
    """Every mistake id that the fingerprints can name."""
    return {mistake_id for step in fingerprints.get("steps", {}).values() for mistake_id in step["order"]}
