"""Grading results: the dataclasses every stage and route reads, and their JSON (to_json,
from_json). Data only: the text table is table.py's, the files result_files.py's, a batch's
CSV grades_csv.py's."""

from dataclasses import dataclass, field

from autograder.engine.checks import messages


@dataclass
class CheckResult:
    id: str
    passed: bool  # None: not checked on this machine
    points: float
    max_points: float
    visibility: str
    message: str = ""
    message_id: str = None
    params: dict = None  # the message's parameters, where the route kept them (feedback.params_of)


@dataclass
class StepResult:
    id: str
    title: str
    score: float
    max_score: float
    checks: list
    status: str = "graded"  # graded | not_implemented | not_checked | partial (not all its checks ran)
    diagnoses: list = field(default_factory=list)  # [{"id", "message"}], filled by diagnosis
    mode: str = None  # for device steps: message id of how it was graded (mode_real, mode_simulated, ...)
    pictures: list = field(default_factory=list)  # --plots: paths of the pictures of its failing checks
    checks_run: int = None  # a partial step (pytest -k, -x, --lf): how many of its checks_total ran
    checks_total: int = None
    example: object = None  # example.Example: the smallest failing input of a public check, where found
    # The diagnoses made from the public checks alone (runner.explain_public): what a student may
    # read where hidden checks ran (publish/public_view.py). None: not known apart (a result read
    # from an older JSON), and then a student reads none where hidden checks ran.
    public_diagnoses: list = None


def picture_name(step_id: str, check_id: str) -> str:
    """The file name of a failing check's picture (publish/plots.py draws it; StepResult.pictures)."""
    return f"{step_id}-{check_id}.png"


@dataclass
class GradeResult:
    assignment: str
    submission: str
    steps: list
    seed: int = None
    output: str = ""  # what the student's code printed before any hidden input reached it (cut), shown, never parsed
    hidden_output: str = ""  # what it printed once hidden inputs had reached it: hidden, like their checks
    sandbox: list = field(default_factory=list)  # isolation layers that were in force
    duration: float = None  # seconds grade() took (the class report's runtime section)
    steps_total: int = None  # how many steps the assignment has, where some may not have run (pytest)
    package_root: str = None  # where the package was, relative to `submission` (None: from a notebook or files)
    graded_files: list = None  # the submission's files that were graded, relative to `submission`
    # a repository made from a release: what became of the kit's files there (operations/kit_files.py:
    # {"release", "tampering": [{"file", "change"}] or None where not checked}); None: another form
    kit_files: dict = None
    code: dict = None  # grade(keep_code=True): what grading took of the package (kept_code.keep), not in the JSON
    # The gradebook's (engine/operations/gradebook.py; a batch's --out only): who graded it, when,
    # with which kit ({"run", "by", "at", "kit", "commit"}); when it was handed in and by which
    # source ({"at", "source", ...}); the instructor's adjustments, each with what it counted and
    # why; the late policy's decision; and `total`, the grade of record that follows from them.
    graded: dict = None
    submitted: dict = None
    adjustments: list = None
    late: dict = None
    total: float = None

    @property
    def grade(self) -> float:
        """The grade of record: the gradebook's total where it settled one, else the score."""
        return self.total if self.total is not None else self.score

    @property
    def score(self):
        """The points of the steps that ran in full (a partial step has no score)."""
        return sum(step.score for step in self.complete_steps)

    @property
    def max_score(self):
        return sum(step.max_score for step in self.complete_steps)

    @property
    def complete_steps(self):
        return [step for step in self.steps if step.status != "partial"]

    @property
    def partial(self) -> bool:
        """True when some step did not run all its checks, or some step did not run at all."""
        total = len(self.steps) if self.steps_total is None else self.steps_total
        return len(self.complete_steps) < total

    def step(self, step_id):
        return next(step for step in self.steps if step.id == step_id)

    def to_json(self):
        """The result as the documented JSON object (see docs/instructors.md, 'JSON result')."""
        return {
            "assignment": self.assignment,
            "submission": self.submission,
            **({"package_root": self.package_root} if self.package_root is not None else {}),
            **({"graded_files": list(self.graded_files)} if self.graded_files is not None else {}),
            "score": round_score(self.score),
            "max_score": round_score(self.max_score),
            "seed": self.seed,
            "output": self.output,
            **({"hidden_output": self.hidden_output} if self.hidden_output else {}),
            "sandbox": list(self.sandbox),
            **({"duration_s": round(self.duration, 3)} if self.duration is not None else {}),
            **({"partial": True} if self.partial else {}),
            **({"kit_files": self.kit_files} if self.kit_files is not None else {}),
            **{name: getattr(self, name) for name in GRADEBOOK_FIELDS if getattr(self, name) is not None},
            "steps": [
                {
                    "id": step.id,
                    "title": step.title,
                    "score": round_score(step.score),
                    "max_score": round_score(step.max_score),
                    "status": step.status,
                    "checks": [
                        {
                            "id": c.id,
                            "passed": c.passed,
                            "points": round_score(c.points),
                            "max_points": round_score(c.max_points),
                            "visibility": c.visibility,
                            "message": c.message,
                            "message_id": c.message_id,
                        }
                        for c in step.checks
                    ],
                    "diagnoses": list(step.diagnoses),
                    **({"public_diagnoses": list(step.public_diagnoses)} if step.public_diagnoses is not None else {}),
                    **({"pictures": list(step.pictures)} if step.pictures else {}),
                    **({"example": step.example.to_json()} if step.example is not None else {}),
                    **(
                        {"checks_run": step.checks_run, "checks_total": step.checks_total}
                        if step.status == "partial"
                        else {}
                    ),
                    **(
                        {"mode": step.mode.removeprefix("mode_"), "mode_note": messages.render(step.mode)}
                        if step.mode
                        else {}
                    ),
                }
                for step in self.steps
            ],
        }


