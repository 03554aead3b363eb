"""Localise, then name (engine/mistakes/localise.py, store.py, said.py), through the real student code path: the
student's package on the localisation probes, recorded by the harness (harness/trace.py), against
the stored stages (stages.json).

* correct code, however it is written (tests/variants.py), leaves the reference nowhere;
* mistakes generated as relations applied at each stage of the reference's own module (the heads
  permuted, the scores scaled, the weights transposed, ...) are found at that stage, by that
  relation; two relations applied at once name none (a wrong name is worse than none);
* every planted mistake of a localised step (tests/planted.py, written in source) is found where
  the hand-written model of its known mistake is: the model and the code are one observation;
* the stored stages are those the pipeline makes.
"""

import shutil

import pytest
import torch

from autograder.engine.course.assignment import step_modules
from autograder.engine.judge.in_process import observe
from autograder.engine.mistakes import localise, relations, store
from autograder.engine.mistakes.scenario import Scenario
from autograder.harness.package import Package
from conftest import SOLUTIONS
from planted import PLANTED
from variants import VARIANTS

TOL = {torch.float64: (1e-7, 1e-9), torch.float32: (1e-4, 1e-5)}
LOCALISED_STEPS = {
    (assignment, step)
    for assignment in ("mha", "kv_cache")
    for step, module in step_modules(assignment).items()
    if any(getattr(p, "localise", False) for p in module.PROBES)
}


def finding(package, assignment="mha", step="multi_head_attention"):
    """(probe, Finding) of the package's first finding on the step's localisation probes, or None."""
    probes = [p for p in step_modules(assignment)[step].PROBES if getattr(p, "localise", False)]

    def run(probe, inputs):
        observation = observe(probe, package, inputs)
        return observation.values if observation.error is None else None

    found = store.first_finding(probes, run, assignment, step, TOL)
    return None if found is None else (found[0], found[1])


def package_with(tmp_path, files, assignment="mha"):
    """The reference package with `files` ({name: patch function or source}) changed."""
    root = tmp_path / "submission"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(SOLUTIONS / assignment, root / assignment)
    for name, change in files.items():
        target = root / assignment / name
        target.write_text(change(target.read_text()) if callable(change) else change)
    return Package.load(root, assignment)


def test_the_reference_leaves_the_reference_nowhere():
    for assignment, step in LOCALISED_STEPS:
        assert finding(Package.load(SOLUTIONS, assignment), assignment, step) is None, step


@pytest.mark.slow  # some fifty rewrites, a second or two each: CI runs them (pytest -m "")
@pytest.mark.parametrize(
    "variant",
    [v for v in VARIANTS if v.file in ("mha.py", "heads.py", "attention.py")],
    ids=lambda v: getattr(v, "name", None) or getattr(v, "id", "?"),
)
def test_correct_code_written_otherwise_leaves_it_nowhere(tmp_path, variant):
    package = package_with(tmp_path, {variant.file: variant.apply})
    assert finding(package) is None


# ---------------------------------------------------------------------------- generated mistakes

MHA = {
    "q": "q = split_heads(self.w_q(query), self.num_heads)  # (B, H, Lq, d_k)",
    "k": "k = split_heads(self.w_k(key), self.num_heads)  # (B, H, Lk, d_k)",
    "v": "v = split_heads(self.w_v(value), self.num_heads)  # (B, H, Lk, d_k)",
    "scores": "scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)",
    "weights": "weights = torch.softmax(scores, dim=-1)  # (B, H, Lq, Lk)",
    "out": "out = merge_heads(weights @ v)  # (B, Lq, D)",
}
# (the variable, the relation as code applied to it, the stage, the family, parameters it must name)
RELATIONS = [
    ("q", "{x}.flip(1)", "q_heads", "slice_map", {"axis": "H", "map": "reversed"}),
    ("q", "{x}.flip(0)", "q_heads", "slice_map", {"axis": "B", "map": "reversed"}),
    ("k", "{x}[:, [1, 2, 0]]", "k_heads", "slice_map", {"axis": "H", "map": "rolled 1"}),
    ("q", "2.5 * {x}", "q_heads", "factor", {"c": 2.5}),  # the scale kept where it belongs: said where it is made
    ("v", "-{x}", "v_heads", "factor", {"c": -1.0}),
    ("q", "{x}.transpose(1, 2).reshape({x}.shape)", "q_heads", "layout", {"view": True}),
    ("scores", "{x} * 0.5", "scores", "factor", {"c": 0.5}),
    ("scores", "{x}.roll(1, dims=0)", "scores", "slice_map", {"axis": "B"}),
    ("weights", "{x}.transpose(-1, -2)", "weights", "layout", {"view": False}),
    ("weights", "{x} / 2", "weights", "factor", {"c": 0.5}),
    ("out", "{x} + 1.0", "merged", "bias", {"along": "()"}),
    ("out", "{x}.flip(1)", "merged", "slice_map", {"axis": "Lq", "map": "reversed"}),
]


