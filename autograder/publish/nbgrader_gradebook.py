"""The sandboxed judge's scores in nbgrader's gradebook: one rule, for the whole class
(routes/cli/nbgrader_sync.py) and for each notebook nbgrader autograde grades
(routes/nbgrader_gradebook.py JudgedScores).

    record(gradebook, assignment, notebook, student, result, config, claims)  # -> Recorded

Each check cell of the course notebook (a locked grade cell whose source, as the gradebook keeps
it, calls `check_step("<step>", ...)`) gets the judge's points for that step
(`auto_score`, through nbgrader.api.Gradebook), scored out of the cell's points as the check cell
would (check_cell.frozen_score). Other grade cells (an instructor's own, graded by hand) are
left to nbgrader. What a human set in formgrader stays: a manual score (which nbgrader's
gradebook counts in place of the automatic one), extra credit, comments. The rule for the flag
that asks a human to look (`needs_manual_grade`), written only when the judged score changes, so
that a second run leaves what a grader resolved alone:

* the notebook's own check cell claimed more than its code earns on the same public checks in
  the sandbox (a rebinding of check_step, an edited output, code that behaves differently in the
  kernel): flagged, and the cell of the autograded notebook says so (`Claim`);
* a manual score exists: flagged, as nbgrader autograde does (the automatic score it overrode changed);
* otherwise not flagged: the judge's score is the grade.

What the student reads in the cell (verdict_output): the grade of record and the judge's step
report, public checks by name and hidden ones as a count and points (check_cell.step_report).
"""

import copy
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from autograder.engine.checks import messages
from autograder.engine.judge.table import points
from autograder.publish.check_cell import frozen_score, step_report

# A check cell of the course (publish/nbgrader_course.py CHECK), as the gradebook keeps its source.
CHECK_CALL = re.compile(r"^check_step\(\s*['\"](\w+)['\"]", re.M)
MARK = "mha_lab"  # the metadata key of the outputs written here (replaced on each run)
TOLERANCE = 0.011  # points: the rounding of scores between routes (check_step rounds to 4 places)


@dataclass
class Claim:
    """What nbgrader made of a check cell's own output in the student's kernel."""

    grade_id: str
    claimed: float | None  # nbgrader's reading of the cell: None where the cell is not in the notebook
    public: float  # what the same public checks give in the sandbox, out of the cell's points

    @property
    def above(self) -> bool:
        return self.claimed is not None and self.claimed > self.public + TOLERANCE


@dataclass
class Recorded:
    """What record() did for one student's notebook."""

    student: str
    scores: dict = field(default_factory=dict)  # grade id -> judged points written
    changed: list = field(default_factory=list)  # grade ids whose automatic score changed
    manual: dict = field(default_factory=dict)  # grade id -> the manual score kept
    claims: list = field(default_factory=list)  # Claims above what the sandbox gives
    notes: list = field(default_factory=list)  # sentences for the instructor

    @property
    def total(self) -> float:
        return sum(self.scores.values())


def kit_cells(gradebook, notebook: str, assignment: str) -> dict:
    """{grade id: step id} of the notebook's check cells, read from the sources the gradebook
    kept at generate_assignment (the instructor's, never the student's copy); grade cells of
    the instructor's own (graded by hand) are not in it."""
    source = gradebook.find_notebook(notebook, assignment)
    grade_ids = {cell.name for cell in source.grade_cells}
    found = {}
    for cell in source.source_cells:
        match = CHECK_CALL.search(cell.source or "")
        if cell.name in grade_ids and cell.locked and match:
            found[cell.name] = match.group(1)
    return found


def judged_points(result, config, step_id: str, max_score: float) -> tuple:
    """(the judge's points for `step_id` out of a cell worth `max_score`, a note or "")."""
    if step_id not in {s.id for s in config.steps}:
        return 0.0, messages.render("course_step_missing", step=step_id, assignment=config.id)
    return frozen_score(result.step(step_id), config, max_score)


def public_points(step, config, max_score: float) -> float:
    """What `step` (judged with the hidden checks) earns on its public checks alone, as the check
    cell's run in the kernel scores it: the public checks' shares renormalised, all or nothing
    where the step says so, out of the cell's `max_score`."""
    public = [c for c in step.checks if c.visibility == "public" and c.passed is not None]
    total = sum(c.max_points for c in public)
    if not total:
        return 0.0
    passed = sum(c.max_points for c in public if c.passed)
    if config.step(step.id).all_or_nothing and passed < total:
        return 0.0
    return round(max_score * passed / total, 4)


