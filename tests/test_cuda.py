"""The cuda step: real GPU when present, a simulated CUDA device otherwise.

Each bad submission below is right on the CPU, so it must lose points in the cuda step only."""

import pytest

from autograder.engine import config as grading_config
from autograder.harness import fake_cuda
from autograder.engine.runner import cuda_available, grade
from conftest import SOLUTIONS, full_marks, grade_with_hidden


def with_mode(mode):
    text = grading_config.default_path().read_text().replace("mode: auto", f"mode: {mode}")
    return grading_config.parse(text)


BAD_ON_CUDA = {
    "mask_built_by_torch_ones_in_forward": {
        "mha.py": (
            "blocked = torch.zeros(Lq, Lk, dtype=torch.bool, device=scores.device)",
            "blocked = torch.ones(Lq, Lk).triu(1).bool() & False",
        )
    },
    "mask_kept_as_plain_attribute": {
        "mha.py": [
            (
                "        self.dropout = nn.Dropout(dropout)\n",
                "        self.dropout = nn.Dropout(dropout)\n"
                "        self.future = torch.triu(torch.ones(64, 64, dtype=torch.bool), diagonal=1)\n",
            ),
            ("blocked = torch.ones_like(blocked).triu(diagonal=1)  # (Lq, Lk)", "blocked = self.future[:Lq, :Lk]"),
        ]
    },
    "cpu_call_in_forward": {
        "output.py": ("return self.w_o(merged)  # (B, L, D)", "return self.w_o(merged.cpu())  # (B, L, D)")
    },
    "cpu_index_passed_to_an_embedding": {
        "embedding.py": (
            "return self.embedding(ids)  # (B, L, d_model)",
            "import torch\n        pad = self.embedding(torch.tensor([self.embedding.padding_idx]))  # a CPU index\n"
            "        return self.embedding(ids) + 0 * pad",
        )
    },
}
LEGAL_ITEM = {
    "mha.py": (
        "        if pad_mask is not None:\n",
        "        if pad_mask is not None and bool(pad_mask.any().item()):\n",
    )
}


def make(submission, changes):
    files = {}
    for name, patches in changes.items():
        source = (SOLUTIONS / "mha" / name).read_text()
        for old, new in patches if isinstance(patches, list) else [patches]:
            assert source.count(old) == 1, old
            source = source.replace(old, new)
        files[name] = source
    return submission(files=files)


def test_reference_passes_simulated_mode(config):
    result = grade_with_hidden(SOLUTIONS, with_mode("simulated"))
    step = result.step("cuda")
    assert step.score == step.max_score == 5
    assert step.mode == "mode_simulated"
    assert result.to_json()["steps"][-1]["mode"] == "simulated"


@pytest.mark.parametrize("name", sorted(BAD_ON_CUDA))
def test_device_mistakes_fail_the_cuda_step_only_in_simulated_mode(submission, name):
    result = grade_with_hidden(make(submission, BAD_ON_CUDA[name]), with_mode("simulated"))
    assert full_marks(result) == ["cuda"], [
        (s.id, [c.message for c in s.checks if c.passed is False]) for s in result.steps if s.score < s.max_score
    ]


def test_device_mismatch_message_says_where_and_what_to_do(submission):
    result = grade_with_hidden(
        make(submission, BAD_ON_CUDA["mask_built_by_torch_ones_in_forward"]), with_mode("simulated")
    )
    message = next(c.message for c in result.step("cuda").checks if c.passed is False)
    assert "a CPU tensor met a tensor on cuda (mha/mha.py, line" in message and "device=x.device" in message
    assert [d["id"] for d in result.step("cuda").diagnoses] == ["cpu_tensor_in_forward"]


def test_plain_attribute_is_diagnosed_as_not_a_buffer(submission):
    result = grade_with_hidden(make(submission, BAD_ON_CUDA["mask_kept_as_plain_attribute"]), with_mode("simulated"))
    assert [d["id"] for d in result.step("cuda").diagnoses] == ["mask_not_buffer"]


