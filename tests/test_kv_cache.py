"""The kv_cache assignment, in-process, without the engine's runner: its reference passes every
check, its skeleton raises NotImplementedError everywhere, the mistake model is the reference
at its defaults, and every known mistake fails a check of its own step (and of no other step
but the integration step `decoder` and those it declares).

Observe, expectation and judge are the engine's own functions, called check by check.
"""

import sys
import types
from pathlib import Path

import pytest
import torch

from autograder.engine.assignment import mistakes_of, step_modules
from autograder.engine.runner import check_inputs, check_seed, expectation, judge, observe
from autograder.engine.skeleton import solution_regions, write_skeletons
from autograder.harness.package import Package

KIT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "kv_cache"
FOLDER = KIT / "autograder" / "assignments" / ASSIGNMENT
TOL = {torch.float64: (1.0e-7, 1.0e-9), torch.float32: (1.0e-4, 1.0e-5)}  # grading.yml's defaults
SEEDS = (0, 1, 2)  # hidden checks draw their sizes from the grading seed
INTEGRATION = {"decoder"}  # the step that runs everything, by design
STEPS = ("kv_cache", "incremental_decoding", "grouped_query_attention", "decoder")


def load(root, name):
    """root/kv_cache importable as the package `name`, read lazily as the engine reads a submission."""
    directory = (Path(root) / ASSIGNMENT).resolve()
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[loaded]
    module = types.ModuleType(name)
    module.__path__ = [str(directory)]
    module.__file__ = str(directory / "__init__.py")
    sys.modules[name] = module
    return Package(module, directory)


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


def test_the_steps_are_the_grading_entry_s():
    from autograder.engine import config as grading_config

    entry = grading_config.load(assignment=ASSIGNMENT)
    assert [step.id for step in entry.steps] == list(STEPS)
    assert sorted(step_modules(ASSIGNMENT)) == sorted(STEPS)
    for step, module in step_modules(ASSIGNMENT).items():
        assert module.FILES and all((KIT / "solutions" / ASSIGNMENT / f).is_file() for f in module.FILES), step
        assert any(c.visibility == "hidden" for c in module.CHECKS), f"{step} has no hidden check"


@pytest.mark.parametrize("seed", SEEDS)
def test_reference_passes_every_check(reference, seed):
    fails = {f"{step}::{check.id}": verdict(check, reference, reference, seed) for step, check in all_checks()}
    assert {k: v for k, v in fails.items() if v is not None} == {}


def test_skeleton_says_not_implemented_in_every_check(reference):
    skeleton = load(KIT / "assignments", "kv_cache_skeleton")
    for step, check in all_checks():
        fail = verdict(check, skeleton, reference, seed=0)
        assert fail is not None and fail.message_id == "not_implemented", (step, check.id, fail)


def test_skeleton_is_up_to_date_and_leaks_no_solution():
    assert write_skeletons(KIT / "solutions" / ASSIGNMENT, KIT / "assignments" / ASSIGNMENT, dry_run=True) == []
    for source in (KIT / "solutions" / ASSIGNMENT).glob("*.py"):
        skeleton = (KIT / "assignments" / ASSIGNMENT / source.name).read_text()
        for region in solution_regions(source.read_text()):
            for line in region.splitlines():
                if line.strip() and not line.strip().startswith("#"):
                    assert line not in skeleton, f"{source.name}: {line.strip()!r} leaked"


def test_mistake_model_at_its_defaults_passes_every_check(reference):
    from autograder.assignments.kv_cache.mistakes.model import package

    assert failing(package(), reference) == set()


@pytest.mark.parametrize(
    "step,mistake,variant", all_variants(), ids=lambda v: getattr(v, "id", v) if not isinstance(v, int) else f"v{v}"
)
def test_every_mistake_fails_its_own_step_only(reference, step, mistake, variant):
    fails = mistake_failures(mistake.variants[variant], reference)
    assert any(s == step for s, _ in fails), f"{mistake.id} {mistake.variants[variant]} passes step {step}"
    allowed = {step} | INTEGRATION | set(mistake.also_breaks)
    assert {s for s, _ in fails} <= allowed, f"{mistake.id} also fails {sorted({s for s, _ in fails} - allowed)}"


@pytest.mark.slow  # every variant on two more seeds; CI runs it
@pytest.mark.parametrize(
    "step,mistake,variant", all_variants(), ids=lambda v: getattr(v, "id", v) if not isinstance(v, int) else f"v{v}"
)
def test_mistake_verdict_does_not_depend_on_the_seed(reference, step, mistake, variant):
    """A random draw of a hidden check must not let a mistake through on some seeds only."""
    from autograder.assignments.kv_cache.mistakes.model import package

    first = mistake_failures(mistake.variants[variant], reference)
    for seed in SEEDS[1:]:
        assert failing(package(**mistake.variants[variant]), reference, seeds=(seed,)) == first, seed


