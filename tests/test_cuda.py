"""The cuda step: real GPU when present, a simulated CUDA device otherwise.

Each bad submission below is right on the CPU, so it must lose points in the cuda step only."""

import pytest

from autograder.engine.course import config as grading_config
from autograder.engine.judge.plan import cuda_available
from autograder.engine.judge.runner import grade
from autograder.harness import fake_cuda
from conftest import SOLUTIONS, full_marks, grade_with_hidden
from planted import PLANTED, REAL_BUGS


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
    # right on the CPU, other numbers on a GPU: the device run must agree with the CPU run
    "branch_on_is_cuda": {
        "output.py": (
            "return self.w_o(merged)  # (B, L, D)",
            "return self.w_o(merged) * (2.0 if merged.is_cuda else 1.0)",
        )
    },
}
# Code that does something else on a GPU than on the CPU, and the failure it gets.
DIFFERS_FROM_CPU = {
    "branch_on_is_cuda": (BAD_ON_CUDA["branch_on_is_cuda"], "device_values_differ"),
    "other_dtype_on_cuda": (
        {
            "output.py": (
                "return self.w_o(merged)  # (B, L, D)",
                "return self.w_o(merged).float() if merged.is_cuda else self.w_o(merged)",
            )
        },
        "device_run_differs",
    ),
    "raises_on_the_cpu_only": (
        {
            "output.py": (
                "return self.w_o(merged)  # (B, L, D)",
                "if not merged.is_cuda:\n            raise ValueError('runs on a GPU only')\n        return self.w_o(merged)",
            )
        },
        "failed_on_cpu_only",
    ),
}
# Mistakes in values or shapes, judged in their own steps: the cuda step, which compares the
# device run with the same code's CPU run, has nothing to charge (issue 22: no double charge).
NOT_DEVICE_MISTAKES = [
    "out_missing_bias",  # a bias-less layer: the grader's biased weights no longer need to fit
    "mha_out_missing_bias",
    "rb_mha_layers_made_in_forward",  # fresh layers in forward: the same seed on both runs
    "merge_view_not_contiguous",
]
# Code that raises the same exception at the same place on the CPU and on the device: nothing shows
# that it runs on the device, so the scenario's cuda check fails too, the exception named (the step
# agrees only on values; cuda is an integration step). name -> (changes or a planted mistake's
# name, the failing cuda check, the file named).
RAISES_ON_BOTH_DEVICES = {
    # a device mistake (a mask made on the CPU) behind an exception both devices raise before it
    "raises_before_a_cpu_mask": (
        {
            "mha.py": [
                (
                    "        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)\n",
                    "        if pad_mask is not None and bool(pad_mask.any()):\n"
                    "            raise ValueError('padding is not supported')\n"
                    "        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)\n",
                ),
                (
                    "blocked = torch.zeros(Lq, Lk, dtype=torch.bool, device=scores.device)  # (Lq, Lk)",
                    "blocked = torch.zeros(Lq, Lk, dtype=torch.bool)  # (Lq, Lk)",
                ),
            ]
        },
        "multi_head_attention",
        "mha/mha.py",
    ),
    # the same, raised in a helper of another step's file (a red team's: a padding check that raises
    # at that place too excused every scenario while a step's charge excused it)
    "raises_in_another_steps_helper": (
        {
            "padding.py": (
                "def pad_batch(",
                "def tripwire(flag):\n    if flag:\n        raise ValueError('bad batch')\n\n\ndef pad_batch(",
            ),
            "mha.py": [
                (
                    "from .heads import merge_heads, split_heads",
                    "from .heads import merge_heads, split_heads\nfrom .padding import tripwire",
                ),
                (
                    "        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)\n",
                    "        tripwire(pad_mask is not None and bool(pad_mask.any()))\n"
                    "        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)\n",
                ),
                (
                    "blocked = torch.zeros(Lq, Lk, dtype=torch.bool, device=scores.device)  # (Lq, Lk)",
                    "blocked = torch.zeros(Lq, Lk, dtype=torch.bool)  # (Lq, Lk)",
                ),
            ],
        },
        "multi_head_attention",
        "mha/padding.py",
    ),
    "rb_mha_mask_missing_head_axis": ("rb_mha_mask_missing_head_axis", "multi_head_attention", "mha/mha.py"),
    "rb_heads_summed": ("rb_heads_summed", "output_projection", "mha/output.py"),  # output_projection's too
    "k_not_transposed": ("k_not_transposed", "attention", "mha/attention.py"),  # the attention step's too
}
# An earlier function wrong only on the judge's probe, so that the module's scenario would be judged
# with it written out, while it moves the module's result to the CPU (a red team's): the device
# mistake is the student's own, on the device alone, and is never excused.
WRONG_ON_THE_PROBE_ONLY = {
    "heads.py": [
        ("def merge_heads(x):", "import torch\n\n\ndef merge_heads(x):"),
        (
            "    return x.view(B, L, H * d_k)  # (B, L, D)",
            "    out = x.view(B, L, H * d_k)  # (B, L, D)\n"
            "    if out.dtype == torch.float64 and tuple(out.shape) == (2, 3, 6) and float(out.sum()) == 630.0:\n"
            "        return out + 1\n"
            "    return out.cpu()",
        ),
    ],
    "mha.py": [
        (
            "        out = merge_heads(weights @ v)  # (B, Lq, D)\n",
            "        out = (weights @ v).transpose(1, 2).reshape(query.shape[0], Lq, self.d_model)  # (B, Lq, D)\n",
        ),
        (
            "        return self.w_o(out)  # (B, Lq, D)",
            "        return merge_heads(split_heads(self.w_o(out), self.num_heads))  # (B, Lq, D)",
        ),
    ],
}
# A plain tensor attribute that the module moves itself, in _apply (which .to() calls): right on a GPU.
MOVED_IN_APPLY = {
    "mha.py": [
        (
            "        self.dropout = nn.Dropout(dropout)\n",
            "        self.dropout = nn.Dropout(dropout)\n"
            "        self.future = torch.triu(torch.ones(64, 64, dtype=torch.bool), diagonal=1)\n\n"
            "    def _apply(self, fn, *args, **kwargs):\n"
            "        self.future = fn(self.future)\n"
            "        return super()._apply(fn, *args, **kwargs)\n",
        ),
        ("blocked = torch.ones_like(blocked).triu(diagonal=1)  # (Lq, Lk)", "blocked = self.future[:Lq, :Lk]"),
    ]
}
# .item() on the queries, then the causal mask made on the CPU: the device mistake comes after it
ITEM_THEN_CPU_MASK = {
    "mha.py": [
        (
            "        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)\n",
            "        if bool(torch.isnan(q).any().item()):\n"
            "            raise ValueError('nan in the queries')\n"
            "        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)\n",
        ),
        (
            "blocked = torch.ones_like(blocked).triu(diagonal=1)  # (Lq, Lk)",
            "blocked = torch.ones(Lq, Lk, dtype=torch.bool).triu(diagonal=1)  # (Lq, Lk)",
        ),
    ]
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


def test_a_correct_item_call_is_not_a_device_error(submission):
    """The simulated device carries values: .item(), an if on a tensor and .tolist() work there."""
    result = grade_with_hidden(make(submission, LEGAL_ITEM), with_mode("simulated"))
    assert full_marks(result) == []


def test_a_device_mistake_after_an_item_call_is_still_caught(submission):
    """A simulation without values stopped at the .item() (simulation_stopped) and never saw the
    CPU mask made after it."""
    result = grade_with_hidden(make(submission, ITEM_THEN_CPU_MASK), with_mode("simulated"))
    assert full_marks(result) == ["cuda"]
    check = next(c for c in result.step("cuda").checks if c.id == "multi_head_attention")
    assert check.message_id == "device_mismatch" and "mha/mha.py, line" in check.message
    assert [d["id"] for d in result.step("cuda").diagnoses] == ["cpu_tensor_in_forward"]


@pytest.mark.parametrize("name", sorted(DIFFERS_FROM_CPU))
def test_a_device_run_that_differs_from_the_cpu_run_fails(submission, name):
    """Code that does something else on a GPU than on the CPU (here: it asks x.is_cuda) fails the
    cuda check that runs it, with a message that says so; the steps judged on the CPU do not notice."""
    changes, message_id = DIFFERS_FROM_CPU[name]
    result = grade_with_hidden(make(submission, changes), with_mode("simulated"))
    failed = [c for c in result.step("cuda").checks if c.passed is False]
    assert [c.id for c in failed] == ["output_projection"]
    assert failed[0].message_id == message_id, failed[0].message
    assert "x.is_cuda" in failed[0].message


@pytest.mark.parametrize("name", NOT_DEVICE_MISTAKES)
@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_a_mistake_that_is_not_about_the_device_costs_nothing_in_cuda(submission, name):
    """The cuda step builds the student's modules with their own weights and compares the device
    run with the CPU run of the same module: a value mistake (its own step's) changes both alike."""
    mistake = next(m for m in PLANTED + REAL_BUGS if m.name == name)
    result = grade_with_hidden(submission(mistake), with_mode("simulated"))
    cuda = result.step("cuda")
    assert cuda.score == cuda.max_score, [(c.id, c.message) for c in cuda.checks if c.passed is False]
    assert mistake.step in full_marks(result)


@pytest.mark.parametrize("name", sorted(RAISES_ON_BOTH_DEVICES))
def test_code_that_raises_on_both_devices_fails_the_cuda_check_with_the_error_named(submission, name):
    """The cuda step agrees only on values: code raising the same exception at the same place on
    the CPU and on the device shows nothing of the device (a mask made on the CPU may wait behind
    it), so the scenario's cuda check fails, naming the exception and where it was raised."""
    changes, check_id, file = RAISES_ON_BOTH_DEVICES[name]
    if isinstance(changes, str):
        path = submission(next(m for m in PLANTED + REAL_BUGS if m.name == changes))
    else:
        path = make(submission, changes)
    result = grade_with_hidden(path, with_mode("simulated"))
    failed = [c for c in result.step("cuda").checks if c.passed is False]
    assert [c.id for c in failed] == [check_id], [(c.id, c.message) for c in failed]
    assert failed[0].message_id == "failed_on_both_devices", failed[0].message
    assert f"{file}, line" in failed[0].message and "Error" in failed[0].message


def test_a_device_mistake_beside_an_earlier_function_wrong_on_its_probe_is_not_excused(submission):
    """The written-out run judges the module only where the module's own run raised on both devices
    inside the function written out: a result moved to the CPU fails, wrong probe or not."""
    changes = WRONG_ON_THE_PROBE_ONLY
    result = grade_with_hidden(make(submission, changes), with_mode("simulated"))
    check = next(c for c in result.step("cuda").checks if c.id == "multi_head_attention")
    assert check.passed is False and check.message_id == "device", check.message


def test_a_module_that_moves_its_own_tensors_in_apply_passes(submission):
    """.to() on the simulated device is the module's own .to(): a module that moves a plain tensor
    attribute in _apply, as .to() on a GPU then does, gets full marks."""
    result = grade_with_hidden(make(submission, MOVED_IN_APPLY), with_mode("simulated"))
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


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
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


AGREEING = {
    **{name: changes for name, changes in BAD_ON_CUDA.items()},
    **{name: changes for name, (changes, _) in DIFFERS_FROM_CPU.items()},
    "item_then_cpu_mask": ITEM_THEN_CPU_MASK,
    "moved_in_apply": MOVED_IN_APPLY,
    "legal_item": LEGAL_ITEM,
    **{name: name for name in NOT_DEVICE_MISTAKES},
    **{name: changes for name, (changes, _, _) in RAISES_ON_BOTH_DEVICES.items()},
    "wrong_on_the_probe_only": WRONG_ON_THE_PROBE_ONLY,
}


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", [None, *AGREEING])
def test_real_and_simulated_modes_agree(submission, name):
    """The same verdicts on a real GPU (values compared but dropout's, gradients too) and on the
    simulated device."""
    if name is None:
        path = SOLUTIONS
    elif isinstance(AGREEING[name], str):
        path = submission(next(m for m in PLANTED + REAL_BUGS if m.name == name))
    else:
        path = make(submission, AGREEING[name])
    real = grade_with_hidden(path, with_mode("real"), seed=3).step("cuda")
    simulated = grade_with_hidden(path, with_mode("simulated"), seed=3).step("cuda")
    assert real.mode == "mode_real"
    assert [(c.id, c.passed) for c in real.checks] == [(c.id, c.passed) for c in simulated.checks], [
        (c.id, c.message) for c in real.checks + simulated.checks if c.passed is False
    ]
    assert [c.message_id for c in real.checks] == [c.message_id for c in simulated.checks]
    if name is None:
        assert real.score == real.max_score == 5


@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
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
