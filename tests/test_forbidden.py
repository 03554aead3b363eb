"""Forbidden shortcuts: calling the PyTorch built-in that a step asks you to write scores zero in
the affected checks, with a message naming the call; the other steps are untouched."""

import pytest

from autograder.engine.scan.forbidden import scan_source, scan_tampering
from conftest import SOLUTIONS, full_marks, grade_with_hidden, replace_once

SDPA = "torch.nn.functional.scaled_dot_product_attention"


def test_sdpa_in_attention_costs_the_attention_and_masking_checks(config, submission):
    """One mistake, one charge: the module that calls the student's attention is not charged for
    the forbidden call inside it (the module's run with attention written out makes none)."""
    attention = (
        (SOLUTIONS / "mha" / "attention.py")
        .read_text()
        .replace(
            '    """\n    # TODO (attention)',
            '    """\n    if mask is None:\n        import torch.nn.functional as F\n'
            "        eye = torch.eye(k.shape[-2], dtype=q.dtype).expand(*k.shape[:-1], k.shape[-2])\n"
            "        return F.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, eye)\n"
            "    # TODO (attention)",
        )
    )
    result = grade_with_hidden(submission(files={"attention.py": attention}), config)
    assert set(full_marks(result)) == {"attention", "masking"}
    assert result.step("attention").score == 0
    for check in result.step("attention").checks:
        assert SDPA in check.message and "attention" in check.message


def attention_calling(call):
    """The reference attention with `call` made after its softmax (right values, a forbidden call)."""
    return (
        (SOLUTIONS / "mha" / "attention.py")
        .read_text()
        .replace(
            "    weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)\n",
            f"    weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)\n    {call}\n",
        )
    )


def module_through_attention(extra=""):
    """The reference module with its attention done by the package's own attention function."""
    return (
        (SOLUTIONS / "mha" / "mha.py")
        .read_text()
        .replace("from .heads import", "from .attention import scaled_dot_product_attention\nfrom .heads import", 1)
        .replace(
            "        scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)\n\n"
            "        weights = torch.softmax(scores, dim=-1)  # (B, H, Lq, Lk)\n",
            "        _, weights = scaled_dot_product_attention(q, k, v, mask=blocked)  # (B, H, Lq, Lk)\n" + extra,
        )
    )


def test_a_module_is_not_charged_for_a_forbidden_call_inside_the_attention_it_calls(config, submission):
    """One mistake, one charge: the call is inside the attention function, which the attention
    and masking steps charge; the module's run with attention written out makes none."""
    files = {"attention.py": attention_calling(f"{SDPA}(q, k, v)"), "mha.py": module_through_attention()}
    result = grade_with_hidden(submission(files=files), config)
    assert set(full_marks(result)) == {"attention", "masking"}


def test_a_module_that_also_calls_sdpa_itself_is_charged(config, submission):
    """The same module with a call of its own: the run with attention written out still makes
    one, so the module's checks are charged too."""
    files = {
        "attention.py": attention_calling(f"{SDPA}(q, k, v)"),
        "mha.py": module_through_attention(f"        {SDPA}(q, k, v)\n"),
    }
    result = grade_with_hidden(submission(files=files), config)
    assert set(full_marks(result)) == {"attention", "masking", "multi_head_attention"}
    assert all(SDPA in c.message for c in result.step("multi_head_attention").checks if c.passed is False)


def test_hidden_call_is_caught_at_run_time(config, submission):
    """getattr hides the call from the source scan; the run-time watch still sees it."""
    attention = (
        (SOLUTIONS / "mha" / "attention.py")
        .read_text()
        .replace(
            "    weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)\n",
            "    weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)\n"
            "    getattr(torch.nn.functional, 'scaled_' + 'dot_product_attention')(q, k, v)\n",
        )
    )
    result = grade_with_hidden(submission(files={"attention.py": attention}), config)
    assert "attention" in full_marks(result)
    messages = [c.message for c in result.step("attention").checks if c.passed is False]
    assert messages and all("your code called " + SDPA in m for m in messages)