def claimed_points(cell, max_score: float) -> float | None:
    """nbgrader's reading of a check cell's outputs (utils.determine_grade), leaving out those
    written here; None for no cell."""
    from nbgrader.utils import determine_grade  # late: comes with nbgrader

    if cell is None:
        return None
    kernel = copy.deepcopy(cell)
    kernel["outputs"] = [o for o in kernel.get("outputs", []) if MARK not in o.get("metadata", {})]
    kernel["metadata"] = {"nbgrader": {"grade": True, "solution": False, "points": max_score, "grade_id": "x"}}
    score, _ = determine_grade(_node(kernel))
    return score


def check_cells(notebook) -> dict:
    """{grade id: cell} of a notebook's grade cells (nbgrader metadata), first one per id."""
    found = {}
    for cell in notebook.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("grade") and meta.get("grade_id"):
            found.setdefault(meta["grade_id"], cell)
    return found


def record(gradebook, assignment: str, notebook: str, student: str, result, config, autograded=None) -> Recorded:
    """Write `result` (the judge's GradeResult of the student's notebook) into `gradebook` (an
    open nbgrader.api.Gradebook) by the module's rule; `autograded`: the autograded notebook (a
    dict, nbformat's JSON), whose check cells get the verdict (verdict_output) in place of the
    last one written here. The submission must exist in the gradebook."""
    done = Recorded(student)
    cells = check_cells(autograded) if autograded is not None else {}
    steps = kit_cells(gradebook, notebook, assignment)
    submitted = gradebook.find_submission_notebook(notebook, assignment, student)
    for grade in submitted.grades:
        step_id = steps.get(grade.name)
        if step_id is None:
            continue
        max_score = float(grade.max_score)
        score, note = judged_points(result, config, step_id, max_score)
        public = public_points(result.step(step_id), config, max_score) if not note else 0.0
        claim = Claim(grade.name, claimed_points(cells.get(grade.name), max_score), public)
        changed = grade.auto_score is None or abs(grade.auto_score - score) > 1e-9
        grade.auto_score = score
        if changed and (claim.above or grade.manual_score is not None):
            grade.needs_manual_grade = True
        elif grade.manual_score is None and not claim.above:
            grade.needs_manual_grade = False
        done.scores[grade.name] = score
        if changed:
            done.changed.append(grade.name)
        if grade.manual_score is not None:
            done.manual[grade.name] = grade.manual_score
        if claim.above:
            done.claims.append(claim)
        if note:
            done.notes.append(note)
        if grade.name in cells:
            mark_cell(cells[grade.name], verdict_output(result, config, step_id, score, max_score, claim))
    gradebook.db.commit()
    return done


def verdict_output(result, config, step_id: str, score: float, max_score: float, claim: Claim) -> dict:
    """The output a check cell gets: the grade of record, the judge's report of the step, and
    where the cell's own result said more, what it said."""
    lines = [messages.render("grade_of_record", points=points(score), max_points=points(max_score))]
    if step_id in {s.id for s in config.steps}:
        lines.append(step_report(result, config, step_id, pictures=False))
    if claim.above:
        lines.append(messages.render("kernel_claimed_more", claimed=points(claim.claimed), public=points(claim.public)))
    return shown("\n".join(lines), "grade-of-record")


def shown(text: str, kind: str) -> dict:
    """A cell output of plain text, marked as written here."""
    return {"output_type": "display_data", "data": {"text/plain": text}, "metadata": {MARK: kind}}


def mark_cell(cell, output: dict):
    """Put `output` in `cell`'s outputs, in place of the one written here before."""
    outputs = [o for o in cell.get("outputs", []) if MARK not in o.get("metadata", {})]
    cell["outputs"] = [*outputs, _node(output)]


def write_notebook(path: Path, notebook) -> None:
    """Write a notebook's JSON in place, atomically, keeping the file's mode."""
    import nbformat  # late: comes with nbgrader

    mode = path.stat().st_mode & 0o777
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".mha-lab-", suffix=".ipynb")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            nbformat.write(_node(notebook), out)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _node(data):
    from nbformat import from_dict  # late: comes with nbgrader

    return from_dict(data)