def test_every_check_fails_on_some_mistake(reference):
    """A check that no known mistake makes fail measures nothing (or a mistake is missing)."""
    caught = set()
    for step, mistake, variant in all_variants():
        caught |= mistake_failures(mistake.variants[variant], reference)
    assert {(step, check.id) for step, check in all_checks()} - caught == set()


def test_probe_names_a_decoder_that_sees_the_future(reference):
    from autograder.assignments.kv_cache.mistakes.model import package

    (probe,) = step_modules(ASSIGNMENT)["incremental_decoding"].PROBES

    def diagnosed(pkg):
        inputs = check_inputs(probe, 0)
        observation = observe(probe, pkg, inputs)
        return observation.error or probe.judge(inputs, observation.values, None, TOL)

    assert diagnosed(reference) is None
    assert diagnosed(package(offset="zero")) is None  # too blind, not too far-sighted
    for knobs in ({"decode_mask": "none"}, {"offset": "plus_one"}):
        assert diagnosed(package(**knobs)).message_id == "decode_sees_future", knobs


@pytest.mark.parametrize(
    "step,mistake", [(s, m) for s in STEPS for m in mistakes_of(ASSIGNMENT, s)], ids=lambda v: getattr(v, "id", v)
)
def test_the_diagnosis_rule_names_each_mistake(reference, step, mistake):
    """A submission that makes the mistake (its first variant) is explained by it, by the engine's
    own rule (reproduce a failure, fail nothing the submission passes, the most specific wins)."""
    from autograder.assignments.kv_cache.mistakes.model import package
    from autograder.engine.diagnosis import Record, best, most_specific, variant_evidence

    student = package(**mistake.variants[0])
    module = step_modules(ASSIGNMENT)[step]
    records = []
    for check in module.CHECKS:
        seed = check_seed(check, 0)
        inputs = check_inputs(check, seed)
        expected = expectation(check, inputs, reference)
        observation = observe(check, student, inputs)
        records.append(
            Record(check, inputs, observation, judge(check, inputs, observation, expected, TOL), seed, expected)
        )

    def run(check, pkg, inputs):
        return observe(check, pkg, inputs)

    explained = {
        m.id: best(variant_evidence(pkg, records, run, TOL) for pkg in m.packages())
        for m in mistakes_of(ASSIGNMENT, step)
    }
    assert mistake.id in most_specific(explained), {k: v for k, v in explained.items() if v}


def catalog(lang):
    import gettext

    with open(FOLDER / "locale" / lang / "LC_MESSAGES" / "assignment.mo", "rb") as f:
        return gettext.GNUTranslations(f)._catalog


def placeholders(text):
    import string

    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_diagnosis_has_a_message_in_english_and_korean():
    wanted = {f"diagnosis.{m.id}" for s in STEPS for m in mistakes_of(ASSIGNMENT, s)}
    wanted |= {f"diagnosis.{p.diagnosis}" for module in step_modules(ASSIGNMENT).values() for p in module.PROBES}
    en, ko = catalog("en"), catalog("ko")
    assert wanted <= set(en) and wanted <= set(ko), sorted(wanted - (set(en) & set(ko)))
    for msgid in set(en) - {""}:
        assert en[msgid] and ko.get(msgid), msgid
        assert placeholders(en[msgid]) == placeholders(ko[msgid]), msgid
        assert any("\uac00" <= c <= "\ud7a3" for c in ko[msgid]), f"{msgid}: no Hangul in the Korean text"
    assert ko["diagnosis.decode_sees_future"].format(change=0.5)  # the probe's parameter


def test_compiled_catalogs_match_the_po_files():
    pofile = pytest.importorskip("babel.messages.pofile")
    for lang in ("en", "ko"):
        with open(FOLDER / "locale" / lang / "LC_MESSAGES" / "assignment.po", "rb") as f:
            po = {m.id: m.string for m in pofile.read_po(f) if m.id}
        assert po == {k: v for k, v in catalog(lang).items() if k}, f"{lang}: run pybabel compile"


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
]


@pytest.mark.parametrize("step,mistake_id,file,patches", PLANTED, ids=[p[1] for p in PLANTED])
def test_planted_mistake_fails_its_step_and_is_diagnosed(reference, tmp_path, step, mistake_id, file, patches):
    import shutil
    from autograder.engine.diagnosis import Record, best, most_specific, variant_evidence

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
