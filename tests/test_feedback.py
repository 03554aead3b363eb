"""A step's feedback as a student reads it (engine/judge/feedback.py, engine/judge/shrink.py, issue 23):

* the first line under a failing step names the cause (for every planted mistake: test_mistakes.py),
  in at most 8 lines and 1,200 characters;
* the evidence once per kind of failure, one pointer per cause, the details behind `verbose`;
* the smallest failing example: shrunk from a public check's own input, never larger, still
  failing the same way, the same on every run, with tied dimensions kept tied (q's and k's d_k, a
  mask's Lq and Lk), shown in pytest for the planted mistakes of issue 23's list;
* nothing of the hidden checks in what a student reads.
"""

import copy
import re

import pytest
import torch

from autograder.engine.checks import messages
from autograder.engine.checks.check import Check, compare, judged
from autograder.engine.judge import example as examples
from autograder.engine.judge import feedback
from autograder.engine.judge.in_process import clone, observe
from autograder.engine.judge.plan import check_inputs, check_seed
from autograder.engine.judge.results import CheckResult, GradeResult, StepResult
from autograder.engine.judge.runner import grade
from autograder.engine.judge.shrink import dimensions, shrink, size
from autograder.engine.judge.table import table
from autograder.engine.judge.verdict import judge
from autograder.engine.mistakes.diagnosis import Record
from autograder.harness.package import Package
from conftest import SOLUTIONS, all_mistakes
from planted import PLANTED

TOL = {torch.float64: (1e-7, 1e-9), torch.float32: (1e-4, 1e-5)}
# issue 23's list: softmax over the wrong dim, no scaling, mask polarity, transpose/view confusion,
# a view without contiguous(), the padding row of the embedding
ISSUE_LIST = (
    "softmax_wrong_dim",
    "no_scale",
    "mask_inverted_eq_zero",
    "split_without_transpose",
    "merge_view_not_contiguous",
    "embedding_no_padding_idx",
)


def planted(name):
    return next(p for p in PLANTED if p.name == name)


def block_of(text, step_id):
    """The lines under `step_id`'s row of a score table, up to the next row (as feedback.sh reads it)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^\s+{step_id}\s+[\d.-]+\s*/", line))
    block = []
    for line in lines[start + 1 :]:
        if re.match(r"^\s{2}\S+\s+[\d.-]+\s*/", line) or line.startswith("=") or not line.strip():
            break
        block.append(line)
    return block


# ---------------------------------------------------------------------------- the shrinker, on a check of its own


def attention(q, k, v, mask=None, softmax_dim=-1, scale=True):
    scores = q @ k.transpose(-2, -1) / (q.shape[-1] ** 0.5 if scale else 1.0)
    if mask is not None:
        scores = scores.masked_fill(mask, -1e9)
    weights = torch.softmax(scores, dim=softmax_dim)
    return {"out": weights @ v, "weights": weights}


class MaskedAttention(Check):
    """A check defined here: attention of q (B, Lq, d), k (B, Lk, d), v (B, Lk, d_v) with a padding
    mask (B, 1, Lk) and a causal one (Lq, Lk): ties everywhere, sizes all different."""

    id = "masked"
    dims = None

    def inputs(self, rng):
        B, Lq, Lk, d, d_v = 2, 5, 7, 4, 3
        pad = torch.zeros(B, 1, Lk, dtype=torch.bool)
        pad[1, 0, 5:] = True
        return {
            "q": torch.randn(B, Lq, d, generator=rng, dtype=torch.float64),
            "k": torch.randn(B, Lk, d, generator=rng, dtype=torch.float64),
            "v": torch.randn(B, Lk, d_v, generator=rng, dtype=torch.float64),
            "mask": pad,
        }

    def expected(self, q, k, v, mask):
        return attention(q, k, v, mask)


def runner(student):
    """(run, fails) for the shrinker: `student(**inputs)` against MaskedAttention's oracle."""

    def run(inputs):
        return student(**copy.deepcopy(inputs))

    def fails(inputs, got):
        return compare(got, MaskedAttention().expected(**copy.deepcopy(inputs)), TOL) is not None

    return run, fails


def original():
    return MaskedAttention().inputs(torch.Generator().manual_seed(0))


