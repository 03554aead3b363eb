"""Explain a failing step: which known mistake, or which behaviour, produced the student's output.

Two sources of evidence, neither of which changes a score:

* Known mistakes (autograder/assignments/<id>/mistakes/<step>.py): each is one or more settings of a model of
  the computation (mistakes/model.py) with one specific error in it. A mistake is reported when
  one of its variants reproduces the student's observation on at least one failing check and
  fails no check that the student passes; its evidence is the set of failures its best variant
  reproduces, and that variant's message names it. A wrong name is worse than none, so of the
  mistakes that fit, one whose evidence is a strict subset of another's is left out (the more
  specific explanation wins), two with the same evidence are both left out (it cannot tell
  them apart), and the rest are said strongest first (the most failures reproduced exactly).
  Where the instructor grades, the variants run on the checks' inputs (hidden ones included).
  In the student release they cannot (the model is a reference): the release ships, per public
  check, fingerprints of what each variant observes (autograder/engine/mistakes/fingerprints.py), and the
  student's observations are compared with those. Same rule, same diagnoses on public checks.
* Probes (Check subclasses with a `diagnosis` id): behavioural tests of the student's code that
  need no reference, e.g. "a projection receives no gradient". Where a probe and a mistake share
  an id, the probe decides: two mistakes can fail with the same output (the same device error,
  say) while a probe can still tell them apart. A probe that finds something may void other
  diagnoses (its `voids`): a module whose output changes from call to call makes every probe
  that compares two calls meaningless.

When neither finds anything, the diagnosis says so and repeats the closest evidence.
"""

import threading
from dataclasses import dataclass

from autograder.engine.checks import messages
from autograder.engine.checks.check import Fail, compare, judged
from autograder.engine.checks.text import printable
from autograder.engine.course.assignment import mistakes_of
from autograder.engine.mistakes import said, store
from autograder.engine.mistakes.evidence import (
    Evidence,
    best_variant,
    compared,
    most_specific,
    says_nothing,
    without_where,
)
from autograder.engine.mistakes.fingerprints import evidence as fingerprint_evidence
from autograder.engine.mistakes.fingerprints import load as load_fingerprints


@dataclass
class Record:
    """One check's run: what went in, what came out, and how it was judged."""

    check: object
    inputs: dict
    observation: object  # observation.Observation
    fail: Fail = None
    seed: int = None  # the seed the inputs were made from; None: they may differ between runs
    expected: object = None  # what a correct solution observes (None where it was not needed)


