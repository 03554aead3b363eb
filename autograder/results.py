"""Grading results and the three ways they are shown: a text table, JSON, and a CSV of a batch."""
import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from . import messages


@dataclass
class CheckResult:
    id: str
    passed: bool  # None: not checked on this machine
    points: float
    max_points: float
    visibility: str
    message: str = ""
    message_id: str = None


@dataclass
class StepResult:
    id: str
    title: str
    score: float
    max_score: float
    checks: list
    status: str = "graded"  # graded | not_implemented | not_checked
    diagnoses: list = field(default_factory=list)  # [{"id", "message"}], filled by diagnosis
    mode: str = None  # for device steps: message id of how it was graded (mode_real, mode_simulated, ...)


@dataclass
class GradeResult:
    assignment: str
    submission: str
    steps: list
    seed: int = None
    output: str = ""  # what the student's code printed (cut), shown, never parsed
    sandbox: list = field(default_factory=list)  # isolation layers that were in force

    @property
    def score(self):
        return sum(step.score for step in self.steps)

    @property
    def max_score(self):
        return sum(step.max_score for step in self.steps)

    def step(self, step_id):
        return next(step for step in self.steps if step.id == step_id)

    def to_json(self):
        """The result as the documented JSON object (see README: 'JSON result')."""
        return {
            "assignment": self.assignment,
            "submission": self.submission,
            "score": _round(self.score),
            "max_score": _round(self.max_score),
            "seed": self.seed,
            "output": self.output,
            "sandbox": list(self.sandbox),
            "steps": [
                {
                    "id": step.id,
                    "title": step.title,
                    "score": _round(step.score),
                    "max_score": _round(step.max_score),
                    "status": step.status,
                    "checks": [
                        {"id": c.id, "passed": c.passed, "points": _round(c.points),
                         "max_points": _round(c.max_points), "visibility": c.visibility,
                         "message": c.message}
                        for c in step.checks
                    ],
                    "diagnoses": list(step.diagnoses),
                    **({"mode": step.mode.removeprefix("mode_"), "mode_note": messages.render(step.mode)}
                       if step.mode else {}),
                }
                for step in self.steps
            ],
        }


def _round(x):
    return round(x, 4)


def table(result, title=None):
    """The per-step score table, with one line per failing check."""
    lines = [title or f"{result.assignment}: {result.submission}", ""]
    width = max([len(step.id) for step in result.steps] + [5])
    for step in result.steps:
        note = ""
        if step.status == "not_implemented":
            note = messages.render("step_not_implemented")
        elif step.status == "not_checked":
            note = step.checks[0].message if step.checks else ""
        lines.append(f"  {step.id:<{width}}  {step.score:6.2f} / {step.max_score:<5g} {note}".rstrip())
        if step.mode and step.status != "not_checked":
            lines.append(f"  {'':<{width}}    ({messages.render(step.mode)})")
        if step.status == "graded":
            for check in step.checks:
                if check.passed is False:
                    lines.append(f"  {'':<{width}}    x {check.id}: {check.message}")
        for diagnosis in step.diagnoses:
            lines.append(f"  {'':<{width}}    ? {diagnosis['message']}")
    lines.append(f"  {'total':<{width}}  {result.score:6.2f} / {result.max_score:g}")
    return "\n".join(lines)


def write_json(result, path):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")


def write_csv(results, names, path, paths=None):
    """grades.csv: one row per submission (its id, then its path if `paths` is given), one column
    per step, then the total (empty cells for a result that is None: a submission that could not
    be graded)."""
    graded = [result for result in results if result is not None]
    step_ids = [step.id for step in graded[0].steps] if graded else []
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", *(["path"] if paths is not None else []), *step_ids, "total", "max_score"])
        for index, (name, result) in enumerate(zip(names, results)):
            head = [name, paths[index]] if paths is not None else [name]
            if result is None:
                writer.writerow([*head, *([""] * (len(step_ids) + 2))])
                continue
            writer.writerow([*head, *(_round(result.step(s).score) for s in step_ids),
                             _round(result.score), _round(result.max_score)])
