"""Issue 14, the student's experience: a hang costs one time limit, partial runs tell the truth,
one mistake is reported in its own terms, failure output ends in the student's code."""

import re

import pytest

from autograder.engine import config as grading_config
from autograder.engine.runner import grade
from conftest import KIT, SOLUTIONS
from test_pytest_assignments import pytest_in, student_copy

ENDLESS_PAD = ("    if len(sequences) == 0:", "    while True:\n        pass\n    if len(sequences) == 0:")


def endless_padding(source):
    return source.replace(*ENDLESS_PAD)


def short_timeout_config(seconds):
    return grading_config.parse(
        (grading_config.default_path()).read_text().replace("timeout: 10", f"timeout: {seconds}")
    )


def padding_messages(result):
    return [c.message for c in result.step("padding").checks if c.passed is False]


@pytest.mark.parametrize("isolate", [False, True], ids=["in_process", "sandboxed"])
def test_grade_charges_one_time_limit_per_hung_step(submission, isolate):
    """The first padding check hangs; the step's other checks are skipped after the hang (not
    run again, so no second wait); the next step is graded in full."""
    padding = endless_padding((SOLUTIONS / "mha" / "padding.py").read_text())
    result = grade(
        submission(files={"padding.py": padding}),
        short_timeout_config(0.5),
        steps=["padding", "embedding"],
        isolate=isolate,
    )
    ids = [c.message_id for c in result.step("padding").checks]
    assert ids.count("timeout") == 1 and ids[0] == "timeout"
    assert set(ids[1:]) == {"skipped_after_hang"} and len(ids) > 2
    first = result.step("padding").checks[0].id
    assert all(
        f"check {first} of this step hung" in m and m.startswith("stopped after 0.5 s")
        for m in padding_messages(result)[1:]
    )
    assert result.step("padding").score == 0
    assert result.step("embedding").score == result.step("embedding").max_score


def test_a_time_limit_spent_in_the_graders_own_code_is_not_the_students_hang():
    from autograder.engine.assignment import step_modules
    from autograder.engine.observation import Facts, read_report
    from autograder.engine.runner import Hangs

    check = step_modules("mha")["padding"].CHECKS[0]
    facts = Facts("mha", frozenset({"padding.py"}), "padding", 1.0)
    hangs = Hangs()
    in_grader = read_report({"kind": "timeout", "where": None, "forbidden": []}, facts)
    assert hangs.note(check, 1.0, in_grader) is None and hangs.skipped(check) is None
    theirs = read_report({"kind": "timeout", "where": ["padding.py", 3, "pad_batch"], "forbidden": []}, facts)
    assert hangs.note(check, 1.0, theirs) == ("padding.py", "pad_batch")
    assert hangs.note(check, 1.0, theirs) is None  # known already: nothing new to trap


def test_pytest_charges_one_time_limit_per_hung_step(tmp_path):
    grading = (KIT / "grading.yml").read_text().replace("timeout: 10", "timeout: 1")
    root = student_copy(tmp_path, SOLUTIONS / "mha", grading)
    padding = root / "assignments" / "mha" / "padding.py"
    padding.write_text(endless_padding(padding.read_text()))
    out = pytest_in(root, "--step", "padding", "--step", "embedding", "-v").stdout  # -v: a line per check
    table = out[out.index("MHA Lab score") :]
    failures = re.findall(r"^\s+x (\w+): (.*)$", table, flags=re.M)
    timeouts = [check for check, message in failures if "of this step hung" not in message]
    skipped = [check for check, message in failures if "of this step hung" in message]
    assert len(timeouts) == 1 and len(skipped) >= 2, table
    assert "Timeout" in out  # pytest-timeout's report of the one check that hung
    # the reports of the failing tests, not pytest's summary lines (cut to the terminal's width,
    # except where CI is set: then they repeat the reason)
    reports = out.split("short test summary info")[0]
    assert reports.count("Timeout (>1.0s)") == 1, out[-4000:]
    assert "5.00 / 5" in next(line for line in table.splitlines() if line.strip().startswith("embedding"))


