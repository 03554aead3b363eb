"""The contract every assignment of grading.yml keeps, in-process, without the engine's runner:

* its step modules are the steps grading.yml lists, each grading files of the reference and
  (where it runs on the CPU) holding a hidden check;
* its reference passes every check; its skeleton is up to date, leaks no solution line and raises
  NotImplementedError in every check;
* its mistake model at its defaults is the reference; every known mistake fails a check of its own
  step, whatever seed the hidden checks draw; every check fails on some known mistake; the engine's
  diagnosis rule names each mistake;
* every message of its catalog has English and Korean texts with the same placeholders, and every
  diagnosis it can give has one.

Observe, expectation and judge are the engine's own functions, called check by check. The
assignments and their steps come from grading.yml: a new assignment is tested here as it lands.
"""

import gettext
import importlib
import string

import pytest

from autograder.engine.course import config as grading_config
from autograder.engine.course.assignment import folder, mistakes_of, step_modules, warm_up
from autograder.engine.generate.skeleton import solution_regions, write_skeletons
from autograder.engine.judge.in_process import observe
from autograder.engine.judge.plan import check_inputs, check_seed
from autograder.engine.judge.verdict import expectation, judge
from autograder.harness.package import Package
from conftest import ASSIGNMENTS, SOLUTIONS

# Every planted mistake or model variant graded end to end: minutes. CI runs them (pytest -m "").
pytestmark = pytest.mark.slow

SEEDS = (0, 1, 2)  # hidden checks draw their sizes from the grading seed
ENTRIES = {entry.id: entry for entry in grading_config.load_all()}
# The mistake model run on every check of every step, per variant, takes minutes for an assignment
# with as many variants as mha: its matrix tests run with the slow tests there (CI runs them).
FULL_MATRIX_IS_SLOW = 60  # variants


def variants_of(assignment_id):
    return [
        (step, mistake, number)
        for step in step_modules(assignment_id)
        for mistake in mistakes_of(assignment_id, step)
        for number in range(len(mistake.variants))
    ]


def by_assignment(marks_when_many=False):
    """The assignments of grading.yml as parameters; with `marks_when_many`, those whose mistake
    model is large are marked slow."""
    return [
        pytest.param(
            a,
            id=a,
            marks=[pytest.mark.slow] if marks_when_many and len(variants_of(a)) > FULL_MATRIX_IS_SLOW else [],
        )
        for a in ENTRIES
    ]


def integration_steps(assignment_id):
    """The steps that run the student's whole module by design (their checks module says INTEGRATES)."""
    return {step for step, module in step_modules(assignment_id).items() if getattr(module, "INTEGRATES", False)}


def load(root, assignment_id, name):
    """root/<assignment> importable as the package `name`, read lazily as the engine reads a submission."""
    return Package.load(root, assignment_id, name)


_references = {}


def reference_of(assignment_id):
    if assignment_id not in _references:
        _references[assignment_id] = load(SOLUTIONS, assignment_id, f"{assignment_id}_contract_reference")
    return _references[assignment_id]


def model_of(assignment_id):
    return importlib.import_module(f"autograder.assignments.{assignment_id}.mistakes.model")


def all_checks(assignment_id):
    return [(step, check) for step, module in step_modules(assignment_id).items() for check in module.CHECKS]


def inputs_of(check, seed):
    inputs = check_inputs(check, check_seed(check, seed))
    if check.requires == "cuda":
        inputs["mode"] = "simulated"  # the device the kit simulates where there is no GPU
    return inputs


def verdict(assignment_id, step, check, package, seed=None):
    """None if `package` passes `check`, else its Fail: observe, expectation, judge."""
    inputs = inputs_of(check, seed)
    expected = expectation(check, inputs, reference_of(assignment_id))
    tolerance = ENTRIES[assignment_id].step(step).tolerance
    return judge(check, inputs, observe(check, package, inputs), expected, tolerance)


def failing(assignment_id, package, steps=None, seeds=SEEDS, hidden_only=False):
    """{(step, check id)} that `package` fails on any of `seeds`."""
    return {
        (step, check.id)
        for step, check in all_checks(assignment_id)
        if (steps is None or step in steps) and (not hidden_only or check.visibility == "hidden")
        for seed in (seeds if check.visibility == "hidden" else (None,))
        if verdict(assignment_id, step, check, package, seed) is not None
    }


