"""What leaves the instructor's kit for students: the student release, with its notebooks.

* `release(out)`: assignments/ (skeletons, public checks), the parts of autograder/ that the public
  checks need with every hidden check cut out, grading.yml, a student README, requirements.txt
  and a pyproject.toml that lets `pytest assignments/` find the grader. No reference code, no
  hidden check, no known mistake: the diagnosis works from fingerprints (fingerprints.json), and
  the compiled message catalogs (English, Korean) keep only the diagnoses those fingerprints and
  the probes can give.

The Gradescope autograder zip is publish/gradescope.py's.
"""

import sys

from autograder.publish.nbgrader_course import notebook_text
from autograder.publish.student_notebook import student_notebook
from autograder.publish.student_release import release_archive, release_files


def release(out, classroom="command", assignment=None, notebooks=True, lang=None):
    """Write the student release into directory `out` (which must not exist yet): every
    assignment of grading.yml (or only `assignment`), with a GitHub Classroom workflow per
    assignment in `classroom` mode ("command" or "fractional"; see routes/classroom/), and with
    `notebooks` the student notebooks (write_notebooks). Built aside and renamed at the end
    (student_release.release_files): a failed release leaves nothing that blocks the next; the
    manifest of its kit files is kept in the instructor's course folder (operations/kit_files.py).
    With `lang` ("ko", "en"), the skeletons' texts are in that language only (engine/generate/skeleton.py)."""
    return release_files(out, classroom, assignment, also=write_notebooks if notebooks else None, lang=lang)


def write_notebooks(out, graded):
    """notebooks/<package>.ipynb in the release `out`: the self-contained student notebook of
    each Assignment of `graded` (Jupyter, Colab, a hub), carrying this release's grader."""
    try:
        import nbformat  # noqa: F401 - the instructor extra
    except ImportError:
        print("notebooks/ left out of the release: pip install -e .[instructor] to write them", file=sys.stderr)
        return out
    grader = release_archive(out)
    (out / "notebooks").mkdir()
    for config in graded:
        notebook = student_notebook(config, skeleton=out / "assignments" / config.package, grader=grader)
        (out / "notebooks" / f"{config.package}.ipynb").write_text(notebook_text(notebook), encoding="utf-8")
    return out
