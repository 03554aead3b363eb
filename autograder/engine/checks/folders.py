"""Where each assignment's folder is, by id, without importing anything of it (no torch): what
the message catalogs and grading.yml's validation need before anything heavy loads. What a
folder holds, and the loading of its parts, is in assignment.py."""

import pkgutil
from pathlib import Path

PACKAGE = "autograder.assignments"
FOLDER = Path(__file__).resolve().parents[2] / "assignments"


def known() -> list:
    """The ids of the assignments the kit holds (folders with a checks/ package)."""
    return sorted(p.parent.parent.name for p in FOLDER.glob("*/checks/__init__.py"))


def folder(assignment_id: str) -> Path:
    return FOLDER / assignment_id


def step_ids(assignment_id: str) -> list:
    """The step ids an assignment has checks for, read from its folder without importing them
    (no torch: grading.yml is validated before anything heavy starts)."""
    modules = pkgutil.iter_modules([str(folder(assignment_id) / "checks")])
    return sorted(info.name for info in modules if not info.name.startswith("_"))  # _x.py: helpers of several steps