def test_the_smallest_failing_input_is_smaller_still_fails_and_keeps_its_dimensions_tied():
    def softmax_over_queries(q, k, v, mask):
        return attention(q, k, v, mask, softmax_dim=-2)

    run, fails = runner(softmax_over_queries)
    inputs = original()
    shrunk = shrink(inputs, run, fails)
    small = shrunk.inputs
    assert fails(small, run(small)) and shrunk.size_after < shrunk.size_before // 10, small
    for name, tensor in small.items():  # never larger than the check's own input, axis by axis
        assert (
            all(a <= b for a, b in zip(tensor.shape, inputs[name].shape, strict=True))
            and tensor.dim() == inputs[name].dim()
        )
    assert small["q"].shape[-1] == small["k"].shape[-1]  # d
    assert small["k"].shape[-2] == small["v"].shape[-2] == small["mask"].shape[-1]  # Lk
    assert small["q"].shape[0] == small["k"].shape[0] == small["mask"].shape[0]  # B
    # the simplest values: whole numbers, mostly zeros
    assert all(bool((t == t.round()).all()) for t in small.values() if t.is_floating_point())


def test_shrinking_is_the_same_on_every_run_and_bounded():
    def no_scale(q, k, v, mask):
        return attention(q, k, v, mask, scale=False)

    run, fails = runner(no_scale)
    calls = []

    def counted(inputs):
        calls.append(1)
        return run(inputs)

    first = shrink(original(), counted, fails, max_runs=25)
    second = shrink(original(), run, fails, max_runs=25)
    assert len(calls) <= 25 and first.runs == len(calls)
    assert first.inputs.keys() == second.inputs.keys()
    assert all(torch.equal(first.inputs[name], second.inputs[name]) for name in first.inputs)
    assert first.inputs["q"].shape[-1] >= 2  # with d = 1 no scaling is the same as sqrt(d): no longer a failure


def test_a_mask_shrinks_to_a_single_blocked_key():
    def mask_inverted(q, k, v, mask):
        return attention(q, k, v, ~mask)

    run, fails = runner(mask_inverted)
    small = shrink(original(), run, fails).inputs
    assert small["mask"].shape[-1] <= 2 and int(small["mask"].sum()) <= 1, small["mask"]


def test_inputs_that_pass_give_no_example_and_errors_reject_a_candidate():
    run, fails = runner(attention)
    assert shrink(original(), run, fails) is None  # a correct answer: nothing to show

    def breaks_below_three_keys(q, k, v, mask):
        if k.shape[-2] < 3:
            raise RuntimeError("student code that cannot take a short input")
        return attention(q, k, v, mask, softmax_dim=-2)

    run, fails = runner(breaks_below_three_keys)
    small = shrink(original(), run, fails).inputs
    assert small["k"].shape[-2] == 3 and fails(small, run(small))


def test_declared_dimensions_tie_only_what_they_name():
    """Undeclared, two dimensions of the same length (here Lk == d == 4) shrink as one; a check
    may declare its dimensions (`dims`), and a number that is a dimension's size shrinks with it."""
    inputs = {
        "q": torch.ones(2, 3, 4, dtype=torch.float64),
        "k": torch.ones(2, 4, 4, dtype=torch.float64),
        "heads": 4,
    }
    assert {length: len(axes) for length, axes in dimensions(inputs).items()} == {2: 2, 3: 1, 4: 3}
    dims = {"q": ("B", "Lq", "d"), "k": ("B", "Lk", "d"), "heads": "Lk"}
    declared = dimensions(inputs, dims)
    assert sorted(declared) == ["B", "Lk", "Lq", "d"] and len(declared["Lk"]) == 2  # k's axis and `heads`

    def fails(candidate, _):  # wrong whenever there are at least 2 keys and 2 features
        return candidate["k"].shape[1] >= 2 and candidate["q"].shape[2] >= 2

    small = shrink(inputs, lambda candidate: None, fails, dims=dims).inputs
    assert small["k"].shape == (1, 2, 2) and small["q"].shape == (1, 1, 2) and small["heads"] == 2


def test_a_check_may_opt_out_and_hidden_checks_are_never_shrunk():
    class Hidden(MaskedAttention):
        visibility = "hidden"

    class Random(MaskedAttention):
        shrink = False

    inputs = original()
    fail = compare(attention(**inputs, softmax_dim=-2), attention(**inputs), TOL)
    for check in (Hidden(), Random()):
        assert examples.smallest_example(check, inputs, fail, lambda i: None, TOL) is None


# ---------------------------------------------------------------------------- the verdict, on hand-made steps


def checks_failing(count, message_id="values", name="out", **extra):
    message = "out: 210 of 210 values out of tolerance, the first at index (0, 0, 0, 0) ... " * 3
    return [
        CheckResult(
            f"check_{i}",
            False,
            0.0,
            1.0,
            "public",
            message,
            message_id,
            params={"name": name, "max_abs": 0.5 + i, **extra},
        )
        for i in range(count)
    ]