def diagnose(module, records, observe, student, tol, reference=None, fingerprints=None):
    """[{"id", "message"}] for a step with failing checks ([] if none failed), the strongest first:
    known mistakes (a probe's that decides one, then those that reproduce the student's output), then
    what probes found that is no known mistake (a symptom: "rows do not sum to 1", marked
    `"symptom": True`), which a route shows after the cause it supports (feedback.explanation says the
    first one first) and the class report counts as no misconception of its own beside a cause.

    `observe(check, package, inputs)` runs a check's student half on a package and returns an
    Observation; `student` is the student's package, or None when `observe` sends student code to
    a worker itself. With `reference` (the instructor's kit) the known mistakes run on the
    records' inputs; without, they are matched through `fingerprints` (default: the ones
    shipped in the assignment's fingerprints.json, if any)."""
    failing = [r for r in records if r.fail is not None and not says_nothing(r.fail, r.check)]
    if not failing:
        return []
    step_id, assignment_id = module.__name__.rsplit(".", 1)[-1], module.ASSIGNMENT
    found, voided = [], set()
    probes = getattr(module, "PROBES", [])
    for probe in probes:
        if getattr(probe, "localise", False):
            continue
        inputs = probe.inputs(_generator(probe))
        observation = observe(probe, student, inputs)
        if observation.error is None:
            fail = judged(probe, inputs, observation.values, None, tol)
            if fail is not None and fail.message_id != "unreadable_observation":
                found.append(entry(probe.diagnosis, **fail.params))
                voided |= set(getattr(probe, "voids", ()))
    found = [e for e in found if e["id"] not in voided]
    probed = {probe.diagnosis for probe in getattr(module, "PROBES", [])} | voided
    if reference is not None:
        explained = {}
        for m in mistakes_of(assignment_id, step_id):
            strongest = m.id not in probed and best_variant(
                variant_evidence(package, records, observe, tol) for package in m.packages()
            )
            if strongest:
                explained[m.id] = (m.message_id(strongest[0]), strongest[1])
    else:
        shipped = fingerprints if fingerprints is not None else load_fingerprints(assignment_id)
        explained = {i: e for i, e in fingerprint_evidence(shipped, step_id, records, tol).items() if i not in probed}
    known = {m.id for m in mistakes_of(assignment_id, step_id)} if reference is not None else set(explained)
    if reference is None:
        known |= set(shipped.get("steps", {}).get(step_id, {}).get("order", ()))
    symptoms = [{**e, "symptom": True} for e in found if e["id"] not in known]  # said in support: no cause
    localised = store.first_finding(
        [p for p in probes if getattr(p, "localise", False)],
        lambda probe, inputs: _values(observe(probe, student, inputs)),
        assignment_id,
        step_id,
        tol,
    )
    if localised is not None:  # a known mistake refines the finding, never contradicts it
        stored = store.mistake_findings(assignment_id, step_id)
        explained = {i: e for i, e in explained.items() if refines(i, localised, stored)}
    named = most_specific({i: reproduced for i, (_, reproduced) in explained.items()})
    found = [e for e in found if e["id"] in known] + [entry(i, says=explained[i][0]) for i in named]
    if localised is not None and not found:  # a known mistake recognised where it happens: the
        # finding still says what the student's code did there (what follows may differ)
        found = [entry(i) for i in observed(localised[1], stored, probed)]
    if localised is not None:  # after the known mistakes that refine it (the route may show only those)
        _, finding, scenario = localised
        told = {"id": said.diagnosis_id(finding), "message": printable(said.say(finding, scenario))}
        # beside a cause (a known mistake, however found) it is said in support: no misconception
        # of its own in the class report; a route hides it behind a known mistake that refines it
        found.append({**told, **({"refined_by": named} if named else {}), **({"symptom": True} if found else {})})
    found += symptoms
    if not found:
        closest = next((r.fail for r in failing if r.observation.error is None), failing[0].fail)
        found.append(entry("no_known_mistake", evidence=messages.render(closest.message_id, **closest.params)))
    return found


def _values(observation):
    return observation.values if observation.error is None else None


def refines(mistake_id, localised, stored) -> bool:
    """Whether a known mistake agrees with the student's finding: one of its variants' first
    finding is on the same probe, at the same stage and call, and, where the student's code ran
    on, by the same relation (of any parameter: a mistake is one model with a parameter, a
    softmax over the batch axis is a softmax over the wrong axis as one over the queries is).
    Where the student's code raised, the stage and call agree: what it never computed
    contradicts nothing (state kept from before makes one program raise and another compute
    wrong values). A finding of the stage only (no relation fits: an einsum's heads in a layout
    of their own) is too weak to contradict a mistake that reproduces the student's outputs.
    A less specific relation that the mistake's own values there show as well agrees (a transpose
    left out of the split is a layout of the heads, though what follows it differs). The same
    relation one stage earlier or later agrees too, and so does the same misfit (the same
    operation on the same odd shape) where both raised: the same mistake at a neighbouring place
    (a scale applied to the query before the product, not to the scores after it; a mask applied
    to the exponentials, not to the scores; a view of the transposed heads written on the line
    that merges them or on the one that projects them)."""
    probe, finding, scenario = localised
    if finding.family is None and not finding.raised:
        return True
    for key, theirs in stored.items():
        if key.split("#")[0] != mistake_id or theirs is None:
            continue
        their_probe, their = theirs
        if their_probe != probe or their.call != finding.call:
            continue
        if their.stage != finding.stage:
            if not neighbours(scenario, finding.call, their.stage, finding.stage):
                continue
            if finding.raised or their.raised:  # the same misfit: the same operation on the same odd shape
                if not (finding.raised and their.raised and _misfit(finding) == _misfit(their) is not None):
                    continue
                return True
            if their.family != finding.family:
                continue
        if finding.raised:  # the student's run stopped there: what it did not compute contradicts nothing
            return True
        if their.raised or finding.family not in (their.family, *their.also):
            continue  # the mistake's own values there show another relation: a contradiction
        return True
    return False


