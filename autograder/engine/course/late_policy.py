"""An assignment's late policy (grading.yml's `late:`), and what it decides for one submission.

    policy = LatePolicy(deadline=..., every="day", deduct_percent=10, max_percent=50)
    decision = policy.decide(submitted_at, student="alice", max_score=100)

The schedule follows what LMSs and nbgrader's late-penalty plugins offer: a deadline, a grace
period, a deduction per started day or hour (a percentage of the assignment's maximum, as
Canvas deducts, or points, as nbgrader's SubMarks example does), a cap, and a cut-off after
which a submission earns nothing. An extension moves one student's deadline, and the cut-off
by as much. Times carry their UTC offset (a time without one means another thing on each
machine): grading.yml's are validated so (config.py), and the submission times come with
theirs (operations/gradebook.py). Pure: no file, no clock.
"""

import dataclasses
import datetime
import math

UNITS = {"day": datetime.timedelta(days=1), "hour": datetime.timedelta(hours=1)}


@dataclasses.dataclass(frozen=True)
class Extension:
    """A later deadline for one student: absolute (`deadline`) or by `delta`; `line`: its line in
    grading.yml (messages name it)."""

    student: str
    deadline: datetime.datetime = None
    delta: datetime.timedelta = None
    line: int = None

    def moved(self, deadline: datetime.datetime) -> datetime.datetime:
        return self.deadline if self.deadline is not None else deadline + self.delta

    def describe(self) -> str:
        if self.deadline is not None:
            return f"extended to {iso(self.deadline)}"
        return f"extended by {duration(self.delta)}"


@dataclasses.dataclass(frozen=True)
class LatePolicy:
    """grading.yml's `late:` of one assignment (docs/grading-yml.md, "Late work")."""

    deadline: datetime.datetime
    grace: datetime.timedelta = datetime.timedelta(0)
    every: str = "day"  # day | hour: each one started after the deadline costs one deduction
    deduct_percent: float = None  # of the assignment's maximum, per unit
    deduct_points: float = None  # or points per unit
    max_percent: float = None  # the penalty never exceeds this share of the maximum ...
    max_points: float = None  # ... or these points
    cutoff: datetime.datetime = None  # handed in after it (moved by an extension): no points
    extensions: tuple = ()  # Extension, at most one per student

    def extension_of(self, student: str):
        return next((extension for extension in self.extensions if extension.student == student), None)

    def rule(self, max_score: float) -> str:
        """The schedule in one line, for the JSON and the report."""
        if self.deduct_percent is not None:
            each = f"{self.deduct_percent:g}% of {max_score:g} points"
        elif self.deduct_points is not None:
            each = f"{self.deduct_points:g} points"
        else:
            each = "nothing"
        text = f"{each} per {self.every} started"
        if self.max_percent is not None:
            text += f", at most {self.max_percent:g}%"
        if self.max_points is not None:
            text += f", at most {self.max_points:g} points"
        if self.grace:
            text += f"; {duration(self.grace)} of grace"
        if self.cutoff is not None:
            text += f"; nothing after {iso(self.cutoff)}"
        return text

    def decide(self, submitted: datetime.datetime, student: str, max_score: float, lms_late=None) -> dict:
        """What the policy does to `student`'s submission handed in at `submitted` (None: not
        known): a dict for the JSON's `late` (`status` on_time | late | after_cutoff | unknown,
        `penalty` in points, the deadline that applied, the rule and why, in words).
        `lms_late`: what the LMS said (Canvas marks a file late without its time), shown where
        the time is unknown."""
        extension = self.extension_of(student)
        deadline = extension.moved(self.deadline) if extension else self.deadline
        cutoff = None
        if self.cutoff is not None:
            cutoff = self.cutoff + (deadline - self.deadline)
        decision = {
            "deadline": iso(deadline),
            **({"extension": extension.describe()} if extension else {}),
            **({"cutoff": iso(cutoff)} if cutoff else {}),
            "rule": self.rule(max_score),
            "penalty": 0.0,
        }
        if submitted is None:
            said = {True: "the LMS marks it late", False: "the LMS marks it on time"}.get(lms_late)
            decision.update(
                status="unknown",
                why="no submission time is known"
                + (f" ({said}, without its time)" if said else "")
                + ": no penalty applied; give the times (grade --times FILE)",
            )
            return decision
        late_by = submitted - deadline
        decision["late_by_s"] = max(0, round(late_by.total_seconds()))
        if late_by <= self.grace:
            on_time = "on time" if late_by <= datetime.timedelta(0) else f"{duration(late_by)} late, within the grace"
            decision.update(status="on_time", why=f"handed in {on_time}")
            return decision
        if cutoff is not None and submitted > cutoff:
            decision.update(
                status="after_cutoff",
                penalty=round(max_score, 4),
                why=f"handed in {duration(late_by)} late, after the cut-off {iso(cutoff)}: no points",
            )
            return decision
        units = math.ceil(late_by / UNITS[self.every])
        each = (self.deduct_percent or 0) / 100 * max_score if self.deduct_points is None else self.deduct_points
        penalty = units * each
        cap = min(
            (self.max_percent / 100 * max_score) if self.max_percent is not None else math.inf,
            self.max_points if self.max_points is not None else math.inf,
            max_score,
        )
        capped = penalty > cap
        penalty = min(penalty, cap)
        plural = "s" if units != 1 else ""
        decision.update(
            status="late",
            units=units,
            penalty=round(penalty, 4),
            why=f"handed in {duration(late_by)} late ({units} {self.every}{plural} started): "
            f"{units} x {each:.2f} = {units * each:.2f} points" + (f", capped at {cap:.2f}" if capped else ""),
        )
        return decision


def iso(moment: datetime.datetime) -> str:
    return moment.isoformat(timespec="minutes" if moment.second == 0 else "seconds")


def duration(delta: datetime.timedelta) -> str:
    """`delta` in words a person reads at a glance: "2 d 3 h", "45 min", "30 s"."""
    seconds = round(abs(delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes)
    if not parts:
        parts = [f"{seconds} s"]
    return " ".join(parts[:2])


def parse_time(text: str) -> datetime.datetime:
    """An ISO 8601 time with its UTC offset ("2026-10-01T23:59:00+09:00", "...Z"); ValueError
    for anything else, a time without an offset included."""
    moment = datetime.datetime.fromisoformat(text.strip().replace("z", "Z").replace("Z", "+00:00"))
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{text!r} has no UTC offset (write it as 2026-10-01T23:59:00+09:00, or ...Z for UTC)")
    return moment