@pytest.mark.xfail(strict=True, reason="the simulated device has no tensor values yet: .item() stops it")
def test_a_correct_item_call_is_not_a_device_error(submission):
    result = grade_with_hidden(make(submission, LEGAL_ITEM), with_mode("simulated"))
    assert full_marks(result) == []


def test_a_scenario_a_simulation_without_values_cannot_finish_scores_nothing_and_says_why(submission, monkeypatch):
    """On fake tensors without values (the meta fallback), .item() stops the scenario: the check
    has no verdict, so it scores nothing against the full maximum (issue 22: never a moving
    maximum), and says why; the scenarios that did finish still count."""
    monkeypatch.setitem(fake_cuda._state, "device", "meta")
    result = grade_with_hidden(make(submission, LEGAL_ITEM), with_mode("simulated"))
    check = next(c for c in result.step("cuda").checks if c.id == "multi_head_attention")
    assert check.passed is False and check.points == 0 < check.max_points
    assert check.message_id == "simulation_stopped" and ".item()" in check.message
    assert 0 < result.step("cuda").score < result.step("cuda").max_score == 5


def test_meta_fallback_without_a_compiler(submission, monkeypatch):
    """No C++ compiler: fake tensors on 'meta' still catch masks made on the CPU in forward,
    and the step says which fallback ran."""
    monkeypatch.setitem(fake_cuda._state, "device", "meta")
    reference = grade_with_hidden(SOLUTIONS, with_mode("simulated"))
    assert full_marks(reference) == [] and reference.step("cuda").mode == "mode_meta"
    assert "meta" in reference.to_json()["steps"][-1]["mode_note"]
    for name in ("mask_built_by_torch_ones_in_forward", "mask_kept_as_plain_attribute", "cpu_call_in_forward"):
        result = grade_with_hidden(make(submission, BAD_ON_CUDA[name]), with_mode("simulated"))
        assert full_marks(result) == ["cuda"], name


def test_mode_off_and_real_without_gpu_are_not_checked():
    off = grade(SOLUTIONS, with_mode("off")).step("cuda")
    assert off.status == "not_checked" and off.max_score == 0 and "turned off" in off.checks[0].message
    if not cuda_available():
        real = grade(SOLUTIONS, with_mode("real")).step("cuda")
        assert real.status == "not_checked" and "no CUDA device" in real.checks[0].message


def test_guard_library_is_built_once_and_cached():
    library = fake_cuda.cache_dir() / "fake_cuda_guard.so"
    if fake_cuda.simulated_device() != "cuda":
        pytest.skip("no C++ compiler here: the meta fallback is in use")
    assert library.exists()


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", [None, *sorted(BAD_ON_CUDA)])
def test_real_and_simulated_modes_agree(submission, name):
    path = make(submission, BAD_ON_CUDA[name]) if name else SOLUTIONS
    real = grade_with_hidden(path, with_mode("real"), seed=3).step("cuda")
    simulated = grade_with_hidden(path, with_mode("simulated"), seed=3).step("cuda")
    assert real.mode == "mode_real"
    assert [c.passed for c in real.checks] == [c.passed for c in simulated.checks], name


def test_backward_still_works_after_the_fake_guard_is_loaded_first():
    """Regression: the autograd engine started a thread for the fake CUDA device on the first
    backward after the guard was registered, which aborted or hung the process at random."""
    import subprocess
    import sys

    code = (
        "from autograder.harness.fake_cuda import simulated_device; import torch\n"
        "simulated_device()\n"
        "for _ in range(20):\n"
        "    w = torch.randn(5, 3, requires_grad=True); (w * 2).sum().backward()\n"
        "print('ok')\n"
    )
    for _ in range(3):
        completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert completed.returncode == 0 and completed.stdout.strip() == "ok", completed.stderr[-2000:]