def test_the_cause_comes_first_and_the_evidence_once_per_kind_of_failure():
    diagnoses = [
        {"id": "softmax_wrong_dim", "message": messages.render("diagnosis.softmax_wrong_dim")},
        {"id": "rows_not_normalised", "message": messages.render("diagnosis.rows_not_normalised", low=0.77, high=2.87)},
    ]
    step = StepResult("attention", "Attention", 0.0, 15.0, checks_failing(12), diagnoses=diagnoses)
    block = feedback.lines(feedback.explanation(step), indent="    ")
    assert block[0].strip() == "x " + messages.render("diagnosis.softmax_wrong_dim")
    assert sum("12 of 12 checks: wrong values in out (largest error 11.5)" in line for line in block) == 1
    assert sum("→" in line for line in block) == 1  # one pointer, the cause's paragraph
    assert '"For every query, compare it with every key"' in next(line for line in block if "→" in line)
    assert len(block) <= feedback.MAX_LINES and sum(map(len, block)) <= feedback.MAX_CHARS
    verbose = feedback.lines(feedback.explanation(step), verbose=True)
    assert len(verbose) == len(block) + 12 and all(f"x check_{i}: " in "\n".join(verbose) for i in range(12))


def test_without_a_diagnosis_the_clearest_symptom_comes_first():
    raised = CheckResult(
        "values",
        False,
        0.0,
        1.0,
        "public",
        messages.render("raised", type="RuntimeError", message="shape mismatch", where="mha/heads.py, line 12, in f"),
        "raised",
    )
    shape = CheckResult(
        "shape", False, 0.0, 1.0, "public", messages.render("shape", name="out", expected=(2, 3), got=(3, 2)), "shape"
    )
    step = StepResult("split_heads", "Heads", 0.0, 15.0, [*checks_failing(3), shape, raised])
    found = feedback.explanation(step)
    assert found.cause_id is None and found.cause == raised.message  # an error with its line, first
    assert [evidence.kind for evidence in found.evidence] == ["raised", "shape", "values"]
    values_only = feedback.explanation(StepResult("split_heads", "Heads", 0.0, 15.0, checks_failing(3)))
    assert values_only.cause == "out: wrong values (largest error 2.5)"  # the full message is behind -v


def test_every_block_stays_short_whatever_the_messages():
    long = "a very long message " * 200
    checks = [CheckResult(f"c{i}", False, 0.0, 1.0, "public", long, f"kind_{i}") for i in range(9)]
    checks += [CheckResult("blocked", None, 0.0, 0.0, "public", long, "mask_needs_attention")]
    diagnoses = [{"id": f"d{i}", "message": long} for i in range(5)]
    step = StepResult("attention", "Attention", 0.0, 15.0, checks, diagnoses=diagnoses, pictures=["p.png"] * 3)
    step.example = examples.Example("c0", {"q": torch.zeros(50, 50)}, {"out": torch.ones(9)}, {"out": 1}, long, 1, 1)
    text = table(GradeResult("MHA", "x", [step]))
    block = block_of(text, "attention")
    assert block[0].strip().startswith("x a very long message")
    assert len(block) <= 8 and sum(map(len, block)) <= 1200, block


def test_scores_read_the_same_everywhere():
    """One rule: two decimals on both sides ("5.36 / 5.35714" never again)."""
    step = StepResult("masking", "Masking", 75 / 14, 75 / 14, [CheckResult("a", True, 75 / 14, 75 / 14, "public")])
    text = table(GradeResult("MHA", "x", [step]))
    assert re.search(r"masking\s+5\.36 / 5\.36\b", text) and "5.35714" not in text
    assert re.search(r"total\s+5\.36 / 5\.36", text)


# ---------------------------------------------------------------------------- every planted mistake


def public_records(config, root, step_id):
    """diagnosis.Records of the step's failing public checks, run here on the package in `root`."""
    student = Package.load(root, "mha")
    settings, records = config.step(step_id), []
    for check in config.step_modules()[step_id].CHECKS:
        if check.visibility != "public" or check.requires:
            continue
        inputs = check_inputs(check, check_seed(check))
        observation = observe(check, student, inputs)
        fail = judge(check, inputs, observation, check.expected(**clone(inputs)), settings.tolerance)
        if fail is not None:
            records.append(Record(check, inputs, observation, fail))
    return student, records