# What the gradebook adds to a batch's JSON (GradeResult's fields of the same names), in this order.
GRADEBOOK_FIELDS = ("graded", "submitted", "adjustments", "late", "total")


def round_score(x):
    """A score as JSON and the CSV keep it: four decimals."""
    return round(x, 4)


def from_json(data: dict) -> GradeResult:
    """The GradeResult whose to_json() is `data` (a batch's skipped submissions, a merge, the
    Classroom route's result of the whole grading). KeyError or TypeError where it is not one."""
    steps = []
    for s in data["steps"]:
        checks = [
            CheckResult(
                id=c["id"],
                passed=c["passed"],
                points=c["points"],
                max_points=c["max_points"],
                visibility=c["visibility"],
                message=c.get("message", ""),
                message_id=c.get("message_id"),
            )
            for c in s.get("checks", [])
        ]
        steps.append(
            StepResult(
                id=s["id"],
                title=s["title"],
                score=s["score"],
                max_score=s["max_score"],
                checks=checks,
                status=s.get("status", "graded"),
                diagnoses=s.get("diagnoses", []),
                public_diagnoses=s.get("public_diagnoses"),
                mode=f"mode_{s['mode']}" if s.get("mode") else None,
                pictures=s.get("pictures", []),
                checks_run=s.get("checks_run"),
                checks_total=s.get("checks_total"),
            )
        )
    return GradeResult(
        assignment=data["assignment"],
        submission=data.get("submission", ""),
        steps=steps,
        seed=data.get("seed"),
        output=data.get("output", ""),
        hidden_output=data.get("hidden_output", ""),
        sandbox=list(data.get("sandbox", [])),
        duration=data.get("duration_s"),
        package_root=data.get("package_root"),
        graded_files=data.get("graded_files"),
        kit_files=data.get("kit_files"),
        **{name: data.get(name) for name in GRADEBOOK_FIELDS},
    )
