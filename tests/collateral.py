"""The collateral measure (issue 22): for a planted mistake, the steps that lose points besides
its own, and the steps whose maximum moved (a check left out of the score as "blocked").

Two kinds of planted mistakes are measured:

* source mistakes (tests/planted.py: PLANTED and REAL_BUGS): the reference with the mistake
  written into one file, graded as a submission, hidden checks included;
* catalog mistakes (autograder/assignments/<id>/mistakes/): each knob setting of the
  assignment's mistake model, graded check by check with the runner's own parts. A knob acts
  wherever the model computes that part (softmax_dim in attention.py and in the module alike),
  as in a submission whose module calls its own earlier functions.

tests/test_collateral.py asserts the measure and prints the table (`pytest -s -m ""`).
"""

import importlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from autograder.engine.course import config as grading_config
from autograder.engine.course.assignment import known, mistakes_of, step_modules
from autograder.engine.judge.in_process import observe
from autograder.engine.judge.plan import cached_inputs, check_seed, device_mode, warm_up_grader
from autograder.engine.judge.score import score_step
from autograder.engine.judge.verdict import cached_expectation, judge, load_reference, not_checked
from conftest import SOLUTIONS, grade_with_hidden

SEED = 20261121  # the seed of tests/test_mistakes.py
# steps that run the whole module, in every assignment (their checks modules say INTEGRATES)
INTEGRATION_STEPS = {
    step
    for assignment_id in known()
    for step, module in step_modules(assignment_id).items()
    if getattr(module, "INTEGRATES", False)
}


@dataclass
class Measure:
    """What one planted mistake costs, step by step."""

    name: str  # the planted mistake (or catalog mistake and variant)
    own_step: str  # the step the mistake belongs to
    scores: dict  # step id -> (score, max_score) as graded
    points: dict  # step id -> the step's points in grading.yml
    diagnosis: list = field(default_factory=list)  # the own step's diagnoses: [(id, first line)]
    failed: dict = field(default_factory=dict)  # step id -> [(message id, message)] of its failing checks

    @property
    def own_loss(self) -> float:
        score, maximum = self.scores.get(self.own_step, (0.0, 0.0))
        return round(self.points[self.own_step] - score, 2)

    @property
    def collateral(self) -> list:
        """Steps other than its own that scored below their maximum."""
        return [
            step for step, (score, maximum) in self.scores.items() if step != self.own_step and score < maximum - 1e-9
        ]

    @property
    def moved_maxima(self) -> list:
        """Steps whose maximum is not their points in grading.yml (a check left out as blocked)."""
        return [
            step
            for step, (score, maximum) in self.scores.items()
            if maximum and abs(maximum - self.points[step]) > 1e-9
        ]

    def outside_integration(self) -> list:
        return [step for step in self.collateral if step not in INTEGRATION_STEPS]

    def row(self) -> str:
        lost = " ".join(f"{s}:{self.scores[s][0]:g}/{self.scores[s][1]:g}" for s in self.collateral) or "-"
        moved = " ".join(f"{s}:{self.scores[s][1]:g}/{self.points[s]:g}" for s in self.moved_maxima) or "-"
        first = self.diagnosis[0][0] if self.diagnosis else "-"
        return f"{self.name:42s} {self.own_step:21s} {self.own_loss:6g}  {lost:44s} {moved:28s} {first}"


HEADER = f"{'planted mistake':42s} {'own step':21s} {'lost':>6s}  {'collateral (score/max)':44s} {'maxima moved':28s} diagnosis"


def points_of(config) -> dict:
    return {step.id: step.points for step in config.steps}


def planted_submission(root: Path, mistake, package="mha") -> Path:
    """root/<package> = the reference with `mistake` written into its file."""
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(SOLUTIONS / package, root / package)
    target = root / package / mistake.file
    target.write_text(mistake.apply(target.read_text()))
    return root


def measure_planted(mistake, config, root: Path, seed=SEED) -> Measure:
    """Grade the reference with `mistake` planted (in-process, hidden checks too)."""
    result = grade_with_hidden(planted_submission(root, mistake), config, seed=seed)
    own = result.step(mistake.step)
    return Measure(
        mistake.name,
        mistake.step,
        {step.id: (step.score, step.max_score) for step in result.steps},
        points_of(config),
        [(d["id"], d["message"].splitlines()[0][:160]) for d in own.diagnoses],
        {step.id: [(c.message_id, c.message) for c in step.checks if c.passed is False] for step in result.steps},
    )


def catalog_variants(assignment_id: str) -> list:
    """(step, mistake, variant index, knobs) for every knob setting of the assignment's catalog."""
    return [
        (step, mistake, index, knobs)
        for step in step_modules(assignment_id)
        for mistake in mistakes_of(assignment_id, step)
        for index, knobs in enumerate(mistake.variants)
    ]


def grade_model(assignment_id: str, knobs: dict, config, seed=SEED) -> dict:
    """step id -> (score, max_score) of the assignment's mistake model with `knobs`, graded as the
    runner grades a submission (its inputs, expectations, judge and scoring), in this process."""
    # What grade() does first: the simulated device and the decompositions it imports are set up
    # outside any time limit (cold, a first `triu` on 'meta' alone takes seconds on a busy machine).
    warm_up_grader([config])
    model = importlib.import_module(f"autograder.assignments.{assignment_id}.mistakes.model")
    package = model.package(**knobs)
    reference = load_reference(SOLUTIONS, assignment_id)
    modules = config.step_modules()
    scores = {}
    for step in config.steps:
        outcomes = []
        for check in modules[step.id].CHECKS:
            mode = None
            if check.requires == "cuda":
                mode, reason = device_mode(step)
                if mode is None:
                    continue
            inputs = cached_inputs(check, check_seed(check, seed), mode)
            observation = observe(check, package, inputs, step.timeout, step.forbidden)
            expected = cached_expectation(check, inputs, reference, seed)
            fail = judge(check, inputs, observation, expected, step.tolerance)
            outcomes.append((check, None if not_checked(fail) else fail is None, fail))
        result = score_step(step, outcomes)
        scores[step.id] = (result.score, result.max_score)
    return scores


def measure_catalog(assignment_id: str, step: str, mistake, index: int, knobs: dict, seed=SEED) -> Measure:
    config = grading_config.load(assignment=assignment_id)
    return Measure(f"{mistake.id}[{index}]", step, grade_model(assignment_id, knobs, config, seed), points_of(config))
