"""What is particular to the kv_cache assignment (the contract every assignment keeps, reference,
skeleton, mistake model, diagnosis and messages, is tests/test_assignment_contract.py):

* its mistake model keeps steps apart: a known mistake fails no step but its own, the
  integration step and those it declares;
* its probe names a decoder that sees the future;
* mistakes written as students write them are caught by their step and diagnosed;
* its warm-up exercises what its checks use.

Observe, expectation and judge are the engine's own functions, called check by check.
"""

from pathlib import Path

import pytest
import torch

from autograder.engine.course.assignment import mistakes_of, step_modules
from autograder.engine.judge.in_process import observe
from autograder.engine.judge.plan import check_inputs, check_seed
from autograder.engine.judge.verdict import expectation, judge
from autograder.harness.package import Package

KIT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "kv_cache"
TOL = {torch.float64: (1.0e-7, 1.0e-9), torch.float32: (1.0e-4, 1.0e-5)}  # grading.yml's defaults
SEEDS = (0, 1, 2)  # hidden checks draw their sizes from the grading seed
INTEGRATION = {step for step, module in step_modules(ASSIGNMENT).items() if getattr(module, "INTEGRATES", False)}


def load(root, name):
    """root/kv_cache importable as the package `name`, read lazily as the engine reads a submission."""
    return Package.load(root, ASSIGNMENT, name)


@pytest.fixture(scope="module")
def reference():
    return load(KIT / "solutions", "kv_cache_reference")


def all_checks():
    return [(step, check) for step, module in step_modules(ASSIGNMENT).items() for check in module.CHECKS]


def all_variants():
    return [
        (step, mistake, i)
        for step in step_modules(ASSIGNMENT)
        for mistake in mistakes_of(ASSIGNMENT, step)
        for i in range(len(mistake.variants))
    ]


def verdict(check, package, reference, seed=None):
    """None if `package` passes `check`, else its Fail: observe, expectation, judge."""
    inputs = check_inputs(check, check_seed(check, seed))
    expected = expectation(check, inputs, reference)
    return judge(check, inputs, observe(check, package, inputs), expected, TOL)


def failing(package, reference, steps=None, seeds=SEEDS):
    """{(step, check id)} that `package` fails on any of `seeds`."""
    return {
        (step, check.id)
        for step, check in all_checks()
        if steps is None or step in steps
        for seed in (seeds if check.visibility == "hidden" else (None,))
        if verdict(check, package, reference, seed) is not None
    }


_mistake_failures = {}


def mistake_failures(knobs, reference):
    """failing() of the mistake model with `knobs` on one grading seed, computed once per session
    (two tests use it); the other seeds are the slow test_mistake_verdict_does_not_depend_on_the_seed."""
    from autograder.assignments.kv_cache.mistakes.model import package

    key = repr(sorted(knobs.items()))
    if key not in _mistake_failures:
        _mistake_failures[key] = failing(package(**knobs), reference, seeds=SEEDS[:1])
    return _mistake_failures[key]


@pytest.mark.parametrize(
    "step,mistake,variant", all_variants(), ids=lambda v: getattr(v, "id", v) if not isinstance(v, int) else f"v{v}"
)
def test_every_mistake_fails_its_own_step_only(reference, step, mistake, variant):
    fails = mistake_failures(mistake.variants[variant], reference)
    assert any(s == step for s, _ in fails), f"{mistake.id} {mistake.variants[variant]} passes step {step}"
    allowed = {step} | INTEGRATION | set(mistake.also_breaks)
    assert {s for s, _ in fails} <= allowed, f"{mistake.id} also fails {sorted({s for s, _ in fails} - allowed)}"


def test_probe_names_a_decoder_that_sees_the_future(reference):
    from autograder.assignments.kv_cache.mistakes.model import package

    (probe,) = [p for p in step_modules(ASSIGNMENT)["incremental_decoding"].PROBES if not getattr(p, "localise", False)]

    def diagnosed(pkg):
        inputs = check_inputs(probe, 0)
        observation = observe(probe, pkg, inputs)
        return observation.error or probe.judge(inputs, observation.values, None, TOL)

    assert diagnosed(reference) is None
    assert diagnosed(package(offset="zero")) is None  # too blind, not too far-sighted
    for knobs in ({"decode_mask": "none"}, {"offset": "plus_one"}):
        assert diagnosed(package(**knobs)).message_id == "decode_sees_future", knobs


def test_the_probes_message_takes_its_parameter():
    import gettext

    folder = KIT / "autograder" / "assignments" / ASSIGNMENT / "locale" / "ko" / "LC_MESSAGES"
    with open(folder / "assignment.mo", "rb") as f:
        ko = gettext.GNUTranslations(f)._catalog
    assert ko["diagnosis.decode_sees_future"].format(change=0.5)  # the probe's parameter


