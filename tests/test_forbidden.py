"""Forbidden shortcuts: calling the PyTorch built-in that a step asks you to write scores zero in
the affected checks, with a message naming the call; the other steps are untouched."""
from autograder.forbidden import scan_source
from conftest import SOLUTIONS, full_marks, grade_with_hidden

SDPA = "torch.nn.functional.scaled_dot_product_attention"


def test_sdpa_in_attention_costs_the_attention_and_masking_checks(config, submission):
    attention = (SOLUTIONS / "mha" / "attention.py").read_text().replace(
        '    """\n    # TODO (attention)',
        '    """\n    if mask is None:\n        import torch.nn.functional as F\n'
        '        eye = torch.eye(k.shape[-2], dtype=q.dtype).expand(*k.shape[:-1], k.shape[-2])\n'
        '        return F.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, eye)\n'
        '    # TODO (attention)')
    result = grade_with_hidden(submission(files={"attention.py": attention}), config)
    assert set(full_marks(result)) == {"attention", "masking"}
    assert result.step("attention").score == 0
    for check in result.step("attention").checks:
        assert SDPA in check.message and "attention" in check.message


def test_hidden_call_is_caught_at_run_time(config, submission):
    """getattr hides the call from the source scan; the run-time watch still sees it."""
    attention = (SOLUTIONS / "mha" / "attention.py").read_text().replace(
        "    weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)\n",
        "    weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)\n"
        "    getattr(torch.nn.functional, 'scaled_' + 'dot_product_attention')(q, k, v)\n")
    result = grade_with_hidden(submission(files={"attention.py": attention}), config)
    assert "attention" in full_marks(result)
    messages = [c.message for c in result.step("attention").checks if c.passed is False]
    assert messages and all("your code called " + SDPA in m for m in messages)


def test_nn_multihead_attention_in_the_module_is_caught(config, submission):
    mha = (SOLUTIONS / "mha" / "mha.py").read_text().replace(
        "        self.dropout = nn.Dropout(dropout)\n",
        "        self.dropout = nn.Dropout(dropout)\n        self.inner = nn.MultiheadAttention(d_model, num_heads)\n")
    result = grade_with_hidden(submission(files={"mha.py": mha}), config)
    assert full_marks(result) == ["multi_head_attention"]
    assert all("torch.nn.MultiheadAttention" in c.message for c in result.step("multi_head_attention").checks)


def test_pad_sequence_in_padding_is_caught(config, submission):
    padding = (SOLUTIONS / "mha" / "padding.py").read_text().replace(
        "import torch\n", "import torch\nfrom torch.nn.utils.rnn import pad_sequence\n", 1)
    result = grade_with_hidden(submission(files={"padding.py": padding}), config)
    assert full_marks(result) == ["padding"]
    assert all("mha/padding.py, line 14 uses torch.nn.utils.rnn.pad_sequence" in c.message
               for c in result.step("padding").checks)


def test_source_scan_ignores_the_students_own_function_of_the_same_name():
    source = ("from .attention import scaled_dot_product_attention\n"
              "def f(q):\n    return scaled_dot_product_attention(q, q, q)\n")
    assert scan_source(source, [SDPA]) == []