def _misfit(finding):
    """(operation, the odd shape, the shape it stands for) of a finding where the code raised, or
    None where it names no misfit."""
    raised = dict(finding.raised or ())
    if not all(raised.get(key) for key in ("op", "odd", "wanted")):
        return None
    return raised["op"], _axes(raised["odd"]), _axes(raised["wanted"])


def neighbours(scenario, call: int, a: str, b: str) -> bool:
    """Whether stage `a` is computed directly from `b` or `b` from `a` in the scenario's call."""
    if scenario is None or call >= len(scenario.calls):
        return False
    parents = {stage.name: set(stage.parents) for stage in scenario.calls[call]}
    return b in parents.get(a, ()) or a in parents.get(b, ())


def observed(finding, stored, excluded=()) -> list:
    """[the one known mistake whose own first finding is the student's], or []: a model matches
    an observation, not a spelling. Where the student's code first leaves the reference, it
    does what the mistake does there (the same stage and call, the same relation with the same
    parameters; or, where both raise, the same misfit shape where the same one fits), though
    what follows may differ (a reset that keeps the length but clears the values; an additive
    mask where the model fills). A finding that names no relation nor misfit says too little;
    two mistakes that match say nothing."""
    mine = _observation(finding)
    if mine is None:
        return []
    matching = {
        key.split("#")[0]
        for key, theirs in stored.items()
        if theirs is not None and key.split("#")[0] not in excluded and _observation(theirs[1]) == mine
    }
    return sorted(matching) if len(matching) == 1 else []


def _observation(finding):
    """What a finding observes, spelling aside: (stage, call, the relation) or, where the code
    raised, (stage, call, the shape that fits nowhere and the last axes of the one it stands for,
    leading axes of size 1 aside: a (1, 1, L_new, L_new) mask where (B, H, L_new, L) fits is an
    (L_new, L_new) one where (L_new, L) fits); None where it says neither."""
    if finding.raised:
        raised = dict(finding.raised)
        if "odd" not in raised or "wanted" not in raised:
            return None
        odd, wanted = _axes(raised["odd"]), _full_axes(raised["wanted"])
        if _lacks_broadcast_axes(odd, wanted):  # one model, how many size-1 axes are missing its parameter
            return finding.stage, finding.call, "raised", "without broadcast axes"
        return finding.stage, finding.call, "raised", odd, wanted[-len(odd) :]
    if finding.family is None or (finding.family == "masked_only" and not finding.params):
        return None  # different where blocked, with no one fill there: says too little to name a mistake
    return finding.stage, finding.call, finding.family, finding.params


def _lacks_broadcast_axes(odd: tuple, wanted: tuple) -> bool:
    """Whether `odd` is `wanted` with some of its size-1 axes left out: a (B, L) or a (B, L, L)
    mask where (B, 1, 1, L) or (B, 1, L, L) fits (a tensor not unsqueezed for what it meets)."""

    def fits(i: int, j: int) -> bool:  # odd[i:] is wanted[j:] with some "1" axes left out
        if i == len(odd):
            return all(axis == "1" for axis in wanted[j:])
        if j == len(wanted):
            return False
        return (odd[i] == wanted[j] and fits(i + 1, j + 1)) or (wanted[j] == "1" and fits(i, j + 1))

    return len(odd) < len(wanted) and fits(0, 0)


def _full_axes(shape: str) -> tuple:
    return tuple(a.strip() for a in shape.strip("()").split(","))


def _axes(shape: str) -> tuple:
    """ "(1, 1, L_new, L)" as ("L_new", "L"): leading axes of size 1 broadcast away."""
    axes = [a.strip() for a in shape.strip("()").split(",")]
    while len(axes) > 1 and axes[0] == "1":
        axes.pop(0)
    return tuple(axes)


def variant_evidence(package, records, observe, tol):
    """The Evidence of the mistake variant `package` on a step's records, or None if it fails a
    check the student passes. Failures that say nothing about the computation are left out."""
    reproduced, also_failing = set(), set()
    for record in records:
        if record.fail is not None and says_nothing(record.fail, record.check):
            continue
        observation = mistake_observation(observe, package, record)
        fails = mistake_fails(package, record, observation, tol)
        if record.fail is None:
            if fails:
                return None
        elif fails:
            also_failing.add(record.check.id)
            if same_observation(record.observation, observation, tol, record.check):
                reproduced.add(record.check.id)
    return Evidence(reproduced, also_failing)


