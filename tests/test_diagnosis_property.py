"""No diagnosis on correct code: for random seeds of the hidden checks, the reference and the
correct variants (tests/variants.py) get full marks and not one diagnosis; and a random
correct computation is never mistaken for a known mistake."""

import shutil

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder.engine.course.assignment import step_modules
from autograder.engine.judge.in_process import observe
from autograder.engine.judge.observation import Observation
from autograder.engine.judge.runner import grade
from autograder.engine.mistakes.diagnosis import Record, diagnose
from conftest import SOLUTIONS, full_marks
from variants import VARIANTS

SLOW_OK = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SLOW_OK
@given(seed=st.integers(0, 2**31 - 1), which=st.sampled_from([None, *VARIANTS]))
@pytest.mark.slow  # an end-to-end run of tens of seconds: CI runs it (pytest -m "")
def test_correct_code_gets_full_marks_and_no_diagnosis(config, tmp_path_factory, seed, which):
    root = tmp_path_factory.mktemp("correct")
    shutil.copytree(SOLUTIONS / "mha", root / "mha", dirs_exist_ok=True)
    if which is not None:
        target = root / "mha" / which.file
        target.write_text(which.apply(target.read_text()))
    result = grade(root, config, reference=SOLUTIONS, seed=seed)
    assert full_marks(result) == []
    assert [(s.id, s.diagnoses) for s in result.steps if s.diagnoses] == []


class FixedAttention:
    """A check-like object running the reference attention on drawn inputs."""

    id, step, visibility = "drawn", "attention", "hidden"

    def observe(self, mha, q, k, v, mask):
        out, weights = mha.attention.scaled_dot_product_attention(q, k, v, mask=mask)
        return {"out": out, "weights": weights}

    def judge(self, inputs, got, expected, tol):
        from autograder.engine.checks.check import compare

        return compare(got, expected, tol)


@settings(max_examples=15, deadline=None)
@given(
    B=st.integers(1, 3),
    H=st.integers(2, 4),
    lq=st.integers(2, 6),
    lk=st.integers(2, 6),
    d_k=st.integers(2, 8),
    d_v=st.integers(2, 6),
    seed=st.integers(0, 10_000),
    masked=st.booleans(),
)
def test_no_known_mistake_explains_a_correct_attention(config, B, H, lq, lk, d_k, d_v, seed, masked):
    """The reference's output on random shapes, reported as failing: no known mistake may be
    named for it. A variant that computes the same on these shapes (scale by sqrt(d_v) when
    d_v == d_k) passes and is not named; one that differs must not pass for the same output."""
    from autograder.engine.judge.verdict import load_reference

    rng = torch.Generator().manual_seed(seed)
    inputs = {
        "q": torch.randn(B, H, lq, d_k, generator=rng, dtype=torch.float64),
        "k": torch.randn(B, H, lk, d_k, generator=rng, dtype=torch.float64),
        "v": torch.randn(B, H, lk, d_v, generator=rng, dtype=torch.float64),
        "mask": (torch.rand(B, 1, 1, lk, generator=rng) < 0.3) if masked else None,
    }
    if masked:
        inputs["mask"][..., 0] = False
    check = FixedAttention()
    reference = load_reference(SOLUTIONS, "mha")
    values = check.observe(reference, **inputs)
    tol = config.step("attention").tolerance
    for step_id in ("attention", "masking"):
        record = Record(check, inputs, Observation(values=values), fail=_fail(values, tol), expected=values)
        module = step_modules("mha")[step_id]
        found = diagnose(
            _without_probes(module), [record], lambda c, p, i: observe(c, p, i), None, tol, reference=SOLUTIONS
        )
        assert [d["id"] for d in found] == ["no_known_mistake"], (step_id, found)


def _fail(values, tol):
    """A real value mismatch on `out` (as if the output had been reported wrong)."""
    from autograder.engine.checks.check import compare

    return compare({**values, "out": values["out"] + 1.0}, values, tol)


def _without_probes(module):
    from types import SimpleNamespace

    return SimpleNamespace(__name__=module.__name__, ASSIGNMENT=module.ASSIGNMENT, PROBES=[])


@pytest.fixture(scope="module")
def config():
    from autograder.engine.course import config as grading_config

    return grading_config.load()


SPELLINGS = {  # one clash of head counts, as operations that students write it with say it
    "matmul": lambda q, k: q @ k.transpose(-2, -1),
    "einsum": lambda q, k: torch.einsum("...ij,...kj->...ik", q, k),
    "bmm": lambda q, k: torch.bmm(q.flatten(0, 1), k.flatten(0, 1).transpose(1, 2)),
    "product": lambda q, k: (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1),
}


def _caught(spelling, q, k):
    """What an observer of a raise records ({"raised", "message"}: checks.check.raised_verdict)."""
    try:
        SPELLINGS[spelling](q, k)
    except Exception as error:  # noqa: BLE001 - the point: whatever the operation raises
        return {"raised": type(error).__name__, "message": str(error)[:200]}
    return {"raised": None}


@settings(max_examples=20, deadline=None)
@given(
    H=st.integers(2, 8),
    H_kv=st.integers(1, 7),
    first=st.sampled_from(sorted(SPELLINGS)),
    second=st.sampled_from(sorted(SPELLINGS)),
)
def test_a_caught_exception_is_evidence_by_its_type_not_its_wording(H, H_kv, first, second):
    """Two spellings of one shape clash raise one type with different wordings: the same
    observation for diagnosis and for the kit's fingerprints. Another type, or no raise, never is."""
    from autograder.engine.mistakes.diagnosis import same_observation
    from autograder.engine.mistakes.fingerprints import observation_fingerprint, observation_matches

    tol = {torch.float64: (1e-7, 1e-9), torch.float32: (1e-4, 1e-5)}
    if H % H_kv == 0 or H_kv > H:
        H_kv = H + 1  # never a multiple: the clash
    q, k = torch.randn(2, H, 3, 4), torch.randn(2, H_kv, 5, 4)
    one, two = Observation(values=_caught(first, q, k)), Observation(values=_caught(second, q, k))
    assert one.values["raised"] == two.values["raised"] == "RuntimeError"
    assert same_observation(one, two, tol)
    assert observation_matches(two, observation_fingerprint(one), tol)
    for other in ({"raised": "TypeError", "message": one.values["message"]}, {"raised": None}):
        assert not same_observation(one, Observation(values=other), tol)
        assert not observation_matches(Observation(values=other), observation_fingerprint(one), tol)
