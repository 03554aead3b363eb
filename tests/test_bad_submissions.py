"""A broken submission still gets its other steps graded, with a clear message for the broken one."""

import pytest

from autograder.engine.course import config as grading_config
from autograder.engine.judge.runner import grade
from conftest import INTEGRATION_STEPS, SOLUTIONS, full_marks, grade_with_hidden, replace_once


def lost(result):
    """Steps below full marks, besides the integration and cuda steps (which run everything)."""
    return set(full_marks(result)) - INTEGRATION_STEPS


def messages(result, step_id):
    return [c.message for c in result.step(step_id).checks if c.passed is False]


def test_syntax_error_costs_only_the_steps_that_need_that_file(config, submission):
    heads = (SOLUTIONS / "mha" / "heads.py").read_text().replace("B, L, D = x.shape", "B, L, D = x.shape)")
    result = grade_with_hidden(submission(files={"heads.py": heads}), config)
    assert lost(result) == {"split_heads"}
    assert "multi_head_attention" in full_marks(result)  # mha.py imports heads.py: by design
    assert result.step("split_heads").score == 0
    assert all("mha/heads.py has a syntax error on line" in m for m in messages(result, "split_heads"))


def test_missing_file_costs_only_its_steps(config, submission):
    result = grade_with_hidden(submission(remove=["attention.py"]), config)
    assert lost(result) == {"attention", "masking"}
    assert all(m == "mha/attention.py is missing" for m in messages(result, "attention"))
    assert result.step("masking").score > 0  # padding_mask and causal_mask still count


def test_wrong_signature_is_reported_as_such(config, submission):
    heads = (
        (SOLUTIONS / "mha" / "heads.py")
        .read_text()
        .replace("def split_heads(x, num_heads):", "def split_heads(x):\n    num_heads = 3")
    )
    result = grade_with_hidden(submission(files={"heads.py": heads}), config)
    assert lost(result) == {"split_heads"}
    assert any("TypeError" in m and "positional argument" in m for m in messages(result, "split_heads"))


def test_missing_name_is_reported(config, submission):
    masking = (SOLUTIONS / "mha" / "masking.py").read_text().replace("def causal_mask(", "def causal(")
    result = grade_with_hidden(submission(files={"masking.py": masking}), config)
    assert any("has no attribute 'causal_mask'" in m for m in messages(result, "masking"))
    assert lost(result) == {"masking"}


def test_broken_package_init_does_not_stop_grading(config, submission):
    result = grade_with_hidden(submission(files={"__init__.py": "raise RuntimeError('boom')\n"}), config)
    assert full_marks(result) == []


def test_no_mha_package_gives_zero_with_a_message(config, tmp_path):
    result = grade(tmp_path, config)
    assert result.score == 0
    assert all("no `mha` package found" in c.message for s in result.steps for c in s.checks if c.passed is False)


def test_import_time_exception_and_system_exit_are_contained(config, submission):
    padding = "raise SystemExit(3)  # at import (sys.exit: `import sys` is refused by the source scan)\n"
    embedding = (
        (SOLUTIONS / "mha" / "embedding.py")
        .read_text()
        .replace("return self.embedding(ids)  # (B, L, d_model)", "raise SystemExit(0)")
    )
    result = grade_with_hidden(submission(files={"padding.py": padding, "embedding.py": embedding}), config)
    assert lost(result) == {"padding", "embedding"}
    assert all("importing mha/padding.py raised SystemExit" in m for m in messages(result, "padding"))


def test_endless_loop_ends_in_a_per_check_timeout(submission):
    text = replace_once(grading_config.default_path().read_text(), "timeout: 10", "timeout: 0.5")
    config = grading_config.parse(text)
    padding = (
        (SOLUTIONS / "mha" / "padding.py")
        .read_text()
        .replace("    if len(sequences) == 0:", "    while True:\n        pass\n    if len(sequences) == 0:")
    )
    result = grade(submission(files={"padding.py": padding}), config, steps=["padding", "embedding"])
    assert full_marks(result) == ["padding"]
    assert all(m.startswith("stopped after 0.5 s") and "mha/padding.py" in m for m in messages(result, "padding"))


def test_student_writing_into_inputs_does_not_change_what_is_judged(config, submission):
    """Student code that modifies its inputs in place only affects its own observation."""
    heads = (
        (SOLUTIONS / "mha" / "heads.py")
        .read_text()
        .replace(
            "    B, H, L, d_k = x.shape\n", "    B, H, L, d_k = x.shape\n    y = x.clone()\n    x.zero_()\n    x = y\n"
        )
    )
    result = grade_with_hidden(submission(files={"heads.py": heads}), config)
    assert full_marks(result) == []


@pytest.mark.parametrize("fill", ["-1e9", "float('-inf')"])
def test_valid_variants_of_the_mask_fill(config, submission, fill):
    """-1e9 is accepted; -inf only loses the all-blocked-row check (NaN rows)."""
    attention = (SOLUTIONS / "mha" / "attention.py").read_text().replace("torch.finfo(scores.dtype).min)", f"{fill})")
    result = grade_with_hidden(submission(files={"attention.py": attention}), config)
    if fill == "-1e9":
        assert full_marks(result) == []
    else:
        assert full_marks(result) == ["masking"]
        failing = [c.id for c in result.step("masking").checks if c.passed is False]
        assert failing == ["all_blocked_row_finite"]


def course_notebook_json():
    import json

    return json.loads((SOLUTIONS / "mha.ipynb").read_text())


def write_notebook(path, notebook):
    import json

    path.write_text(json.dumps(notebook))
    return path


def test_a_course_notebook_is_graded_from_its_writefile_cells(config, tmp_path):
    notebook = course_notebook_json()
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if source.startswith("%%writefile mha/heads.py"):
            cell["source"] = source.replace("B, L, D = x.shape", "B, L, D = x.shape)")  # a syntax error
        if source.startswith("%%writefile mha/embedding.py"):
            cell["cell_type"], cell["outputs"] = "markdown", []  # no longer writes the file
            del cell["execution_count"]
    path = write_notebook(tmp_path / "alice.ipynb", notebook)
    result = grade_with_hidden(path, config)
    assert lost(result) == {"split_heads", "embedding"}
    assert all("mha/heads.py has a syntax error on line" in m for m in messages(result, "split_heads"))
    assert all(m == "mha/embedding.py is missing" for m in messages(result, "embedding"))
    assert result.submission == str(path)


def test_an_nbgrader_submission_directory_is_graded_from_its_notebook(config, tmp_path):
    write_notebook(
        (tmp_path / "bob" / "mha").mkdir(parents=True) or tmp_path / "bob" / "mha" / "mha.ipynb", course_notebook_json()
    )
    assert full_marks(grade_with_hidden(tmp_path / "bob", config)) == []


def test_an_unreadable_notebook_scores_zero_with_missing_files(config, tmp_path):
    path = tmp_path / "carol.ipynb"
    path.write_text('{"cells": [ not json')
    result = grade(path, config)
    assert result.score == 0
    assert all(m.endswith("is missing") for m in messages(result, "padding"))
