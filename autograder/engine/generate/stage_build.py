"""Making an assignment's stages.json (`python -m autograder generate`): for every localisation
probe of every step, the reference's stages on the probe's inputs (the assignment's
mistakes/stages.py), and every known mistake's first finding on those probes. A build tool:
grading only reads the file (engine/mistakes/localise.py).
"""

import importlib

import torch

from autograder.engine.checks.folders import PACKAGE
from autograder.engine.judge.in_process import observe
from autograder.engine.mistakes import store
from autograder.engine.mistakes.localise import localise
from autograder.engine.mistakes.scenario import Scenario


def localisers(module) -> list:
    """The step's localisation probes, in order."""
    return [probe for probe in module.PROBES if getattr(probe, "localise", False)]


def generate(config) -> dict:
    """{"version", "sources", "steps": {step: {"probes", "mistakes"}}} for `config` (an Assignment)."""
    try:
        pipeline = importlib.import_module(f"{PACKAGE}.{config.id}.mistakes.stages")
    except ModuleNotFoundError:
        return {}
    steps = {}
    for step in config.steps:
        probes = localisers(config.step_modules()[step.id])
        if not probes:
            continue
        scenarios = {}
        for probe in probes:
            key = store.probe_key(probe)
            scenarios[key] = pipeline.scenario(step.id, key, {**store.probe_inputs(probe), **probe.arguments})
            scenarios[key].assignment = config.id
        stored = {key: scenario.to_json() for key, scenario in scenarios.items()}
        read_back = {key: Scenario.from_json(data) for key, data in stored.items()}
        mistakes = {}
        for mistake in config.mistakes_of(step.id):
            mistakes.update(mistake_findings(config.id, mistake, probes, read_back, step))
        steps[step.id] = {"probes": stored, "mistakes": mistakes}
    if not steps:
        return {}
    return {"version": store.VERSION, "sources": store.sources_digest(config.id), "steps": steps}


def mistake_findings(assignment_id, mistake, probes, scenarios, step) -> dict:
    """{"<id>#<variant>": first_finding} of a known mistake's variants, each as grading sees a
    student's code: on its model package made anew (not Mistake.packages(), made once per
    process, whose state would be what ran before in the process) and run on the probes once
    before (a student's code has run the step's checks before its probes: a cache kept in its
    class already holds their keys)."""
    model = importlib.import_module(f"{PACKAGE}.{assignment_id}.mistakes.model")
    found = {}
    for number, variant in enumerate(mistake.variants):
        package = model.package(**variant)
        first_finding(probes, package, scenarios, step)  # the run before
        found[f"{mistake.id}#{number}"] = first_finding(probes, package, scenarios, step)
    return found


def first_finding(probes, package, scenarios, step):
    """[probe, Finding JSON] of the package's first finding on the probes (as grading finds it), or None."""
    for probe in probes:
        key = store.probe_key(probe)
        torch.manual_seed(0)
        observation = observe(probe, package, store.probe_inputs(probe))
        if observation.error is not None:
            continue
        with store.one_thread():
            finding = localise(store.report_of(observation.values), scenarios[key], step.tolerance)
        if finding is not None:
            return [key, finding.to_json()]
    return None