# ---------------------------------------------------------------------------- partial runs

NO_MERGE_TRANSPOSE = ("x = x.transpose(1, 2).contiguous()", "x = x.contiguous()")


def step_line(output, step):
    table = output[output.index("MHA Lab score") :]
    return next(line for line in table.splitlines() if line.strip().startswith(step + " "))


def test_a_step_cut_short_by_k_shows_how_many_checks_ran_and_no_score(tmp_path):
    root = student_copy(tmp_path, SOLUTIONS / "mha")
    out = pytest_in(root, "-k", "padding or padding_mask").stdout  # all of padding, two of masking's checks
    masking = step_line(out, "masking")
    assert re.search(r"masking\s+-- / 15\.00 +2 of 7 checks run", masking), masking
    assert "10.00 / 10.00" in step_line(out, "padding")
    total = step_line(out, "total")
    assert "partial run" in total and "of 9 steps" in total, total


def test_k_with_a_step_id_selects_exactly_that_steps_checks_and_says_so(tmp_path):
    """pytest's -k matches parts of names: `-k attention` picked multi_head_attention's checks and
    masking's attention_padding too (26 checks), and `-k padding` masking's. A step id in -k means
    that step: the same checks as --step, and pytest says what it matched."""
    root = student_copy(tmp_path, SOLUTIONS / "mha")

    def collected(*args):
        out = pytest_in(root, "--co", "-q", *args).stdout
        return sorted(line for line in out.splitlines() if "::" in line), out

    for step in ("attention", "padding", "masking"):
        by_k, out = collected("-k", step)
        by_step, _ = collected("--step", step)
        assert by_k == by_step and by_k, (step, by_k)
        assert all(f"-{step}-" in line or f"[{step}-" in line for line in by_k), by_k
        assert f"-k {step}: the checks of step {step} ({len(by_k)})" in out, out
    # other words keep pytest's meaning (a part of a test's name), and combine with step ids
    weights, _ = collected("-k", "attention and weights")
    assert weights == [line for line in collected("--step", "attention")[0] if "weights" in line]
    others, _ = collected("-k", "not attention")
    assert others and not any("-attention-" in line for line in others)
    assert any("multi_head_attention" in line for line in others)


def test_x_stops_at_the_first_failure_and_the_step_is_not_scored_as_zero(tmp_path):
    root = student_copy(tmp_path, SOLUTIONS / "mha")
    heads = root / "assignments" / "mha" / "heads.py"
    heads.write_text(heads.read_text().replace(*NO_MERGE_TRANSPOSE))
    out = pytest_in(root, "-x").stdout
    line = step_line(out, "split_heads")
    assert "0.00 /" not in line and re.search(r"-- / 15\.00 +\d of \d checks run", line), line
    assert "partial run" in step_line(out, "total")


def hidden_and_public_ids():
    """Test ids of the public and of the hidden checks, as pytest names them: `step-check`, or
    `assignment-step-check` where several assignments are beside each other."""
    from autograder.engine.assignment import known, step_modules

    public, hidden = set(), set()
    for assignment_id in known():
        for step_id, module in step_modules(assignment_id).items():
            for check in module.CHECKS:
                ids = {f"{step_id}-{check.id}", f"{assignment_id}-{step_id}-{check.id}"}
                (public if check.visibility == "public" else hidden).update(ids)
    return public, hidden - public


