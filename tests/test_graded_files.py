"""The result says which files were graded (`graded_files`, relative to the submission) and where
the package was found (`package_root`), for every layout a submission comes in."""

import json
import shutil

import pytest

from autograder.engine.judge.result_files import write_json
from autograder.engine.judge.runner import grade
from conftest import SOLUTIONS

PACKAGE_FILES = sorted(p.name for p in (SOLUTIONS / "mha").glob("*.py"))


def copy_package(target):
    shutil.copytree(SOLUTIONS / "mha", target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def kit_around(root):
    """Files a whole repository holds beside the package: none of them may count as graded."""
    (root / "autograder" / "engine").mkdir(parents=True)
    (root / "autograder" / "engine" / "runner.py").write_text("x = 1\n")
    (root / "assignments" / "test_checks.py").parent.mkdir(parents=True, exist_ok=True)
    (root / "assignments" / "test_checks.py").write_text("def test_nothing(): pass\n")
    (root / "setup.py").write_text("print('not graded')\n")


def graded(path, config):
    result = grade(path, config, steps=["padding"])
    assert result.step("padding").score == result.step("padding").max_score  # it was the reference
    return result


@pytest.mark.parametrize(
    "layout, root",
    [
        ("package", "."),  # <submission>/mha/
        ("assignments", "assignments"),  # the release as a student's folder
        ("zip", "mha-lab-main/assignments"),  # GitHub's "download zip": one folder deeper
    ],
)
def test_the_packages_files_are_the_graded_ones(config, tmp_path, layout, root):
    submission = tmp_path / "submission"
    holder = submission / root
    copy_package(holder / "mha")
    if layout != "package":
        kit_around(submission if layout == "assignments" else submission / "mha-lab-main")
    result = graded(submission, config)
    assert result.submission == str(submission)
    assert result.package_root == root
    prefix = "" if root == "." else root + "/"
    assert result.graded_files == [f"{prefix}mha/{name}" for name in PACKAGE_FILES]
    data = result.to_json()
    assert data["graded_files"] == result.graded_files and data["package_root"] == root


def test_loose_files_are_graded_as_uploaded(config, tmp_path):
    submission = tmp_path / "upload"
    submission.mkdir()
    for name in PACKAGE_FILES:
        shutil.copyfile(SOLUTIONS / "mha" / name, submission / name)
    result = graded(submission, config)
    assert result.package_root is None and result.graded_files == PACKAGE_FILES


def test_a_notebook_is_the_graded_file(config, tmp_path):
    shutil.copyfile(SOLUTIONS / "mha.ipynb", tmp_path / "alice.ipynb")
    assert graded(tmp_path / "alice.ipynb", config).graded_files == ["alice.ipynb"]
    (tmp_path / "bob" / "mha").mkdir(parents=True)  # as nbgrader keeps it: submitted/<student>/mha/mha.ipynb
    shutil.copyfile(SOLUTIONS / "mha.ipynb", tmp_path / "bob" / "mha" / "mha.ipynb")
    assert graded(tmp_path / "bob", config).graded_files == ["mha/mha.ipynb"]


def test_a_linked_file_is_not_listed_as_graded(config, tmp_path):
    submission = tmp_path / "submission"
    copy_package(submission / "mha")
    (submission / "mha" / "extra.py").symlink_to(SOLUTIONS / "mha" / "padding.py")  # refused, never read
    result = graded(submission, config)
    assert "mha/extra.py" not in result.graded_files and "mha/padding.py" in result.graded_files


def test_the_json_file_carries_them(config, tmp_path):
    submission = tmp_path / "submission"
    copy_package(submission / "mha")
    write_json(graded(submission, config), tmp_path / "result.json")
    data = json.loads((tmp_path / "result.json").read_text())
    assert data["package_root"] == "." and data["graded_files"] == [f"mha/{name}" for name in PACKAGE_FILES]