# Mistakes written as students write them: (step, mistake id, file, [(old, new)]), each `old`
# occurring once in the reference file. The model (mistakes/model.py) must recognise real code.
PLANTED = [
    (
        "kv_cache",
        "cache_wrong_dim",
        "cache.py",
        [("[self.k, k], dim=2", "[self.k, k], dim=1"), ("[self.v, v], dim=2", "[self.v, v], dim=1")],
    ),
    ("kv_cache", "cache_prepends", "cache.py", [("[self.k, k]", "[k, self.k]"), ("[self.v, v]", "[v, self.v]")]),
    ("kv_cache", "cache_len_wrong_axis", "cache.py", [("self.k.size(2)", "self.k.size(1)")]),
    (
        "kv_cache",
        "cache_reset_keeps",
        "cache.py",
        [("        self.k = None\n        self.v = None\n", "        pass\n")],
    ),
    ("incremental_decoding", "decode_positions_restart", "decode.py", [("diagonal=offset + 1", "diagonal=1")]),
    ("incremental_decoding", "decode_offset_off_by_one", "decode.py", [("diagonal=offset + 1", "diagonal=offset")]),
    ("incremental_decoding", "decode_no_scale", "decode.py", [(" / math.sqrt(q.size(-1))  # (B, H, L_new, L)", "")]),
    (
        "incremental_decoding",
        "decode_mask_ignores_device",
        "decode.py",
        [("dtype=torch.bool, device=device)  # (L_new, L)", "dtype=torch.bool)  # (L_new, L)")],
    ),
    (
        "incremental_decoding",
        "decode_ignores_cache",
        "decode.py",
        [("K, V = cache.update(k, v)", "cache.update(k, v)\n    K, V = k, v")],
    ),
    (
        "grouped_query_attention",
        "kv_heads_tiled",
        "gqa.py",
        [("x.repeat_interleave(n_rep, dim=1)", "x.repeat(1, n_rep, 1, 1)")],
    ),
    (
        "grouped_query_attention",
        "gqa_no_error_when_not_divisible",
        "gqa.py",
        [("    if H % H_kv != 0:\n        raise", "    if False:\n        raise")],
    ),
    (
        "decoder",
        "decoder_heads_merged_without_transpose",
        "decoder.py",
        [("out.transpose(1, 2).contiguous()", "out.contiguous()")],
    ),
    (
        "decoder",
        "decoder_positions_restart",
        "decoder.py",
        [
            (
                "offset_causal_mask(L, k.size(2), device=x.device)",
                "offset_causal_mask(k.size(2), k.size(2), device=x.device)[:L]",
            )
        ],
    ),
    ("decoder", "decoder_ignores_cache", "decoder.py", [("k, v = cache.update(k, v)", "pass")]),
    (
        "decoder",
        "decoder_caches_repeated_heads",
        "decoder.py",
        [
            (
                "k, v = cache.update(k, v)",
                "n_rep = self.n_heads // self.n_kv_heads\n"
                "            k, v = cache.update(k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1))",
            )
        ],
    ),
    # the kv heads never repeated for the query heads (an error where H != H_kv)
    (
        "grouped_query_attention",
        "gqa_kv_not_repeated",
        "gqa.py",
        [("return x.repeat_interleave(n_rep, dim=1)  # (B, H_kv * n_rep, L, d)", "return x  # (B, H_kv, L, d)")],
    ),
    # the values so far taken from the key cache (a copy-paste slip)
    (
        "kv_cache",
        "cache_values_from_keys",
        "cache.py",
        [("torch.cat([self.v, v], dim=2)", "torch.cat([self.k[..., : -k.size(2), :], v], dim=2)")],
    ),
    (
        "decoder",
        "decoder_kv_viewed_as_query_heads",
        "decoder.py",
        [
            ("self.w_k(x).view(B, L, self.n_kv_heads, self.d_k)", "self.w_k(x).view(B, L, self.n_heads, self.d_k)"),
            ("self.w_v(x).view(B, L, self.n_kv_heads, self.d_k)", "self.w_v(x).view(B, L, self.n_heads, self.d_k)"),
        ],
    ),
    (
        "decoder",
        "decoder_mask_skipped_with_cache",
        "decoder.py",
        [
            (
                "blocked = offset_causal_mask(L, k.size(2), device=x.device)",
                "blocked = None if cache is not None else offset_causal_mask(L, k.size(2), device=x.device)",
            )
        ],
    ),
]


@pytest.mark.parametrize("step,mistake_id,file,patches", PLANTED, ids=[p[1] for p in PLANTED])
def test_planted_mistake_fails_its_step_and_is_diagnosed(reference, tmp_path, step, mistake_id, file, patches):
    import shutil

    from autograder.engine.mistakes.diagnosis import Record, best, most_specific, variant_evidence

    shutil.copytree(KIT / "solutions" / ASSIGNMENT, tmp_path / ASSIGNMENT)
    target = tmp_path / ASSIGNMENT / file
    source = target.read_text()
    for old, new in patches:
        assert source.count(old) == 1, (file, old)
        source = source.replace(old, new)
    target.write_text(source)
    student = load(tmp_path, "kv_cache_planted")
    fails = failing(student, reference, seeds=SEEDS[:1])
    assert any(s == step for s, _ in fails), f"{mistake_id}: step {step} passes"
    assert {s for s, _ in fails} <= {step} | INTEGRATION, fails
    records = []
    for check in step_modules(ASSIGNMENT)[step].CHECKS:
        seed = check_seed(check, 0)
        inputs = check_inputs(check, seed)
        expected = expectation(check, inputs, reference)
        observation = observe(check, student, inputs)
        records.append(
            Record(check, inputs, observation, judge(check, inputs, observation, expected, TOL), seed, expected)
        )
    explained = {
        m.id: best(variant_evidence(pkg, records, lambda c, p, i: observe(c, p, i), TOL) for pkg in m.packages())
        for m in mistakes_of(ASSIGNMENT, step)
    }
    assert mistake_id in most_specific(explained), {k: v for k, v in explained.items() if v}


def test_warm_up_runs():
    from autograder.assignments.kv_cache.warmup import _exercise, warm_up

    warm_up()
    assert torch.isfinite(_exercise(torch.randn(2, 3, 8, dtype=torch.float64), torch.nn.Linear(8, 8).double()))