@pytest.mark.slow
def test_release_keeps_pytest_cache_for_lf_and_it_holds_only_public_ids(tmp_path):
    """In the student release, --lf reruns the failed checks (shown as a partial run) and the
    cache holds nothing but the ids of public checks."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    from autograder.routes.release import release

    root = release(tmp_path / "release")
    shutil.rmtree(root / "assignments" / "mha")
    shutil.copytree(SOLUTIONS / "mha", root / "assignments" / "mha")
    heads = root / "assignments" / "mha" / "heads.py"
    heads.write_text(heads.read_text().replace(*NO_MERGE_TRANSPOSE))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "pytest", "assignments", *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        ).stdout

    first = run()
    assert "15.00 / 15" not in step_line(first, "split_heads")
    again = run("--lf")
    assert "run-last-failure: rerun previous" in again, again[-3000:]
    assert re.search(r"-- / 15 +\d of \d checks run", step_line(again, "split_heads"))
    assert "partial run" in step_line(again, "total")
    public, hidden = hidden_and_public_ids()
    cached = "\n".join(path.read_text() for path in (root / ".pytest_cache").rglob("*") if path.is_file())
    ids = set()
    for path in (root / ".pytest_cache" / "v" / "cache").glob("*"):
        value = json.loads(path.read_text())
        ids |= set(value if isinstance(value, (list, dict)) else [value])
    assert ids and all(re.fullmatch(r"assignments/test_checks\.py::test_check\[[\w-]+\]", i) for i in ids), ids
    assert {i.split("[")[1][:-1] for i in ids} <= public
    assert not any(f"[{h}]" in cached for h in hidden)


# ---------------------------------------------------------------------------- one mistake, one cause


def failing_messages(result, step):
    return [c.message for c in result.step(step).checks if c.passed is False]


def test_a_syntax_error_is_named_with_its_line_in_the_step_that_imports_the_file(config, submission):
    heads = (SOLUTIONS / "mha" / "heads.py").read_text().replace("B, L, D = x.shape", "B, L, D = x.shape)")
    line = next(n for n, text in enumerate(heads.splitlines(), 1) if "x.shape)" in text)
    result = grade(submission(files={"heads.py": heads}), config)
    dependent = failing_messages(result, "multi_head_attention")
    assert dependent and all(
        m.startswith(f"cannot be graded because mha/heads.py line {line} has a syntax error: B, L, D = x.shape)")
        and "mha/mha.py imports mha/heads.py" in m
        for m in dependent
    ), dependent
    own = failing_messages(result, "split_heads")
    assert all(
        f"mha/heads.py has a syntax error on line {line}" in m and "the line reads: B, L, D = x.shape)" in m
        for m in own
    ), own


FOWARD = (
    "    def forward(self, query, key=None, value=None, pad_mask=None):",
    "    def foward(self, query, key=None, value=None, pad_mask=None):",
)


@pytest.mark.parametrize("isolate", [False, True], ids=["in_process", "sandboxed"])
def test_a_misspelt_forward_is_named_as_a_near_miss(config, submission, isolate):
    mha = (SOLUTIONS / "mha" / "mha.py").read_text().replace(*FOWARD)
    result = grade(submission(files={"mha.py": mha}), config, steps=["multi_head_attention"], isolate=isolate)
    messages = failing_messages(result, "multi_head_attention")
    assert messages and all(
        "MultiHeadAttention has no `forward`, but it has `foward`: a typo?" in m for m in messages
    ), messages
    assert result.step("multi_head_attention").status != "not_implemented"


def test_a_misspelt_function_is_named_as_a_near_miss(config, submission):
    masking = (SOLUTIONS / "mha" / "masking.py").read_text().replace("def causal_mask(", "def casual_mask(")
    result = grade(submission(files={"masking.py": masking}), config, steps=["masking"])
    assert any(
        "mha/masking.py has no `causal_mask`, but it has `casual_mask`" in m
        for m in failing_messages(result, "masking")
    )


def test_pytest_names_a_misspelt_forward_in_one_line(tmp_path):
    root = student_copy(tmp_path, SOLUTIONS / "mha")
    mha = root / "assignments" / "mha" / "mha.py"
    mha.write_text(mha.read_text().replace(*FOWARD))
    out = pytest_in(root, "--step", "multi_head_attention").stdout
    assert "has no `forward`, but it has `foward`" in out
    assert "not implemented yet" not in step_line(out, "multi_head_attention")


def test_softmax_over_the_queries_is_named_as_attentions_mistake_in_masking(config, submission):
    attention = (
        (SOLUTIONS / "mha" / "attention.py")
        .read_text()
        .replace("weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(scores, dim=-2)")
    )
    result = grade(submission(files={"attention.py": attention}), config, steps=["attention", "masking"])
    assert result.step("attention").score < result.step("attention").max_score
    masking = result.step("masking")
    masked = [c for c in masking.checks if c.passed is not True]
    assert masked and all(c.message_id == "mask_needs_attention" for c in masked), [c.message for c in masked]
    assert all("step attention's mistake" in c.message for c in masked)
    # issue 22: a check that cannot be judged scores nothing and stays in the step's maximum
    assert all(c.passed is False and c.points == 0 < c.max_points for c in masked)
    assert 0 < masking.score < masking.max_score == config.step("masking").points


def test_pytest_scores_a_check_blocked_by_another_step_against_the_full_maximum(tmp_path):
    root = student_copy(tmp_path, SOLUTIONS / "mha")
    attention = root / "assignments" / "mha" / "attention.py"
    attention.write_text(attention.read_text().replace(*SOFTMAX_OVER_QUERIES))
    out = pytest_in(root, "--step", "attention", "--step", "masking").stdout
    line = step_line(out, "masking")
    score, maximum = re.search(r"masking\s+([\d.]+) / ([\d.]+)", line).groups()
    assert float(maximum) == 15, line  # issue 22: the same maximum for every student
    assert "checks run" not in line  # scored, not left out as a partial run


def test_score_step_keeps_a_blocked_checks_share_in_the_maximum(config):
    from autograder.engine.assignment import step_modules
    from autograder.engine.check import Fail
    from autograder.engine.runner import score_step

    step = config.step("masking")
    checks = [c for c in step_modules("mha")["masking"].CHECKS if c.visibility == "public"]
    weight = {c.id: step.weights.get(c.id, c.weight) for c in checks}
    waits = Fail("mask_needs_attention", {"name": "w", "low": 0.5, "high": 2.0, "blocked_by": "attention"})
    result = score_step(step, [(c, False, waits) if c.id == "attention_causal" else (c, True, None) for c in checks])
    kept = sum(weight.values()) - weight["attention_causal"]
    assert result.max_score == step.points and result.status == "graded"
    assert result.score == pytest.approx(step.points * kept / sum(weight.values()))
    plain = score_step(
        step,
        [
            (c, False, Fail("not_implemented", {"where": "x"})) if c.id == "attention_causal" else (c, True, None)
            for c in checks
        ],
    )
    assert plain.max_score == step.points and plain.score == pytest.approx(result.score)
    machine = score_step(step, [(c, None, Fail("not_checked", {"reason": "no GPU"})) for c in checks])
    assert machine.status == "not_checked" and machine.max_score == 0  # the machine's, the same for everyone


# ---------------------------------------------------------------------------- clean failure output


def failures_section(out):
    start = out.index("= FAILURES =")
    ends = [out.find(marker, start) for marker in ("= warnings summary", "= short test summary")]
    return out[start : min(e for e in ends if e > 0)]


def test_pytest_traceback_ends_in_the_students_line_without_grader_or_torch_frames(tmp_path):
    root = student_copy(tmp_path, SOLUTIONS / "mha")
    output = root / "assignments" / "mha" / "output.py"
    output.write_text(output.read_text().replace("return self.w_o(merged)", "return self.w_o(merged.T)"))
    section = failures_section(pytest_in(root, "--step", "output_projection").stdout)
    assert "assignments/mha/output.py:" in section and "E   RuntimeError" in section
    assert "autograder" not in section and "torch/nn/modules" not in section, section
    lines = section.splitlines()
    error = next(i for i, line in enumerate(lines) if line.startswith("E   RuntimeError"))
    last_frame = max(i for i, line in enumerate(lines[:error]) if re.match(r"\S+\.py:\d+: in ", line))
    assert lines[last_frame].startswith("assignments/mha/output.py:"), section
    assert " = tensor(" not in section  # no argument dumps


BIG_TENSOR_IN_MESSAGE = ("        return self.w_o(merged)", "        raise ValueError(f'cannot use {merged}')")


def test_a_tensor_in_an_exception_is_summarised(tmp_path, config, submission):
    output = (SOLUTIONS / "mha" / "output.py").read_text()
    assert BIG_TENSOR_IN_MESSAGE[0] in output
    broken = output.replace(*BIG_TENSOR_IN_MESSAGE)
    result = grade(submission(files={"output.py": broken}), config, steps=["output_projection"])
    messages = failing_messages(result, "output_projection")
    summary = re.compile(r"ValueError: cannot use tensor\(shape=\(\d+, \d+, \d+\), dtype=torch\.float64, values -?\d")
    assert messages and all(summary.search(m) and len(m) < 300 for m in messages), messages
    root = student_copy(tmp_path, SOLUTIONS / "mha")
    (root / "assignments" / "mha" / "output.py").write_text(broken)
    out = pytest_in(root, "--step", "output_projection").stdout
    section = failures_section(out)
    assert re.search(r"E   " + summary.pattern, section), section
    # the score table's line went through the grader's summary a second time: unchanged by it
    table = out[out.index("MHA Lab score") :]
    lines = [line for line in table.splitlines() if line.strip().startswith("x ")]
    assert lines and all(summary.search(line) and "shape=()" not in line for line in lines), table
    assert max(len(line) for line in section.splitlines()) < 200


def test_summarising_twice_is_summarising_once_and_shows_the_shape():
    import torch

    from autograder.harness.summary import summarise_text

    values = torch.arange(64, dtype=torch.float32).reshape(2, 4, 8) / 7
    text = f"bad {values!r} and {torch.ones(3, 40, dtype=torch.float64)!r} but {torch.tensor([1, 2])!r}"
    once = summarise_text(text)
    assert summarise_text(once) == once
    assert "bad tensor(shape=(2, 4, 8), dtype=torch.float32, values 0.0000, 0.1429, 0.2857, 0.4286, ...)" in once
    assert "tensor(shape=(3, 40), dtype=torch.float64, values 1., 1., 1., 1., ...)" in once
    assert once.endswith("but tensor([1, 2])")  # a short repr stays as it is
    elided = summarise_text(repr(torch.zeros(500, 3, dtype=torch.int64)))
    assert elided.startswith("tensor(shape=(7+, 3), dtype=torch.int64, values 0, 0, 0, 0, ...)"), elided


# ---------------------------------------------------------------------------- pictures (--plots)

SOFTMAX_OVER_QUERIES = ("weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(scores, dim=-2)")
SCALE_BY_D_K = ("/ math.sqrt(d_k)", "/ d_k")
MASK_INVERTED = ("scores.masked_fill(mask,", "scores.masked_fill(~mask,")


def test_grade_plots_draw_the_failing_attention_weights_and_the_table_points_to_them(tmp_path, config, submission):
    from autograder.engine.results import table
    from autograder.routes.plots import pictures_for

    # a mistake of each step's own (softmax over the queries would leave masking not judged: nothing to draw)
    attention = (SOLUTIONS / "mha" / "attention.py").read_text().replace(*SCALE_BY_D_K).replace(*MASK_INVERTED)
    path = submission(files={"attention.py": attention})
    plain = grade(path, config, steps=["padding", "attention", "masking"])
    assert not any(step.pictures for step in plain.steps)
    result = grade(path, config, steps=["padding", "attention", "masking"], pictures=pictures_for(tmp_path / "plots"))
    drawn = {step.id: step.pictures for step in result.steps}
    assert drawn["padding"] == [] and drawn["attention"] and drawn["masking"]
    shown = table(result)
    for step_id, pictures in drawn.items():  # one line per step names them all
        if pictures:
            assert f"a picture of your attention weights next to the expected ones: {', '.join(pictures)}" in shown
    for picture in drawn["attention"] + drawn["masking"]:
        assert open(picture, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_pytest_plots_option_saves_pictures_where_attention_fails(tmp_path):
    root = student_copy(tmp_path, SOLUTIONS / "mha")
    attention = root / "assignments" / "mha" / "attention.py"
    attention.write_text(attention.read_text().replace(*SOFTMAX_OVER_QUERIES))
    out = pytest_in(root, "--step", "attention", "--plots").stdout
    pictures = sorted((root / "plots").glob("attention-*.png"))
    assert pictures and all(str(p.relative_to(root)) in out for p in pictures), out[-2000:]


# ---------------------------------------------------------------------------- the student notebook


def run_notebook(notebook, directory):
    """Execute `notebook` headless in `directory`; {step id: points its check cell returned}."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.from_dict(notebook)
    notebook.cells.append(nbformat.v4.new_code_cell("import autograder; print(autograder.__file__)", id="where"))
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(directory)}}
    ).execute()
    points = {}
    for cell in notebook.cells:
        if cell.get("id", "").startswith("check-"):
            value = next(o for o in cell.outputs if o.output_type == "execute_result")["data"]["text/plain"]
            points[cell["id"].removeprefix("check-")] = float(value)
    where = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
    return points, where


