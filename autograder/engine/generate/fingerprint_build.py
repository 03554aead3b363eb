"""Making an assignment's fingerprints.json (`python -m autograder fingerprints`): every variant of
every known mistake, observed through the runner on every public check it fails. A build tool:
grading only reads the file and matches against it (fingerprints.py).
"""

import json

import torch

from autograder.engine.checks.check import judged
from autograder.engine.judge.in_process import clone, observe
from autograder.engine.judge.plan import check_inputs, check_seed
from autograder.engine.mistakes.fingerprints import VERSION, key, observation_fingerprint, sources_digest


def generate(config) -> dict:
    """Every variant of every known mistake of `config` (an Assignment), on every public check
    it fails: fingerprinted."""
    steps = {}
    for step in config.steps:
        checks = [c for c in config.step_modules()[step.id].CHECKS if c.visibility == "public"]
        table, order, says = {}, [], {}
        for check in checks:
            inputs = check_inputs(check, check_seed(check))
            if check.requires == "cuda":
                inputs["mode"] = "simulated"  # what a student without a GPU runs with --cuda
            expected = check.expected(**clone(inputs))
            groups = {}
            for mistake in config.mistakes_of(step.id):
                for number, package in enumerate(mistake.packages()):
                    torch.manual_seed(0)  # a check in train() mode draws from the global generator
                    observation = observe(check, package, inputs)
                    failed = (
                        observation.error is not None
                        or judged(check, inputs, observation.values, expected, step.tolerance) is not None
                    )
                    if not failed:
                        continue
                    fp = observation_fingerprint(observation)
                    groups.setdefault(json.dumps(fp, sort_keys=True), (fp, []))[1].append(f"{mistake.id}#{number}")
                    if mistake.id not in order:
                        order.append(mistake.id)
                    if mistake.message_id(number) != mistake.id:  # a variant with its own words
                        says[f"{mistake.id}#{number}"] = mistake.message_id(number)
            if groups:
                table[key(check, inputs)] = [{"variants": variants, "fp": fp} for fp, variants in groups.values()]
        if table:
            steps[step.id] = {"order": order, "checks": table, **({"says": says} if says else {})}
    return {"version": VERSION, "sources": sources_digest(config.id), "steps": steps}