QUICK = {"{x}.flip(1)", "{x} * 0.5", "{x}.transpose(-1, -2)"}  # the quick run's share; CI runs them all


@pytest.mark.parametrize(
    "variable,code,stage,family,params",
    [r if r[1] in QUICK else pytest.param(*r, marks=pytest.mark.slow) for r in RELATIONS],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_relation_applied_at_a_stage_is_found_there(tmp_path, variable, code, stage, family, params):
    line = MHA[variable]
    changed = line + f"\n        {variable} = " + code.format(x=variable)
    package = package_with(tmp_path, {"mha.py": lambda source: source.replace(line, changed)})
    _, found = finding(package)
    assert (found.stage, found.family) == (stage, family), found
    assert {k: dict(found.params).get(k) for k in params} == params, found


SOURCE = {"q": "query", "k": "key", "v": "value"}
OTHER = {"q": "key", "k": "query", "v": "query"}  # a length that differs on cross-attention


@pytest.mark.parametrize("order", ["qkv", "vkq", "kvq"])
@pytest.mark.parametrize("role", ["q", "k", "v"])
def test_a_split_that_raises_is_localised_at_its_own_heads(tmp_path, role, order):
    """The projections and splits computed one tensor at a time, in any order, one split read with
    the other sequence's length: the finding is that tensor's heads, where the code raised, not the
    first stage of the reference's order left uncomputed (fails before: k's raise said at v)."""
    wrong = (
        f"{role} = self.w_{role}({SOURCE[role]}).reshape({SOURCE[role]}.size(0), {OTHER[role]}.size(1), "
        f"self.num_heads, -1).transpose(1, 2)"
    )
    lines = {name: (wrong if name == role else MHA[name]) for name in "qkv"}

    def change(source):
        block = "\n        ".join(MHA[name] for name in "qkv")
        assert block in source
        return source.replace(block, "\n        ".join(lines[name] for name in order))

    _, found = finding(package_with(tmp_path, {"mha.py": change}))
    assert (found.stage, dict(found.raised or ()).get("op")) == (f"{role}_heads", "Tensor.reshape"), found


@pytest.mark.parametrize("steps", ["* 3 / 2", "/ 2 * 3", "* 0.5 * 3"])
def test_a_relation_made_in_several_steps_is_named_by_their_product(tmp_path, steps):
    """scores / d_k ** 1/2 is scores / d_k / 2: each step is a constant factor of the stage's value,
    and the one the computation goes on from is the stage (the steps towards it are not two
    explanations that name nothing)."""
    line = MHA["scores"]
    changed = line.replace("q @ k.transpose(-2, -1)", f"q @ k.transpose(-2, -1) {steps}")
    package = package_with(tmp_path, {"mha.py": lambda source: source.replace(line, changed)})
    _, found = finding(package)
    assert (found.stage, found.family, dict(found.params)["c"]) == ("scores", "factor", 1.5), found


DECODE_MASK = "return torch.triu(ones, diagonal=offset + 1)  # (L_new, L)"
DECODE_FILL = "torch.finfo(scores.dtype).min"


@pytest.mark.parametrize(
    "mask",
    [
        "return torch.triu(ones, diagonal=max(offset, 1))",  # past the prompt, a token cannot see itself
        pytest.param("return torch.triu(ones, diagonal=1 if offset == 0 else offset - 1)", marks=pytest.mark.slow),
    ],
)
def test_a_relation_on_a_step_of_another_relation_is_no_step_of_it(tmp_path, mask):
    """A step towards a relation is a value related the same way with other parameters. At a
    decoded token the reference's mask blocks nothing, so its scores are already its masked
    scores; the student's masked scores (filled with -1e9, whose size lets the weights' tolerance
    take them for the weights plus a bias) go into a softmax: another operation, so the mistake is
    where the keys were blocked (masked_scores, blocked), not in the weights computed from them."""

    def change(source):
        return source.replace(DECODE_MASK, mask).replace(DECODE_FILL, "-1e9")

    package = package_with(tmp_path, {"decode.py": change}, assignment="kv_cache")
    _, found = finding(package, "kv_cache", "incremental_decoding")
    assert (found.stage, found.family) == ("masked_scores", "blocked"), found


@pytest.mark.parametrize(
    "families,steps",
    [
        (("factor", "factor"), {0}),
        (("layout", "layout"), {0}),
        (("bias", "blocked"), set()),
        (("factor", "softmax_axis"), set()),
    ],
)
def test_a_step_towards_a_relation_is_of_its_family(families, steps):
    """_steps_towards: value 1 is computed from value 0; 0 is a step only when 1 fits the same way."""
    fits = {relations.fit(families[0], n=0): 0, relations.fit(families[1], n=1): 1}
    assert localise._steps_towards(fits, {"from": [[], [0]]}) == steps


@pytest.mark.parametrize(
    "variable,code",
    [
        ("v", "(2.5 * {x}).flip(1)"),
        ("q", "(2.5 * {x}).flip(1)"),  # the scale kept: q's factor is a second relation, not a moved scale
        pytest.param("weights", "({x} / 2).transpose(-1, -2)", marks=pytest.mark.slow),
        pytest.param("scores", "({x} * 0.5).flip(0)", marks=pytest.mark.slow),
    ],
)
def test_two_relations_at_once_name_the_stage_only(tmp_path, variable, code):
    line = MHA[variable]
    changed = line + f"\n        {variable} = " + code.format(x=variable)
    package = package_with(tmp_path, {"mha.py": lambda source: source.replace(line, changed)})
    _, found = finding(package)
    assert found.family is None, found


# ---------------------------------------------------------------------------- differences nothing later sees

# Equivalent programs that leave the reference at a stage by a difference the rest of the computation
# does not see (cancelled.py finds them on the pipeline): a key bias the softmax cancels, the scale applied
# before the product. (name, [(the line, its replacement)]); {s} is a seed, {c} a constant.
SCORES = "q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))"
UNSEEN = {
    "key_vector": [
        (
            MHA["k"],
            MHA["k"] + "\n        k = k + {c} * torch.randn(k.size(-1), generator=torch.Generator().manual_seed({s}))",
        )
    ],
    "key_vector_per_batch_and_head": [
        (
            MHA["k"],
            MHA["k"]
            + "\n        k = k + torch.randn(k.size(0), k.size(1), 1, k.size(3), generator=torch.Generator().manual_seed({s}))",
        )
    ],
    "scale_on_queries": [
        (MHA["q"], MHA["q"] + "\n        q = q / math.sqrt(q.size(-1))"),
        (SCORES, "q @ k.transpose(-2, -1)"),
    ],
    "scale_halved_on_both": [
        (MHA["k"], MHA["k"] + "\n        q, k = q * q.size(-1) ** -0.25, k * k.size(-1) ** -0.25"),
        (SCORES, "q @ k.transpose(-2, -1)"),
    ],
    "scale_on_keys_times_c": [
        (MHA["k"], MHA["k"] + "\n        k = k * {c} / math.sqrt(k.size(-1))"),
        (SCORES, "q @ k.transpose(-2, -1) / {c}"),
    ],
}
# mistakes after those stages, as relations applied to a variable (the finding must not move)
LATER = [
    ("scores", "{x} * 0.5"),
    ("scores", "{x}.roll(1, dims=0)"),
    ("weights", "{x}.transpose(-1, -2)"),
    ("weights", "torch.softmax(scores, dim=-2)"),
    ("out", "{x}.flip(1)"),
    ("q", "{x}.flip(1)"),
]


def _unseen_then(name, later, seed):
    variable, code = later
    c = 0.5 + seed
    patches = [(old, new.format(s=seed, c=c)) for old, new in UNSEEN[name]]
    line = MHA[variable]

    def change(source):
        source = source.replace(line, line + f"\n        {variable} = " + code.format(x=variable))
        for old, new in patches:
            assert source.count(old) == 1, old
            source = source.replace(old, new)
        return source

    return change


@pytest.mark.parametrize("later", LATER[:2] + [pytest.param(x, marks=pytest.mark.slow) for x in LATER[2:]], ids=str)
@pytest.mark.parametrize("name", list(UNSEEN)[:1] + [pytest.param(n, marks=pytest.mark.slow) for n in list(UNSEEN)[1:]])
def test_a_difference_nothing_later_sees_leaves_the_finding_where_it_was(tmp_path, name, later):
    """An equivalent program that differs from the reference by a difference the rest of the
    computation cancels or carries to a factor of its own, with a mistake after it: the finding is
    the mistake's, as in the reference with the same mistake (fails before: the key's bias, the
    queries' factor were said first)."""
    variable, code = later
    line = MHA[variable]
    alone = package_with(
        tmp_path, {"mha.py": lambda s: s.replace(line, line + f"\n        {variable} = " + code.format(x=variable))}
    )
    _, expected = finding(alone)
    for seed in (1, 2):
        _, found = finding(package_with(tmp_path, {"mha.py": _unseen_then(name, later, seed)}))
        assert (found.stage, found.family, found.params) == (expected.stage, expected.family, expected.params), found


@pytest.mark.parametrize("name", list(UNSEEN))
def test_a_difference_nothing_later_sees_alone_leaves_the_reference_nowhere(tmp_path, name):
    change = _unseen_then(name, ("out", "{x}"), 1)
    assert finding(package_with(tmp_path, {"mha.py": change})) is None


def test_a_difference_the_outputs_show_is_no_unseen_one(tmp_path):
    """A bias on the values, a factor on the values, a bias on the keys that varies along the keys'
    positions: the outputs change, so each is found where it is made (cancelled.py marks nothing)."""
    cases = {
        MHA["v"] + "\n        v = v + 1.0": ("v_heads", "bias"),
        MHA["v"] + "\n        v = v * 2.0": ("v_heads", "factor"),
        MHA["k"] + "\n        k = k + torch.arange(k.size(2), dtype=k.dtype)[:, None]": ("k_heads", "bias"),
    }
    for changed, (stage, family) in cases.items():
        line = changed.split("\n")[0]
        _, found = finding(
            package_with(tmp_path, {"mha.py": lambda s, line=line, changed=changed: s.replace(line, changed)})
        )
        assert (found.stage, found.family) == (stage, family), (changed, found)


# ---------------------------------------------------------------------------- planted, in source


def decided_by_probe(planted) -> bool:
    """A mistake whose behaviour probe names it (random outputs: layers made in forward)."""
    return planted.diagnosis in {p.diagnosis for p in step_modules("mha")[planted.step].PROBES}


@pytest.mark.slow  # every planted mistake of the localised steps: CI runs them (pytest -m "")
@pytest.mark.parametrize(
    "planted",
    [p for p in PLANTED if ("mha", p.step) in LOCALISED_STEPS and not p.needs_check and not decided_by_probe(p)],
    ids=lambda p: p.name,
)
def test_a_planted_mistake_is_found_where_its_model_is(tmp_path, planted):
    """The source mistake and the hand-written model of its known mistake (mistakes/model.py)
    give the same finding: one observation, however it is written."""
    package = package_with(tmp_path, {planted.file: planted.apply})
    found = finding(package, "mha", planted.step)
    stored = store.mistake_findings("mha", planted.step)
    models = [theirs for key, theirs in stored.items() if key.split("#")[0] == planted.diagnosis]
    if found is None:
        assert None in models, f"{planted.name}: no finding, its model has {models}"
        return
    probe, mine = found
    keys = [(p, f.stage, f.call, f.family, f.params) for p, f in filter(None, models)]
    assert (probe, mine.stage, mine.call, mine.family, mine.params) in keys, (mine, models)


# ---------------------------------------------------------------------------- the store


@pytest.mark.parametrize("assignment", ["mha", "kv_cache"])
def test_the_stored_stages_are_up_to_date_fast(assignment):
    """The sources the stages are made from are the ones they were made from; else run
    `python -m autograder generate` (its --check regenerates and compares)."""
    assert store.load(assignment).get("sources") == store.sources_digest(assignment)


@pytest.mark.parametrize(
    "assignment,step",
    [
        (a, s) if (a, s) == ("kv_cache", "kv_cache") else pytest.param(a, s, marks=pytest.mark.slow)
        for a, s in sorted(LOCALISED_STEPS)
    ],
)
def test_a_stored_mistake_finding_is_what_a_fresh_model_gives(assignment, step):
    """What `generate` stores of a known mistake does not depend on what ran before it in the
    process: built twice in one process, each known mistake's findings are the stored ones (a
    cache kept in its class had grown by every earlier run, and its stored length with it). Each
    is made as grading sees a student's code: run once before (the checks run before the probes).
    (Fresh models: running Mistake.packages() here would change them for the tests after.)"""
    from autograder.engine.course import config as grading_config
    from autograder.engine.generate import stage_build

    config = {c.id: c for c in grading_config.load_all()}[assignment]
    stored = store.load(assignment)["steps"][step]
    scenarios = {key: Scenario.from_json(data) for key, data in stored["probes"].items()}
    probes = stage_build.localisers(step_modules(assignment)[step])
    grading_step = next(s for s in config.steps if s.id == step)
    for mistake in config.mistakes_of(step):
        for _ in range(2):
            found = stage_build.mistake_findings(assignment, mistake, probes, scenarios, grading_step)
            for key, finding in found.items():
                assert store.same(finding, stored["mistakes"][key]), (key, finding, stored["mistakes"][key])


def test_every_stage_unit_probe_and_part_is_said_in_both_languages():
    from autograder.engine.checks import messages

    for assignment in ("mha", "kv_cache"):
        for _step, stored in store.load(assignment)["steps"].items():
            names = set()
            for probe, data in stored["probes"].items():
                names.add(f"scenario.{assignment}.{probe}")
                scenario = Scenario.from_json(data)
                for call in scenario.calls:
                    for stage in call:
                        names.add(f"stage.{assignment}.{stage.name}")
                        names |= {f"part.{assignment}.{part}" for part in stage.parts or ()}
                        for label in stage.others or ():
                            if label.startswith("skip:"):
                                names.add(f"skip.{assignment}.{label.removeprefix('skip:')}")
                            elif ":" in label:
                                names.add(f"other.{assignment}.{label}")
                names |= {f"skip.{assignment}.{unit}" for key in scenario.skips for unit in key.split("+")}
                names |= {f"call.{assignment}.{words[0]}" for words in scenario.call_words or ()}
            for lang in ("en", "ko"):
                catalog = messages.catalog(lang)
                assert sorted(n for n in names if n not in catalog) == [], (assignment, lang)


@pytest.mark.parametrize("assignment", ["mha", "kv_cache"])
def test_a_raise_is_said_with_what_is_known_of_it_and_no_placeholder(assignment):
    """Every stage of every stored probe, a raise with or without its operation, its shapes, a
    misfit or a kept tensor, in both languages: the words say the exception and what is known,
    and no stand-in for what is not (a "?" for an unknown operation, a "-" for no shapes)."""
    import itertools

    from autograder.engine.mistakes.said import say
    from autograder.engine.mistakes.scenario import Finding

    knowns = {"op": ("Tensor.view", ""), "shapes": ("(B, H, L, d_k), (B, L, D)", "-", "")}
    causes = ({}, {"odd": "(L, L)", "wanted": "(L_new, L)"}, {"outside": "(B, H, L, d_k)"})
    said = 0
    for _step, stored in store.load(assignment)["steps"].items():
        for data in stored["probes"].values():
            scenario = Scenario.from_json(data)
            stages = {(i, stage.name) for i, call in enumerate(scenario.calls) for stage in call}
            for (call, stage), op, shapes, cause, lang in itertools.product(
                sorted(stages), *knowns.values(), causes, ("en", "ko")
            ):
                raised = {"type": "RuntimeError", "op": op, "shapes": shapes, **cause}
                finding = Finding(stage, call, raised=tuple(sorted(raised.items())), at=("mha/x.py", 7))
                text = say(finding, scenario, lang)
                said += 1
                assert "RuntimeError" in text and "{" not in text and "?" not in text, text
                assert " - " not in text.split(" — ")[0] and "-입니다" not in text, text
                # the shapes are those that met at the operation: said with it
                assert op in text and (not op or shapes.strip("-") in text), (op, shapes, text)
    assert said > 100


# ---------------------------------------------------------------------------- named by observation


def stored_observations():
    """(assignment, step, mistake, Finding) of every known mistake's stored first finding that
    says a relation or a misfit shape (what a mistake can be recognised by)."""
    from autograder.engine.mistakes.diagnosis import _observation

    found = []
    for assignment in ("mha", "kv_cache"):
        for step in store.load(assignment)["steps"]:
            for key, theirs in store.mistake_findings(assignment, step).items():
                if theirs is not None and _observation(theirs[1]) is not None:
                    found.append((assignment, step, key.split("#")[0], theirs[1]))
    return found


def respelled(finding):
    """The same observation written otherwise: another call made the misfit shape (an additive
    mask where the model fills), with leading axes of size 1 (a (1, 1, L, L) mask), found on
    another line; a relation found on another line."""
    import dataclasses

    if not finding.raised:
        return dataclasses.replace(finding, at=("other.py", 99))
    raised = dict(finding.raised)
    raised.update(op="Tensor.add", odd="(1, 1, " + raised["odd"][1:], message="another wording")
    return dataclasses.replace(finding, raised=tuple(sorted(raised.items())), at=("other.py", 99))


def test_a_known_mistake_is_named_by_its_observation_however_spelled():
    """Every known mistake whose observation no other mistake of its step shares is named by a
    finding that observes the same, spelled otherwise; one that shares it is not (two would fit)."""
    from autograder.engine.mistakes.diagnosis import _observation, observed

    cases = stored_observations()
    assert len(cases) > 40
    for assignment, step, mistake, theirs in cases:
        stored = store.mistake_findings(assignment, step)
        sharing = {
            key.split("#")[0]
            for key, other in stored.items()
            if other is not None and _observation(other[1]) == _observation(theirs)
        }
        expected = [mistake] if sharing == {mistake} else []
        assert observed(respelled(theirs), stored) == expected, (assignment, step, mistake, theirs, sharing)


def test_different_only_where_blocked_names_a_mistake_by_its_fill_only():
    """masked_only says one fill value where there is one (0: the mask filled with zeros); without
    it (+inf, NaN, two fills) it says too little to recognise a mistake by (the red team's +inf
    fill was named mha_mask_added, an additive mask, once the zero fill had its own parameter)."""
    from autograder.engine.mistakes.diagnosis import observed
    from autograder.engine.mistakes.scenario import Finding

    stored = store.mistake_findings("mha", "multi_head_attention")
    probe, zero = stored["mha_mask_fill_zero#0"]
    assert dict(zero.params).get("fill") == "0", zero
    bare = Finding(zero.stage, zero.call, "masked_only", ())
    assert observed((probe, bare, None)[1], stored) == []
    assert observed(zero, stored) == ["mha_mask_fill_zero"]


@pytest.mark.parametrize("code", ["{x}[0, 0, 0, 0] = float('inf')", "{x}[0, 0, 0, 0] = float('nan')"])
def test_a_value_that_is_not_finite_is_no_unseen_difference(tmp_path, code):
    """One inf or NaN in the queries is no difference a factor explains: the finding stays at the
    first scores it reaches, not at a stage further on (the red team's inf in q was said at the weights)."""
    line = MHA["q"]
    changed = line + "\n        q = q.clone()\n        " + code.format(x="q")
    _, found = finding(package_with(tmp_path, {"mha.py": lambda source: source.replace(line, changed)}))
    assert found.stage in ("q_heads", "raw_scores"), found


def test_an_observation_that_says_too_little_or_else_names_nothing():
    """A stage alone, a relation with other parameters, another stage or call, or an exception
    with no misfit shape names no known mistake; nor does one excluded (a probe decides it)."""
    import dataclasses

    from autograder.engine.mistakes.diagnosis import observed

    for assignment, step, mistake, theirs in stored_observations():
        stored = store.mistake_findings(assignment, step)
        if observed(theirs, stored) != [mistake]:
            continue
        assert observed(dataclasses.replace(theirs, family=None, params=(), raised=None), stored) == []
        assert observed(dataclasses.replace(theirs, stage=theirs.stage + "_other"), stored) == []
        assert observed(dataclasses.replace(theirs, call=theirs.call + 7), stored) == []
        assert observed(theirs, stored, excluded={mistake}) == []
        if theirs.raised:
            bare = tuple((k, v) for k, v in theirs.raised if k not in ("odd", "wanted"))
            assert observed(dataclasses.replace(theirs, raised=bare), stored) == []
        else:
            other = tuple((k, f"{v}?") for k, v in theirs.params) or (("x", 1),)
            assert observed(dataclasses.replace(theirs, params=other), stored) == []


def test_a_tensor_lacking_broadcast_axes_is_one_observation_however_many():
    """A raise whose odd shape is the wanted one with size-1 axes left out is one observation,
    whichever of those axes are missing (a (B, L) or a (B, L, L) mask where (B, 1, 1, L) or
    (B, 1, L, L) fits); an odd shape that differs in any other axis is not that observation."""
    import dataclasses
    import itertools

    from autograder.engine.mistakes.diagnosis import _observation
    from autograder.engine.mistakes.scenario import Finding

    def raised(odd, wanted):
        fields = {"type": "RuntimeError", "op": "Tensor.masked_fill", "odd": odd, "wanted": wanted}
        return dataclasses.replace(BASE, raised=tuple(sorted(fields.items())))

    def shape(axes):
        return "(" + ", ".join(axes) + ")"

    BASE = Finding("masked_scores", 0)
    lacking = set()
    for wanted in [("B", "1", "1", "L"), ("B", "1", "L", "L"), ("1", "H", "L_new", "L"), ("B", "H_kv", "1", "L")]:
        ones = [i for i, axis in enumerate(wanted) if axis == "1"]
        for n in range(1, len(ones) + 1):
            for left_out in itertools.combinations(ones, n):
                odd = tuple(a for i, a in enumerate(wanted) if i not in left_out)
                lacking.add(_observation(raised(shape(odd), shape(wanted))))
                # another axis in place of one kept, or one more axis: another observation
                changed = ("X",) + odd[1:]
                assert _observation(raised(shape(changed), shape(wanted))) not in lacking
                assert _observation(raised(shape(odd + ("L",)), shape(wanted))) not in lacking
    assert len(lacking) == 1, lacking
    # the full shape, or a square one where a rectangle fits, keeps its own observation
    assert _observation(raised("(B, 1, 1, L)", "(B, 1, 1, L)")) not in lacking
    assert _observation(raised("(L_new, L_new)", "(L_new, L)")) not in lacking


def test_a_run_that_raised_contradicts_no_mistake_at_its_stage():
    """Where the student's code raised (state kept from before made `cat` fail), a known mistake
    whose own finding is at the same stage and call, by a relation (the same state made its
    values longer), refines it; one at another stage does not."""
    import dataclasses

    from autograder.engine.mistakes.diagnosis import refines

    stored = store.mistake_findings("kv_cache", "kv_cache")
    probe, theirs = stored["cache_shared_between_instances#0"]
    assert theirs.family == "length" and not theirs.raised
    raised = dataclasses.replace(theirs, family=None, params=(), raised=(("outside", "(B, H_kv, 4, d_k)"),))
    assert refines("cache_shared_between_instances", (probe, raised, None), stored)
    elsewhere = dataclasses.replace(raised, stage="cache_len")
    assert not refines("cache_shared_between_instances", (probe, elsewhere, None), stored)


def test_the_same_relation_one_stage_away_refines_and_no_further():
    """Every stored mistake whose finding names a relation: the student's finding with that
    relation at the mistake's stage, at its parent or at its child refines it (the same mistake at
    a neighbouring place: a scale on the query, a mask on the exponentials); two stages away, or
    another family beside it, does not."""
    import dataclasses

    from autograder.engine.mistakes.diagnosis import refines

    tried = 0
    for assignment in ("mha", "kv_cache"):
        for step in store.load(assignment).get("steps", {}):
            stored = store.mistake_findings(assignment, step)
            for key, theirs in stored.items():
                if theirs is None or theirs[1].family is None or theirs[1].raised:
                    continue
                probe, finding = theirs
                mistake = key.split("#")[0]
                scenario = store.scenario_of(assignment, step, probe)
                stages = scenario.calls[finding.call]
                parents = {s.name: set(s.parents) for s in stages}
                near = {finding.stage} | parents[finding.stage] | {s for s, p in parents.items() if finding.stage in p}
                others = {k: v for k, v in stored.items() if k.split("#")[0] == mistake and v is not None}
                for stage in parents:
                    moved = dataclasses.replace(finding, stage=stage)
                    if any(v[0] == probe and v[1].stage == stage for v in others.values()):
                        continue  # another variant of the mistake is found there itself
                    beside = any(
                        v[0] == probe
                        and v[1].family == finding.family
                        and (stage in parents.get(v[1].stage, ()) or v[1].stage in parents[stage])
                        for v in others.values()
                    )
                    assert refines(mistake, (probe, moved, scenario), stored) == (stage in near or beside), (
                        key,
                        stage,
                    )
                    tried += 1
                if parents[finding.stage]:
                    parent = next(iter(parents[finding.stage]))
                    other = dataclasses.replace(finding, stage=parent, family=finding.family + "_other")
                    if not any(v[0] == probe and v[1].stage == parent for v in others.values()):
                        assert not refines(mistake, (probe, other, scenario), stored), key
    assert tried > 50


def test_the_same_misfit_one_stage_away_refines_a_mistake_that_raised():
    """Every stored mistake whose code raised with a misfit (an operation on an odd shape): the
    student's code raising with the same misfit at the mistake's stage or one beside it refines it
    (a view of the transposed heads on the merging line or on the projecting one); with another
    operation beside it, or two stages away, it does not."""
    import dataclasses

    from autograder.engine.mistakes.diagnosis import refines

    tried = 0
    for assignment in ("mha", "kv_cache"):
        for step in store.load(assignment).get("steps", {}):
            stored = store.mistake_findings(assignment, step)
            for key, theirs in stored.items():
                if theirs is None or not {"op", "odd", "wanted"} <= set(dict(theirs[1].raised or ())):
                    continue  # no misfit named: too little to say it is the same mistake elsewhere
                probe, finding = theirs
                mistake = key.split("#")[0]
                scenario = store.scenario_of(assignment, step, probe)
                parents = {s.name: set(s.parents) for s in scenario.calls[finding.call]}
                near = {finding.stage} | parents[finding.stage] | {s for s, p in parents.items() if finding.stage in p}
                mine = [v for k, v in stored.items() if k.split("#")[0] == mistake and v is not None]
                for stage in parents:
                    if any(v[0] == probe and v[1].stage == stage for v in mine):
                        continue  # a variant of the mistake is found there itself
                    moved = dataclasses.replace(finding, stage=stage)
                    assert refines(mistake, (probe, moved, scenario), stored) == (stage in near), (key, stage)
                    other = dict(finding.raised, op="torch.other_op")
                    if stage != finding.stage:
                        changed = dataclasses.replace(moved, raised=tuple(sorted(other.items())))
                        assert not refines(mistake, (probe, changed, scenario), stored), (key, stage)
                    tried += 1
    assert tried > 5