@pytest.mark.slow
def test_student_notebook_runs_headless_and_scores_as_pytest_does(tmp_path, config):
    from autograder.routes.course import fill_notebook
    from autograder.routes.student_notebook import student_notebook

    notebook = student_notebook(config)
    text = "".join(cell.source for cell in notebook.cells)
    assert "BEGIN HIDDEN" not in text and "hidden=True" not in text
    (tmp_path / "skeleton").mkdir()
    points, where = run_notebook(notebook, tmp_path / "skeleton")
    assert where.startswith(str(tmp_path / "skeleton")), where  # the grader it unpacked, not another
    assert not (tmp_path / "skeleton" / "solutions").exists()
    assert set(points) == {step.id for step in config.steps} and set(points.values()) == {0.0}
    solved = fill_notebook(notebook, {f.name: f.read_text() for f in (SOLUTIONS / "mha").glob("*.py")}, "mha")
    (tmp_path / "solved").mkdir()
    points, _ = run_notebook(solved, tmp_path / "solved")
    out = pytest_in(student_copy(tmp_path / "kit", SOLUTIONS / "mha"), "--cuda").stdout
    for step in config.steps:
        assert f"{points[step.id]:.2f} / {step.points:g}" in step_line(out, step.id), (step.id, points)


# ---------------------------------------------------------------------------- one mistake, one step