def best(evidences):
    """The largest reproduced set among the consistent variants (None: no variant explains)."""
    strongest = best_variant(evidences)
    return strongest[1] if strongest else None


_mistake_observations = {}
_lock = threading.RLock()


def mistake_observation(observe, package, record):
    """What the mistake `package` (kept for the process) observes on the record's inputs: run
    once per check and seed, since every failing submission of a batch (one seed) asks the same
    question."""
    import torch

    def run():
        torch.manual_seed(0)  # a check in train() mode draws from the global generator
        return observe(record.check, package, record.inputs)

    if record.seed is None:
        with _lock:
            return run()
    key = (id(package), record.check.step, record.check.id, record.seed, record.inputs.get("mode"))
    with _lock:  # mistake packages are shared by the threads of a batch
        if key not in _mistake_observations:
            if len(_mistake_observations) > 20_000:  # many seeds in one process (the kit's tests)
                _mistake_observations.clear()
            _mistake_observations[key] = run()
        return _mistake_observations[key]


_mistake_verdicts = {}


def mistake_fails(package, record, observation, tol):
    """Whether the mistake's `observation` fails the record's check: judged once per check and
    seed, as its observation is (the same inputs, expectation and tolerance for every failing
    submission of a batch)."""

    def verdict():
        return (
            observation.error is not None
            or judged(record.check, record.inputs, observation.values, record.expected, tol) is not None
        )

    if record.seed is None:
        return verdict()
    key = (id(package), record.check.step, record.check.id, record.seed, record.inputs.get("mode"))
    with _lock:
        known = _mistake_verdicts.get(key)
        # The expectation and tolerance are held, so that their ids cannot be reused meanwhile.
        if known is None or known[0] is not observation or known[1] is not record.expected or known[2] is not tol:
            if len(_mistake_verdicts) > 20_000:
                _mistake_verdicts.clear()
            known = _mistake_verdicts[key] = (observation, record.expected, tol, verdict())
        return known[3]


def entry(diagnosis_id, says=None, **params):
    """A diagnosis: its id, and its message (`diagnosis.<says>`: a variant's own words, where it has
    them), printable (its parameters can hold what student code made)."""
    message = messages.render(f"diagnosis.{says or diagnosis_id}", **params)
    return {"id": diagnosis_id, "message": printable(message)}


def same_observation(student, mistake, tol, check=None):
    """True if a mistake's observation of `check` reproduces the student's: equal values, or the
    same error (one that says something about the computation)."""
    if student.error is None and mistake.error is None:
        try:
            theirs, ours = compared(student.values), compared(mistake.values)
            # both ways: compare() lets anything stand where its expectation is not finite, and
            # a mistake's NaN rows must not pass for a student's numbers
            return compare(theirs, ours, tol) is None and compare(ours, theirs, tol) is None
        except Exception:  # noqa: BLE001 - values the student's code made: unreadable is no match
            return False
    if student.error is not None and mistake.error is not None:
        return (
            student.error.message_id == mistake.error.message_id
            and not says_nothing(student.error, check)
            and without_where(student.error.params) == without_where(mistake.error.params)
        )
    return False


def _generator(probe):
    import torch

    return torch.Generator().manual_seed(len(probe.diagnosis))


def public_message_ids(config) -> set:
    """The diagnosis ids (`diagnosis.<id>` in the catalog, without the prefix) that a student's
    run of the public checks of `config`'s steps can give: the mistakes the shipped fingerprints
    name for those steps, the probes' diagnoses and no_known_mistake. The release's catalogs keep
    these and drop every other diagnosis: their text would describe what the hidden checks look
    for. The one place that decides what the release's messages carry."""
    shipped = load_fingerprints(config.id).get("steps", {})
    modules = config.step_modules()
    keep = {"no_known_mistake"}
    for step in config.steps:
        keep |= set(shipped.get(step.id, {}).get("order", ()))
        keep |= set(shipped.get(step.id, {}).get("says", {}).values())
        keep |= {probe.diagnosis for probe in modules[step.id].PROBES}
    return keep
