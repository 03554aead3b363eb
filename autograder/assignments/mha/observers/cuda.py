"""Observers of step `cuda`: the student's code run on the CPU and on a CUDA device ('real', a GPU,
or 'simulated': autograder/harness/fake_cuda.py), the same scenario both times, and what came out
where.

The modules are the student's own, with their own initial weights (drawn after
seeding, observe.seed_generators); nothing of the grader is loaded into them. One module is built, and each
run gets its own copy, so both runs start from the same weights and the same random state: a
correct module computes the same on both devices, right or wrong as its values may be (other steps
judge those). What is left to see is the device: whether the code runs there, keeps its tensors
there and agrees with its own CPU run.
"""

import copy

import torch

from autograder.assignments.mha.observers.multi_head_attention import with_earlier_steps
from autograder.harness.contract import ContractError
from autograder.harness.fake_cuda import Simulation, is_data_dependent, is_device_mismatch
from autograder.harness.observe import seed_generators, where, where_text


class Place:
    """Where a scenario runs: 'cpu', 'real' (a CUDA GPU) or 'simulated' (the simulated cuda:0)."""

    def __init__(self, kind):
        self.kind = kind
        self.simulation = Simulation.shared() if kind == "simulated" else None
        self.device = {"cpu": "cpu", "real": "cuda"}.get(kind) or self.simulation.device

    def tensor(self, value):
        return self.simulation.tensor(value) if self.simulation else value.to(self.device)

    def module(self, module, move_plain_tensors=False):
        if self.simulation:
            return self.simulation.module(module, move_plain_tensors)
        module = module.to(self.device)
        if move_plain_tensors:
            for sub in module.modules():
                for name, value in list(vars(sub).items()):
                    if isinstance(value, torch.Tensor):
                        object.__setattr__(sub, name, value.to(self.device))
        return module

    def values(self, value):
        """A result's values as a CPU tensor (None where the device has none: fake tensors on 'meta')."""
        if self.simulation:
            return self.simulation.cpu_values(value)
        return value.detach().cpu()

    def __enter__(self):
        if self.simulation:
            self.simulation.__enter__()
        return self

    def __exit__(self, *exc):
        if self.simulation:
            return self.simulation.__exit__(*exc)
        return False


# ---------------------------------------------------------------------------- scenarios
# Each: build(mha) -> {name: module} (on the CPU, or None: nothing to build), then
# run(mha, place, modules, gradients, **inputs) with the modules and tensor inputs already on the
# place -> {name: result}. `gradients`: also backward, where the device can (a real GPU).


def _build_module(mha):
    return {"mha": mha.mha.MultiHeadAttention(12, 3, dropout=0.1, causal=True).double().eval()}


def _run_module(mha, place, modules, gradients, query, pad_mask):
    module = modules["mha"]
    outputs = {"eval": module(query, pad_mask=pad_mask)}
    if gradients:
        outputs["eval"].sum().backward()
        grads = [p.grad.flatten() for p in module.parameters() if p.grad is not None]
        outputs["gradients"] = torch.cat(grads) if grads else None
    module.train()
    outputs["train"] = module(query, pad_mask=pad_mask)
    return outputs


def _build_embedding(mha):
    return {"embedding": mha.embedding.TokenEmbedding(11, 6, pad_id=0).double()}


def _run_embedding(mha, place, modules, gradients, ids):
    return {"vectors": modules["embedding"](ids)}


def _build_output(mha):
    return {"projection": mha.output.OutputProjection(12).double()}


def _run_output(mha, place, modules, gradients, heads):
    return {"out": modules["projection"](heads)}


def _run_masks(mha, place, modules, gradients, ids):
    return {
        "causal_mask": mha.masking.causal_mask(4, device=place.device),
        "padding_mask": mha.masking.padding_mask(ids),
    }


def _run_attention(mha, place, modules, gradients, q, k, v, mask):
    out, weights = mha.attention.scaled_dot_product_attention(q, k, v, mask=mask)
    return {"out": out, "weights": weights}