_mistake_failures = {}


def mistake_failures(assignment_id, knobs, steps=None):
    """failing() of the mistake model with `knobs` on one grading seed, computed once per session
    (several tests use it); the other seeds are the slow test_mistake_verdict_does_not_depend_on_the_seed."""
    key = assignment_id, repr(sorted(knobs.items())), None if steps is None else tuple(sorted(steps))
    if key not in _mistake_failures:
        package = model_of(assignment_id).package(**knobs)
        _mistake_failures[key] = failing(assignment_id, package, steps=steps, seeds=SEEDS[:1])
    return _mistake_failures[key]


def every_variant():
    return [
        pytest.param(a, step, mistake, number, id=f"{a}-{mistake.id}-v{number}")
        for a in ENTRIES
        for step, mistake, number in variants_of(a)
    ]


def every_mistake(marks_when_many=False):
    return [
        pytest.param(
            a,
            step,
            mistake,
            id=f"{a}-{mistake.id}",
            marks=[pytest.mark.slow] if marks_when_many and len(variants_of(a)) > FULL_MATRIX_IS_SLOW else [],
        )
        for a in ENTRIES
        for step in step_modules(a)
        for mistake in mistakes_of(a, step)
    ]


# ---------------------------------------------------------------------------- steps and files


@pytest.mark.parametrize("assignment", by_assignment())
def test_the_steps_are_the_grading_entrys(assignment):
    steps = [step.id for step in ENTRIES[assignment].steps]
    assert sorted(step_modules(assignment)) == sorted(steps)
    for step, module in step_modules(assignment).items():
        assert all((SOLUTIONS / assignment / f).is_file() for f in module.FILES), step
        if all(check.requires is None for check in module.CHECKS):  # a device step has no CPU draw to hide
            assert module.FILES, f"{step} grades no file"
            assert any(c.visibility == "hidden" for c in module.CHECKS), f"{step} has no hidden check"


@pytest.mark.parametrize("assignment", by_assignment())
def test_every_graded_file_has_a_todo_region(assignment):
    files = {name for module in step_modules(assignment).values() for name in module.FILES}
    assert files
    for name in sorted(files):
        assert solution_regions((SOLUTIONS / assignment / name).read_text()), name


# ---------------------------------------------------------------------------- reference and skeleton


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("assignment", by_assignment())
def test_reference_passes_every_check(assignment, seed):
    reference = reference_of(assignment)
    fails = {
        f"{step}::{check.id}": verdict(assignment, step, check, reference, seed)
        for step, check in all_checks(assignment)
    }
    assert {k: v for k, v in fails.items() if v is not None} == {}


@pytest.mark.parametrize("assignment", by_assignment())
def test_skeleton_says_not_implemented_in_every_check(assignment):
    skeleton = load(ASSIGNMENTS, assignment, f"{assignment}_contract_skeleton")
    for step, check in all_checks(assignment):
        fail = verdict(assignment, step, check, skeleton, seed=0)
        assert fail is not None and fail.message_id == "not_implemented", (step, check.id, fail)


@pytest.mark.parametrize("assignment", by_assignment())
def test_skeleton_is_up_to_date_and_leaks_no_solution(assignment):
    stale = write_skeletons(SOLUTIONS / assignment, ASSIGNMENTS / assignment, dry_run=True)
    assert stale == [], "run `python -m autograder skeleton` and commit assignments/"
    for source in (SOLUTIONS / assignment).glob("*.py"):
        skeleton = (ASSIGNMENTS / assignment / source.name).read_text()
        for region in solution_regions(source.read_text()):
            for line in region.splitlines():
                if line.strip() and not line.strip().startswith("#"):
                    assert line not in skeleton, f"{source.name}: {line.strip()!r} leaked"


@pytest.mark.parametrize("assignment", by_assignment())
def test_warm_up_runs(assignment):
    warm_up(assignment)


# ---------------------------------------------------------------------------- the mistake model


@pytest.mark.parametrize("assignment", by_assignment())
def test_mistake_model_at_its_defaults_passes_every_check(assignment):
    """A mistake is a change from the model; unchanged, the model must be the reference."""
    assert failing(assignment, model_of(assignment).package()) == set()


