"""The smaller inputs of the smallest-example search, stored for a student release.

The student's own run shrinks a failing public check's inputs to the smallest that still fails
(engine/judge/shrink.py, example.smallest_example), judging each candidate against the check's
expectation. A student release holds no oracle, so it can judge only the candidates whose
expectation it stores. This module runs the search the way the student's run does, for every
variant of every known mistake (mistakes/, on the first public check of its step that it fails:
the fingerprints say which), and keeps the expectation of every candidate the search asked for,
by its inputs' digest (engine/checks/stored.py): a student whose code fails the same way
follows the same path and gets the same smallest example as the instructor's kit shows; other
code gets the smallest among the stored candidates on its path.

The search runs the whole module tens of times per mistake (about a minute), so its result is a
generated file of the kit, autograder/assignments/<id>/examples.wire (`python -m autograder
generate`), with the digest of its sources; `release` adds it to the release's answers.wire
where it is up to date, and says so where it is not (examples then stop at the check's inputs).
"""

import copy
import hashlib

import torch

from autograder import KIT
from autograder.engine.checks import stored
from autograder.engine.checks.check import judged
from autograder.engine.checks.folders import folder
from autograder.engine.judge import example
from autograder.engine.judge.in_process import clone, observe
from autograder.engine.judge.plan import check_inputs, check_seed
from autograder.engine.mistakes import fingerprints
from autograder.engine.mistakes.evidence import says_nothing
from autograder.harness import answers

FILE = "examples.wire"
BANK_CHUNK = 40  # stored inputs per message: each message stays far within the wire's bounds
GRADER = KIT / "autograder"


def path_of(assignment_id: str):
    return folder(assignment_id) / FILE


def sources_digest(assignment_id: str) -> str:
    """A digest of what the stored examples are made from: the fingerprints' sources, the
    observers, the search and the digest of inputs, and the torch that computed them."""
    here = folder(assignment_id)
    files = [
        GRADER / "engine" / "judge" / "shrink.py",
        GRADER / "engine" / "judge" / "example.py",
        GRADER / "engine" / "judge" / "shown_values.py",
        GRADER / "engine" / "checks" / "stored.py",
        GRADER / "sandbox" / "wire.py",
        GRADER / "engine" / "generate" / "examples_build.py",
        *sorted((here / "observers").glob("*.py")),
    ]
    text = fingerprints.sources_digest(assignment_id) + torch.__version__.split("+")[0]
    text += "".join(f"{path.name}\n{path.read_text()}" for path in files)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def generate(config) -> dict:
    """{"sources": digest, "<check key>#bank<n>": [[inputs digest, expectation], ...]}."""
    entries = {"sources": sources_digest(config.id)}
    for key, found in banks(config).items():
        items = sorted(found.items())
        for number in range(0, len(items), BANK_CHUNK):
            entries[f"{key}#bank{number // BANK_CHUNK}"] = [list(item) for item in items[number : number + BANK_CHUNK]]
    return entries


def load(assignment_id: str) -> dict:
    path = path_of(assignment_id)
    return answers.loads(path.read_bytes()) if path.is_file() else {}


def write(data: dict, path) -> None:
    path.write_bytes(answers.dumps(data))


def fresh(assignment_id: str) -> bool:
    return load(assignment_id).get("sources") == sources_digest(assignment_id)


def bank(config) -> dict:
    """The stored examples of `config` for its release ({} where the file is stale: said once)."""
    data = load(config.id)
    if data.get("sources") != sources_digest(config.id):
        print(f"note: {path_of(config.id).relative_to(KIT)} is out of date (run `python -m autograder generate`):")
        print("      the release's smallest examples stop at each check's own inputs")
        return {}
    return {key: value for key, value in data.items() if key != "sources"}


def same(a, b) -> bool:
    """Equal stored examples, floats equal up to the last bits (BLAS may round differently)."""
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and (
                torch.equal(a, b)
                if not a.is_floating_point()
                else bool(torch.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True))
            )
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return a == b


def banks(config) -> dict:
    """{check key: {inputs digest: expectation}} of the smaller inputs the smallest-example
    search tries for the known mistakes (module docstring). Which public checks each variant
    fails, the assignment's fingerprints say (fingerprint_build.py observed them all)."""
    found = {}
    modules = config.step_modules()
    for step in config.steps:
        failing = failing_checks(config.id, step.id)
        # what example.shrinkable lets the student's run search: public, on no device, with inputs
        checks = [c for c in modules[step.id].CHECKS if c.visibility == "public" and not c.requires]
        checks = [c for c in checks if check_inputs(c, check_seed(c))]
        for mistake in config.mistakes_of(step.id):
            for number, package in enumerate(mistake.packages()):
                for check in checks:
                    if f"{mistake.id}#{number}" not in failing.get(check.id, ()):
                        continue
                    inputs = check_inputs(check, check_seed(check))
                    torch.manual_seed(0)  # a check in train() mode draws from the global generator
                    observation = observe(check, package, inputs)
                    expected = check.expected(**clone(inputs))
                    fail = observation.error or judged(check, inputs, observation.values, expected, step.tolerance)
                    if fail is None or says_nothing(fail, check) or fail.params.get("blocked_by"):
                        continue  # as example.shrinkable: nothing the search would show
                    if getattr(check, "shrink", True):
                        _record_search(check, inputs, fail, package, step.tolerance, observation, found)
                    break  # the student's run searches the first failing check of a step (first_example)
    return found


def failing_checks(assignment_id: str, step_id: str) -> dict:
    """{check id: the mistake variants ("<id>#<n>") that fail it}, from the fingerprints."""
    checks = fingerprints.load(assignment_id).get("steps", {}).get(step_id, {}).get("checks", {})
    return {key: {v for group in groups for v in group["variants"]} for key, groups in checks.items()}


def _record_search(check, inputs, fail, package, tol, observation, found):
    """Run the smallest-example search for `package` on `check`, keeping every expectation the
    search asked for (the check's oracle, on each candidate it tried)."""
    bank = found.setdefault(stored.key_of(check), {})
    oracle = check.expected

    def recording(**candidate):
        value = oracle(**candidate)
        bank[stored.digest(candidate)] = copy.deepcopy(value)
        return value

    check.expected = recording  # the instance's: the search calls check.expected
    try:
        run = lambda candidate: observe(check, package, candidate)  # noqa: E731
        # no time guard: what the search tries is decided by its runs alone, whatever the machine's load
        example.smallest_example(check, inputs, fail, run, tol, observation=observation, seconds=float("inf"))
    finally:
        del check.expected