def test_nn_multihead_attention_in_the_module_is_caught(config, submission):
    mha = (
        (SOLUTIONS / "mha" / "mha.py")
        .read_text()
        .replace(
            "        self.dropout = nn.Dropout(dropout)\n",
            "        self.dropout = nn.Dropout(dropout)\n        self.inner = nn.MultiheadAttention(d_model, num_heads)\n",
        )
    )
    result = grade_with_hidden(submission(files={"mha.py": mha}), config)
    assert full_marks(result) == ["multi_head_attention"]
    assert all("torch.nn.MultiheadAttention" in c.message for c in result.step("multi_head_attention").checks)


def test_pad_sequence_in_padding_is_caught(config, submission):
    padding = (
        (SOLUTIONS / "mha" / "padding.py")
        .read_text()
        .replace("import torch\n", "import torch\nfrom torch.nn.utils.rnn import pad_sequence\n", 1)
        .replace(
            '    """\n    # TODO (padding)', '    """\n    pad_sequence([torch.tensor([1])])\n    # TODO (padding)'
        )
    )
    line = (
        padding.splitlines().index("from torch.nn.utils.rnn import pad_sequence") + 1
    )  # the module docstring's length
    result = grade_with_hidden(submission(files={"padding.py": padding}), config)
    assert full_marks(result) == ["padding"]
    assert all(
        f"your code called torch.nn.utils.rnn.pad_sequence (mha/padding.py, line {line})" in c.message
        for c in result.step("padding").checks
    )


def test_a_forbidden_name_the_graded_code_never_calls_costs_nothing(config, submission):
    """Forbidden means used by graded code: an import alone, a __main__ self-test and a test
    function are not (issue 12: a self-test comparing with SDPA cost 30 points)."""
    attention = (SOLUTIONS / "mha" / "attention.py").read_text() + (
        "\n\nimport torch.nn.functional as F\n\n\n"
        "def test_against_torch():\n"
        "    q = torch.randn(2, 3, 4)\n"
        "    assert torch.allclose(scaled_dot_product_attention(q, q, q)[0], F.scaled_dot_product_attention(q, q, q))\n"
        '\n\nif __name__ == "__main__":\n'
        "    import inspect  # a self-test may use anything\n"
        "    test_against_torch()\n"
        "    print(F.scaled_dot_product_attention(torch.ones(1, 2, 2), torch.ones(1, 2, 2), torch.ones(1, 2, 2)))\n"
    )
    result = grade_with_hidden(submission(files={"attention.py": attention}), config)
    assert full_marks(result) == []


def test_a_call_from_a_helper_module_in_a_subfolder_is_caught_and_located(config, submission):
    helper = (
        "import torch.nn.functional as F\n\n\n"
        "def attend(q, k, v):\n"
        "    return F.scaled_dot_product_attention(q, k, v)\n"
    )
    mha = replace_once(
        (SOLUTIONS / "mha" / "mha.py").read_text(),
        "from .heads import merge_heads, split_heads\n",
        "from .heads import merge_heads, split_heads\nfrom .tools.helpers import attend\n",
    )
    mha = replace_once(
        mha,
        "        self.dropout = nn.Dropout(dropout)\n",
        "        self.dropout = nn.Dropout(dropout)\n        self.attend = attend\n",
    )
    mha = replace_once(
        mha, "    def forward(", "    def _unused(self, q):\n        return self.attend(q, q, q)\n\n    def forward("
    )
    root = submission(files={"mha.py": mha})
    (root / "mha" / "tools").mkdir()
    (root / "mha" / "tools" / "helpers.py").write_text(helper)
    assert full_marks(grade_with_hidden(root, config)) == []  # imported but never called: fine
    called = replace_once(
        mha,
        "        key = query if key is None else key\n",  # the first line of forward
        "        self._unused(torch.ones(1, 1, 2, 2, dtype=torch.float64))\n"
        "        key = query if key is None else key\n",
    )
    (root / "mha" / "mha.py").write_text(called)
    result = grade_with_hidden(root, config)
    assert full_marks(result) == ["multi_head_attention"]
    assert all(
        SDPA + " (mha/tools/helpers.py, line 5)" in c.message for c in result.step("multi_head_attention").checks
    )