@pytest.mark.parametrize("assignment,step,mistake,variant", every_variant())
def test_every_mistake_fails_a_check_of_its_own_step(assignment, step, mistake, variant):
    """A variant that passes every check of its step could never be named there."""
    fails = mistake_failures(assignment, mistake.variants[variant], steps={step})
    assert fails, f"{mistake.id} {mistake.variants[variant]} passes step {step}"


@pytest.mark.slow  # every variant's hidden checks on two more seeds; CI runs it
@pytest.mark.parametrize("assignment,step,mistake,variant", every_variant())
def test_mistake_verdict_does_not_depend_on_the_seed(assignment, step, mistake, variant):
    """A random draw of a hidden check must not let a mistake through on some seeds only (public
    checks draw from fixed seeds: only the hidden ones can differ)."""
    package = model_of(assignment).package(**mistake.variants[variant])
    first = failing(assignment, package, seeds=SEEDS[:1], hidden_only=True)
    for seed in SEEDS[1:]:
        assert failing(assignment, package, seeds=(seed,), hidden_only=True) == first, seed


@pytest.mark.parametrize("assignment", by_assignment(marks_when_many=True))
def test_every_check_fails_on_some_mistake(assignment):
    """A check that no known mistake makes fail measures nothing (or a mistake is missing)."""
    caught = set()
    for _, mistake, variant in variants_of(assignment):
        caught |= mistake_failures(assignment, mistake.variants[variant])
    assert {(step, check.id) for step, check in all_checks(assignment)} - caught == set()


@pytest.mark.parametrize("assignment,step,mistake", every_mistake(marks_when_many=True))
def test_the_diagnosis_rule_names_each_mistake(assignment, step, mistake):
    """A submission that makes the mistake (its first variant) is explained by it, by the engine's
    own rule (reproduce a failure, fail nothing the submission passes, the most specific wins)."""
    from autograder.engine.mistakes.diagnosis import Record, best, most_specific, variant_evidence

    module = step_modules(assignment)[step]
    if any(probe.diagnosis == mistake.id for probe in module.PROBES):
        pytest.skip(f"{mistake.id} is named by a probe (the whole pipeline: tests/test_mistakes.py)")
    if any(getattr(check, "requires", None) == "cuda" for check in module.CHECKS):
        pytest.skip(f"{mistake.id} is judged on a device (the whole pipeline: tests/test_mistakes.py)")
    reference = reference_of(assignment)
    tolerance = ENTRIES[assignment].step(step).tolerance
    student = model_of(assignment).package(**mistake.variants[0])
    records = []
    for check in step_modules(assignment)[step].CHECKS:
        seed = check_seed(check, 0)
        inputs = inputs_of(check, 0)
        expected = expectation(check, inputs, reference)
        observation = observe(check, student, inputs)
        fail = judge(check, inputs, observation, expected, tolerance)
        records.append(Record(check, inputs, observation, fail, seed, expected))

    def run(check, package, inputs):
        return observe(check, package, inputs)

    explained = {
        m.id: best(variant_evidence(package, records, run, tolerance) for package in m.packages())
        for m in mistakes_of(assignment, step)
    }
    assert mistake.id in most_specific(explained), {k: v for k, v in explained.items() if v}


# ---------------------------------------------------------------------------- messages


def catalog(assignment_id, lang):
    with open(folder(assignment_id) / "locale" / lang / "LC_MESSAGES" / "assignment.mo", "rb") as f:
        return gettext.GNUTranslations(f)._catalog


def placeholders(text):
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("assignment", by_assignment())
def test_every_diagnosis_has_a_message_in_english_and_korean(assignment):
    steps = step_modules(assignment)
    wanted = {f"diagnosis.{m.id}" for s in steps for m in mistakes_of(assignment, s)}
    # a localisation probe's finding is said from the engine's catalog (mistakes/said.py), not the assignment's
    wanted |= {
        f"diagnosis.{p.diagnosis}"
        for module in steps.values()
        for p in module.PROBES
        if not getattr(p, "localise", False)
    }
    en, ko = catalog(assignment, "en"), catalog(assignment, "ko")
    assert wanted <= set(en) and wanted <= set(ko), sorted(wanted - (set(en) & set(ko)))
    for msgid in set(en) - {""}:
        assert en[msgid] and ko.get(msgid), msgid
        assert placeholders(en[msgid]) == placeholders(ko[msgid]), msgid
        assert any("\uac00" <= c <= "\ud7a3" for c in ko[msgid]), f"{msgid}: no Hangul in the Korean text"
