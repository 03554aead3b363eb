"""What the rest of the computation does not see (engine/mistakes/cancelled.py), found by trying
differences on the assignment's pipeline: each claim holds for differences it was not found with,
and a difference it does not claim changes the outputs."""

import pytest
import torch

from autograder.assignments.mha.mistakes import stages as pipeline
from autograder.engine.course.assignment import step_modules
from autograder.engine.generate.stage_build import localisers
from autograder.engine.mistakes import store

PROBES = localisers(step_modules("mha")["multi_head_attention"])


def run_with(probe):
    inputs = {**store.probe_inputs(probe), **probe.arguments}
    names = ("states", "query", "key", "value", "pad_mask", "causal", "p", "num_heads")
    defaults = {"p": 0.0, "num_heads": 3}
    arguments = [inputs[n] if n in inputs else defaults[n] for n in names]

    def run(perturb):
        stages, out = pipeline.module(*arguments, perturb=perturb)
        return stages[-1].value if out is None else out

    return run


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: type(p).__name__)
def test_each_claim_holds_for_other_differences_and_only_those(probe):
    scenario = pipeline.scenario(
        "multi_head_attention", store.probe_key(probe), {**store.probe_inputs(probe), **probe.arguments}
    )
    run = run_with(probe)
    base = run({})
    generator = torch.Generator().manual_seed(12345)
    claimed = 0
    for stage in scenario.calls[0]:
        shape = stage.value.shape
        for axes in stage.cancels:
            claimed += 1
            size = [n if a in axes else 1 for a, n in enumerate(shape)]
            d = 3 * torch.randn(size, generator=generator, dtype=torch.float64).to(stage.value.dtype)
            assert torch.allclose(run({stage.name: lambda x, d=d: x + d}), base, rtol=1e-5, atol=1e-7), (
                stage.name,
                axes,
            )
        if stage.moves:
            claimed += 1
            changed = run({stage.name: lambda x: x * -0.37, stage.moves: lambda x: x / -0.37})
            assert torch.allclose(changed, base, rtol=1e-5, atol=1e-7), stage.name
        if stage.cancels:  # not every difference: one along every axis is seen
            d = torch.randn(shape, generator=generator, dtype=torch.float64).to(stage.value.dtype)
            assert not torch.allclose(run({stage.name: lambda x, d=d: x + d}), base, rtol=1e-5, atol=1e-7), stage.name
    assert claimed >= 4  # the key's bias, the scores' shift, the queries' and keys' factor at least