MODULE_SCALE = ("/ math.sqrt(q.size(-1))", "/ math.sqrt(self.d_model)")


def test_a_merge_heads_mistake_is_split_heads_own_and_not_the_modules(config, submission):
    heads = (SOLUTIONS / "mha" / "heads.py").read_text().replace(*NO_MERGE_TRANSPOSE)
    result = grade(
        submission(files={"heads.py": heads}),
        config,
        steps=["split_heads", "multi_head_attention"],
        reference=SOLUTIONS,
    )
    assert result.step("split_heads").score < result.step("split_heads").max_score
    module = result.step("multi_head_attention")
    # the module is right with a right merge_heads: charged in split_heads alone (issue 22)
    assert not [c for c in module.checks if c.passed is not True], [c.message for c in module.checks]
    assert module.score == pytest.approx(module.max_score) == config.step(module.id).points


def test_a_module_wrong_on_its_own_loses_its_points_also_beside_a_heads_mistake(config, submission):
    heads = (SOLUTIONS / "mha" / "heads.py").read_text().replace(*NO_MERGE_TRANSPOSE)
    mha = (SOLUTIONS / "mha" / "mha.py").read_text()
    assert MODULE_SCALE[0] in mha
    result = grade(
        submission(files={"heads.py": heads, "mha.py": mha.replace(*MODULE_SCALE)}),
        config,
        steps=["multi_head_attention"],
    )
    module = result.step("multi_head_attention")
    assert "from_earlier_step" not in {c.message_id for c in module.checks}
    assert module.max_score == config.step(module.id).points and module.score < 1