SCENARIOS = {
    "multi_head_attention": (_build_module, _run_module),
    "embedding": (_build_embedding, _run_embedding),
    "output_projection": (_build_output, _run_output),
    "masks": (None, _run_masks),
    "attention": (None, _run_attention),
}


def built_twice(scenario, mha, seed):
    """Two copies of the scenario's modules, built on the CPU after seed_generators(seed): a deep
    copy, or where the student's module cannot be copied, a second build from the same seed."""
    make = SCENARIOS[scenario][0]
    if make is None:
        return {}, {}
    seed_generators(seed)
    first = make(mha)
    try:
        return first, copy.deepcopy(first)
    except Exception:  # noqa: BLE001 - student modules may hold what deepcopy refuses
        seed_generators(seed)
        return first, make(mha)


def run_scenario(scenario, mha, kind, inputs, modules, seed, gradients=False, move_plain_tensors=False):
    """The scenario on `kind` with `modules` (built on the CPU): the modules and tensor inputs are
    moved there, then run after seed_generators(seed). Returns (place, {name: result})."""
    run = SCENARIOS[scenario][1]
    place = Place(kind)
    moved = {name: place.module(module, move_plain_tensors) for name, module in modules.items()}
    placed = {name: place.tensor(value) if isinstance(value, torch.Tensor) else value for name, value in inputs.items()}
    seed_generators(seed)
    with place:
        return place, run(mha, place, moved, gradients, **placed)


def _is_lazy(module):
    """Whether `module` still has parameters or buffers without a shape (nn.LazyLinear before its
    first call): a device copy of those has none to move."""
    tensors = list(module.parameters()) + list(module.buffers())
    return any(torch.nn.parameter.is_lazy(t) for t in tensors) if isinstance(module, torch.nn.Module) else False


def _modes(module):
    """The train/eval flag of every submodule, in order."""
    return [sub.training for sub in module.modules()]


def _materialized(ran, lazy):
    """Copies of the modules in `lazy` ({name: their flags before the run}) as the CPU run left them
    (their lazy layers shaped and filled), with those flags back and no gradients. A module that
    cannot be copied keeps its unrun copy."""
    copies = {}
    for name, modes in lazy.items():
        try:
            module = copy.deepcopy(ran[name])
        except Exception:  # noqa: BLE001 - student modules may hold what deepcopy refuses
            continue
        for sub, training in zip(module.modules(), modes, strict=False):
            sub.training = training
        for parameter in module.parameters():
            parameter.grad = None
        copies[name] = module
    return copies


def _attempt(*args, **kwargs):
    """run_scenario's (place, outputs, None), or (None, None, the exception it raised)."""
    try:
        place, outputs = run_scenario(*args, **kwargs)
        return place, outputs, None
    except Exception as error:  # noqa: BLE001 - student code; sorted by on_device
        return None, None, error


def _same_failure(cpu_error, device_error, mha):
    """Both runs stopped with the same exception at the same line of the student's code: the device
    changed nothing there. (A TODO left, or a failure of the grader's contract, is no such case.)"""
    if isinstance(device_error, (NotImplementedError, ContractError)):
        return False
    place = where(device_error, mha)
    return type(cpu_error) is type(device_error) and place is not None and where(cpu_error, mha) == place


def _described(name, value, cpu_value, place):
    if not isinstance(value, torch.Tensor) or not isinstance(cpu_value, torch.Tensor):
        return {"device": None, "type": type(value).__name__, "cpu_type": type(cpu_value).__name__}
    return {
        "device": str(value.device),
        "shape": tuple(value.shape),
        "cpu_shape": tuple(cpu_value.shape),
        "cpu_values": cpu_value.detach(),
        "device_values": place.values(value),
    }


