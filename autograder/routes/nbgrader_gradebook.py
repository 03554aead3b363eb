"""nbgrader autograde's stage that writes the sandboxed judge's scores into the gradebook, by the
rule of publish/nbgrader_gradebook.py (record).

JudgedScores is the stage of nbgrader autograde that applies the rule to the notebook it just
ran (publish/nbgrader_course.py AUTOGRADE puts it after SaveAutoGrades, which wrote the kernel's
numbers): the notebook, as autograde sanitized it, graded by the sandboxed judge. So the
gradebook never keeps a number the student's kernel computed, whether autograde runs from the
command line or from formgrader. Where the judge cannot grade (no sandbox on the machine, a
broken install), the check cells' scores are left empty and flagged, never the kernel's.
"""

import json
import tempfile
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder import KIT
from autograder.engine.checks import messages
from autograder.engine.judge.table import points
from autograder.publish.nbgrader_gradebook import check_cells, kit_cells, mark_cell, record, shown


class JudgedScores(NbGraderPreprocessor):
    """nbgrader autograde's stage after SaveAutoGrades: the sandboxed judge grades the notebook
    and record() writes its scores (see the module)."""

    def preprocess(self, nb, resources):
        from autograder.engine.course import config as grading_config  # late: not at the start of nbgrader's config
        from autograder.engine.judge.plan import default_seed  # late: not at the start of nbgrader's config
        from autograder.engine.judge.runner import grade  # late: not at the start of nbgrader's config

        ids = resources["nbgrader"]
        config = next((c for c in grading_config.load_all() if c.id == ids["assignment"]), None)
        if config is None or ids["notebook"] != config.package:
            return nb, resources  # not a notebook of the kit's: nbgrader's scores stand
        with Gradebook(ids["db_url"]) as gradebook, tempfile.TemporaryDirectory(prefix="mha-lab-judged-") as folder:
            path = Path(folder) / f"{config.package}.ipynb"
            path.write_text(json.dumps(nb), encoding="utf-8")
            try:
                result = grade(path, config, reference=KIT / "solutions", seed=default_seed(config), isolate=True)
            except Exception as error:  # noqa: BLE001 - the grader's failure: no score rather than the kernel's
                self.log.error("MHA Lab: the sandboxed judge failed on %s: %s", ids["student"], error)
                unjudged(gradebook, ids["assignment"], ids["notebook"], ids["student"], nb)
                return nb, resources
            done = record(gradebook, ids["assignment"], ids["notebook"], ids["student"], result, config, nb)
        for claim in done.claims:
            self.log.warning(
                "MHA Lab: %s's %s claimed %s in the kernel, %s in the sandbox: flagged for review",
                ids["student"],
                claim.grade_id,
                points(claim.claimed),
                points(claim.public),
            )
        return nb, resources


def unjudged(gradebook, assignment: str, notebook: str, student: str, nb) -> None:
    """The check cells of a notebook the judge could not grade: no score (not the kernel's), a
    flag, and a cell output that says to run the sync."""
    steps = kit_cells(gradebook, notebook, assignment)
    for grade in gradebook.find_submission_notebook(notebook, assignment, student).grades:
        if grade.name in steps:
            grade.auto_score = None
            grade.needs_manual_grade = True
    gradebook.db.commit()
    text = messages.render("not_judged_yet")
    for grade_id, cell in check_cells(nb).items():
        if grade_id in steps:
            mark_cell(cell, shown(text, "not-judged"))