@pytest.mark.parametrize(
    "step,mistake",
    [  # issue 23's list in the quick run, every other planted mistake with -m "" (CI)
        pytest.param(step, mistake, marks=[] if mistake.name in ISSUE_LIST else [pytest.mark.slow])
        for step, mistake in all_mistakes()
    ],
    ids=lambda v: getattr(v, "id", v),
)
def test_the_smallest_example_of_every_planted_mistake_is_no_larger_and_still_fails(config, submission, step, mistake):
    student, records = public_records(config, submission(mistake), step)
    settings = config.step(step)
    shown = [record for record in records if examples.shrinkable(record)]
    example = examples.first_example(
        records,
        lambda check, inputs: observe(check, student, inputs, settings.timeout),
        settings.tolerance,
        seconds=60,  # a loaded machine must not cut it short: the result is then the same everywhere
    )
    if not shown:
        assert example is None
        return
    assert example is not None and example.check == shown[0].check.id
    record = shown[0]
    assert example.size_after <= example.size_before == size(record.inputs)
    for name, value in example.inputs.items():  # axis by axis, never larger than the public check's input
        if isinstance(value, torch.Tensor):
            assert value.dim() == record.inputs[name].dim()
            assert all(a <= b for a, b in zip(value.shape, record.inputs[name].shape, strict=True)), name
    again = observe(record.check, student, dict(example.inputs), settings.timeout)  # it still fails, the same way
    fail = again.error or judged(
        record.check, example.inputs, again.values, record.check.expected(**clone(example.inputs)), settings.tolerance
    )
    assert examples.kind_of(fail) == examples.kind_of(record.fail)
    if mistake.name in ISSUE_LIST:
        assert example.size_after < example.size_before, (mistake.name, example)


# ---------------------------------------------------------------------------- pytest, as a student runs it


@pytest.mark.parametrize("name", ISSUE_LIST)
@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_pytest_shows_a_short_verdict_with_the_cause_first_and_a_smallest_example(tmp_path, name):
    from test_pytest_assignments import pytest_in, student_copy

    mistake = planted(name)
    root = student_copy(tmp_path, SOLUTIONS / "mha")
    target = root / "assignments" / "mha" / mistake.file
    target.write_text(mistake.apply(target.read_text()))
    out = pytest_in(root, "--step", mistake.step).stdout
    block = block_of(out[out.index("MHA Lab score") :], mistake.step)
    assert block[0].strip() == "x " + messages.render(f"diagnosis.{mistake.diagnosis}"), block
    assert len(block) <= 8 and sum(map(len, block)) <= 1200, block
    if name != "embedding_no_padding_idx":  # its checks build their own layers: no input to shrink
        example = [line for line in block if "smallest input that fails (" in line]
        # then what was expected and what the code gave (a check without an oracle: what it gave, and why wrong)
        assert example and re.match(r"\s+(expected |yours )", block[block.index(example[0]) + 1]), block


# ---------------------------------------------------------------------------- nothing hidden


@pytest.mark.parametrize("name", ISSUE_LIST)
def test_no_hidden_check_or_hidden_only_diagnosis_in_what_a_student_reads(config, submission, name):
    """Graded with the hidden checks (Gradescope, nbgrader, a private Classroom): the visible
    tests, the notebook's table and the Classroom result name no hidden check and give no
    diagnosis that only the hidden checks can show."""
    from autograder.engine.mistakes.diagnosis import public_message_ids
    from autograder.publish.classroom_result import reporter_result
    from autograder.publish.gradescope import gradescope_results
    from autograder.publish.public_view import public_step, public_view

    mistake = planted(name)
    result = grade(submission(mistake), config, reference=SOLUTIONS, seed=5, steps=[mistake.step])
    public_ids = public_message_ids(config)
    module = config.step_modules()[mistake.step]
    hidden = {c.id for c in module.CHECKS if c.visibility == "hidden"} - {
        c.id for c in module.CHECKS if c.visibility == "public"
    }
    catalog = messages.catalog("en")
    hidden_only = [
        text
        for key, text in catalog.items()
        if key.startswith("diagnosis.") and key.removeprefix("diagnosis.") not in public_ids and "{" not in text
    ]
    view, _ = public_view(result, mistake.step, public_ids)
    visible = [t["output"] for t in gradescope_results(result, 1.0, public_ids=public_ids)["tests"]]
    visible = [
        out
        for out, t in zip(visible, gradescope_results(result, 1.0)["tests"], strict=True)
        if t["visibility"] == "visible"
    ]
    classroom = str(reporter_result(public_step(result.step(mistake.step), public_ids)))
    for text in (table(view), *visible, classroom):
        assert not any(re.search(rf"\b{check}\b", text) for check in hidden), text
        assert not any(message in text for message in hidden_only), text