def test_tampering_in_a_helper_module_costs_the_steps_that_import_it(config, submission):
    attention = (
        (SOLUTIONS / "mha" / "attention.py")
        .read_text()
        .replace("\nimport torch\n", "\nimport torch\n\nfrom .util import unused  # noqa: F401\n", 1)
    )
    root = submission(files={"attention.py": attention})
    (root / "mha" / "util.py").write_text("import torch\n\nunused = torch._C.DisableTorchFunction\n")
    (root / "mha" / "scratch.py").write_text("import gc\n")  # imported by nothing: never runs
    result = grade_with_hidden(root, config)
    assert set(full_marks(result)) == {"attention", "masking"}
    for step in ("attention", "masking"):
        assert result.step(step).score == 0
        assert all("mha/util.py, line 3: `torch._C`" in c.message for c in result.step(step).checks)
    assert result.step("padding").score == result.step("padding").max_score


def test_source_scan_ignores_the_students_own_function_of_the_same_name():
    source = (
        "from .attention import scaled_dot_product_attention\n"
        "def f(q):\n    return scaled_dot_product_attention(q, q, q)\n"
    )
    assert scan_source(source, [SDPA]) == []


def test_source_scan_sees_names_built_from_strings():
    source = (
        "import torch.nn.functional as F\n"
        "attend = getattr(F, 'scaled_dot_' + 'product_attention')\n"
        "other = getattr(F, ''.join(['scaled_dot', '_product_attention']))\n"
    )
    assert scan_source(source, [SDPA]) == [(SDPA, 2), (SDPA, 3)]


@pytest.mark.parametrize(
    "code",
    [
        "import torch\nwith torch._C.DisableTorchFunction():\n    pass\n",
        "import torch\nC = getattr(torch, '_' + 'C')\n",
        "from torch.utils._python_dispatch import _disable_current_modes\n",
        "from torch.overrides import TorchFunctionMode\n",
        "import sys\nframe = sys._getframe(1)\n",
        "def f():\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n        return e.__traceback__.tb_frame.f_back\n",
        "x = ().__class__.__base__.__subclasses__()\n",
        "__import__('autograder')\n",
        "exec('import ' + 'gc')\n",
        "import importlib\n",
        "import torch\nop = torch.ops.aten.softmax.int.decompose\n",
        "import mha.attention as me\nme.__name__ = '__main__'\n",
        "__name__ = '__main__'\nif __name__ == '__main__':\n    pass\n",
        # machinery an attention exercise has no use for (the allow-list: tests/test_source_policy.py)
        "import torch\nx = torch.ops.aten.bmm\n",
        "import torch\ncompiled = torch.compile\n",
        "import re\n",
    ],
)
def test_tampering_scan_flags_ways_to_silence_the_watch(code):
    assert scan_tampering(code)


@pytest.mark.parametrize(
    "code",
    [
        "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n",
        "class M:\n    def w(self, name):\n        return getattr(self, f'w_{name}')\n",
        "def f(self):\n    return self.__class__.__name__, type(self).__name__\n",
        "import torch\nx = torch.bmm\nwith torch.no_grad():\n    pass\n",
        '"""Never import gc or call torch._C."""\n# exec(...) would be bad\n',
        "if __name__ == '__main__':\n    import inspect\n    exec('print(1)')\n",
        "def test_me():\n    import gc\n",
        "class TestThing:\n    def test_a(self):\n        import inspect\n",
        "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\nx = torch.ones(2).to(device).cpu()\n",
    ],
)
def test_tampering_scan_leaves_ordinary_code_alone(code):
    assert scan_tampering(code) == []