def on_device(mha, mode, scenario, seed=0, **inputs):
    """The scenario on the CPU and on the graded device, with copies of the same module:
    {"mode", "outputs": {name: {"device", "shape", "cpu_shape", "cpu_values", "device_values"} (or
    {"device": None, "type", "cpu_type"} for a result that is not a tensor)}}, or instead of
    outputs "failed_on_both" and "where" (both runs raised the same exception at the same place:
    nothing shows that the code runs on the device),
    "failed_on_cpu_only" (the CPU run raised, the device run did not) or
    "stopped_at_data_dependent_op" (fake tensors without values met .item() and the like).
    A device mismatch is a ContractError that says where."""
    for_cpu, for_device = built_twice(scenario, mha, seed)
    gradients = mode == "real"
    lazy = {name: _modes(module) for name, module in for_cpu.items() if _is_lazy(module)}
    _, cpu, cpu_error = _attempt(scenario, mha, "cpu", inputs, for_cpu, seed, gradients)
    if lazy and cpu_error is None:
        # Lazy layers (nn.LazyLinear) take their shapes in their first call, drawing their weights
        # from the seeded generator: both runs again from copies shaped by that call, so they
        # draw the same dropout masks.
        for_cpu, for_device = (
            {**for_cpu, **_materialized(for_cpu, lazy)},
            {**for_device, **_materialized(for_cpu, lazy)},
        )
        _, cpu, cpu_error = _attempt(scenario, mha, "cpu", inputs, for_cpu, seed, gradients)
    place, seen, error = _attempt(scenario, mha, mode, inputs, for_device, seed, gradients)
    if error is not None:
        if is_data_dependent(error):  # the 'meta' fallback only: .item() needs values
            return {"mode": mode, "stopped_at_data_dependent_op": True, "outputs": {}}
        if is_device_mismatch(error):
            raise ContractError(
                "device_mismatch",
                device=Place(mode).device,
                where=where_text(error, mha),
                detail=str(error).splitlines()[0][:160],
            ) from None
        if cpu_error is not None and _same_failure(cpu_error, error, mha):
            return {
                "mode": mode,
                "failed_on_both": _said(error),
                "type": type(error).__name__,
                "where": where_text(error, mha),
                "outputs": {},
            }
        raise error
    if cpu_error is not None:
        return {"mode": mode, "failed_on_cpu_only": _said(cpu_error), "outputs": {}}
    outputs = {name: _described(name, value, cpu.get(name), place) for name, value in seen.items()}
    return {"mode": mode, "outputs": outputs}


def on_device_with_earlier_steps(mha, mode, scenario, seed=0, **inputs):
    """on_device(), and where an earlier step's function is wrong on its probe, the scenario again
    with it written out (harness/earlier.py, as the module step does): an exception both devices
    raise because of an earlier step's function is that step's to charge, and the device is
    judged on the run without it (one mistake, one charge)."""
    return with_earlier_steps(mha, lambda: on_device(mha, mode, scenario, seed, **inputs))


def _said(error) -> str:
    """ "TypeError: the first line of its message" (at most 200 characters)."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"[:200]


def plain_tensor_attributes(module):
    """'name' of every tensor a module keeps outside _parameters/_buffers (.to() leaves those)."""
    return [
        f"{prefix + '.' if prefix else ''}{name}"
        for prefix, sub in module.named_modules()
        for name, value in vars(sub).items()
        if isinstance(value, torch.Tensor)
    ]


def plain_tensors(mha):
    """{"attributes"}: tensors the modules keep as plain attributes."""
    found = []
    for module in (
        mha.mha.MultiHeadAttention(12, 3, causal=True),
        mha.embedding.TokenEmbedding(11, 6),
        mha.output.OutputProjection(12),
    ):
        found += [f"{type(module).__name__}.{name}" for name in plain_tensor_attributes(module)]
    return {"attributes": found}


def mismatch_with_tensors_moved(mha, seed=0, **inputs):
    """{"mismatch": where a device mismatch still happens with every tensor attribute moved, or None}."""
    kind = "real" if torch.cuda.is_available() else "simulated"
    modules, _ = built_twice("multi_head_attention", mha, seed)
    try:
        run_scenario("multi_head_attention", mha, kind, inputs, modules, seed, move_plain_tensors=True)
    except Exception as error:  # noqa: BLE001 - student code: only a device mismatch answers the question
        if is_device_mismatch(error):
            return {"mismatch": where_text(error, mha) or "?"}
        if is_data_dependent(error):
            return {"mismatch": None}
        raise
    return {"mismatch": None}
