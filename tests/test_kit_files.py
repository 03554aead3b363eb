"""The kit's files in a Classroom repository, against the manifest `release` kept (operations/kit_files.py).

Held for every kit file the release writes, not for a chosen few: changed, removed, made a link,
made a pipe, each is named, and only that file; a line-ending change is not a change. Files a student
adds where they can change what the workflow, pytest or Python runs are named; the student's own
package, notebooks, README and notes are not. What a student can forge is not read: a manifest or a
secret planted in the repository changes nothing, since only the instructor's course folder is.
"""

import importlib.machinery
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from autograder.engine.judge.grades_csv import csv_text, tampering_summary
from autograder.engine.judge.results import from_json
from autograder.engine.operations import kit_files
from autograder.publish.release import release
from conftest import SOLUTIONS


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A release of mha (its manifest kept in the tests' course folder) and that manifest."""
    root = release(tmp_path_factory.mktemp("release") / "mha-lab", assignment="mha", notebooks=False)
    manifest = kit_files.release_manifest(root, ["assignments/mha"])
    assert kit_files.manifest_id(manifest) in kit_files.kept("mha")
    return root, manifest


@pytest.fixture
def repository(released, tmp_path):
    """A student's repository as `gh classroom clone student-repos` leaves it
    (<slug>-submissions/<slug>-<login>/, a git clone), the reference filled in."""
    root, _ = released
    repo = tmp_path / "mha-lab-submissions" / "mha-lab-alice"
    shutil.copytree(root, repo)
    shutil.rmtree(repo / "assignments" / "mha")
    shutil.copytree(SOLUTIONS / "mha", repo / "assignments" / "mha")
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "work"], cwd=repo, check=True)
    return repo


def found(repo, manifest=None) -> dict:
    """{file: change} of `repo` against the kept releases (or against `manifest` alone)."""
    if manifest is not None:
        return {item["file"]: item["change"] for item in kit_files.compare(repo, manifest)}
    kit = kit_files.kit_files(repo, "mha")
    assert kit["release"] is not None, kit
    return {item["file"]: item["change"] for item in kit["tampering"]}


def test_a_repository_as_released_has_nothing_to_report(repository, released):
    kit = kit_files.kit_files(repository, "mha")
    assert kit == {"release": kit_files.manifest_id(released[1]), "tampering": []}
    assert tampering_summary(kit) == ""


def test_the_manifest_holds_every_kit_file_and_none_of_the_students(released):
    root, manifest = released
    files = set(manifest["files"])
    assert {".github/workflows/classroom.yml", "grading.yml", "requirements.txt", "pyproject.toml"} <= files
    assert {"assignments/conftest.py", "assignments/test_checks.py", "autograder/__init__.py"} <= files
    assert not any(name.startswith(("assignments/mha/", "notebooks/")) for name in files)
    assert "README.md" not in files and ".gitignore" not in files
    # kept, never shipped: no file of the release holds a digest of another
    digest = manifest["files"]["grading.yml"]["sha256"].encode()
    assert not (root / ".mha-lab").exists()
    assert not any(digest in path.read_bytes() for path in root.rglob("*") if path.is_file())


KEY_FILES = [
    ".github/workflows/classroom.yml",
    "grading.yml",
    "requirements.txt",
    "pyproject.toml",
    "assignments/conftest.py",
    "assignments/test_checks.py",
    "autograder/routes/classroom/__init__.py",
    "autograder/assignments/mha/checks/attention.py",
]


@pytest.mark.parametrize("every", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["key files", "every file"])
def test_each_kit_file_changed_removed_or_made_a_link_is_named_alone(released, repository, every):
    _, manifest = released
    names = sorted(manifest["files"]) if every else KEY_FILES
    assert len(manifest["files"]) > 50 and set(KEY_FILES) <= set(manifest["files"])
    for name in names:
        path = repository / name
        original = path.read_bytes()
        path.write_bytes(original + b" ")
        assert found(repository, manifest) == {name: "changed"}, name
        path.write_bytes(original.replace(b"\n", b"\r\n"))  # an editor's line endings: not a change
        assert found(repository, manifest) == {}, name
        path.unlink()
        assert found(repository, manifest) == {name: "removed"}, name
        (repository / "elsewhere").write_bytes(original)
        path.symlink_to(repository / "elsewhere")  # the same bytes, through a link
        assert found(repository, manifest) == {name: "a link"}, name
        path.unlink()
        (repository / "elsewhere").unlink()
        path.write_bytes(original)
    assert found(repository) == {}


def test_a_pipe_or_a_huge_file_in_a_kit_files_place_is_named_without_reading_it(repository):
    (repository / "grading.yml").unlink()
    os.mkfifo(repository / "grading.yml")  # opening it would wait for ever
    with open(repository / "requirements.txt", "r+b") as f:
        f.truncate(64 << 20)  # sparse: read past the limit, it would cost the instructor's memory
    assert found(repository) == {"grading.yml": "not a file", "requirements.txt": "changed"}


ADDED = {  # where a student may add a file that changes what runs: found as added
    "assignments/grading.yml": "tolerances",  # the per-push command's nearest grading.yml
    "conftest.py": "import os",  # pytest's, at the top
    "yaml.py": "print('shadowed')",  # `python -m` puts the top on sys.path
    "sitecustomize.py": "",
    "deep/down/grading.yml": "",
    "site/extra.pth": "import os",
    "pytest.ini": "[pytest]",
    "setup.cfg": "",
    ".github/workflows/mine.yml": "on: push",
    ".github/actions/x/action.yml": "",
    "autograder/assignments/mha/checks/extra.py": "",
    "assignments/helpers.py": "",
    "torch/__init__.py": "",  # a package at the top shadows an import
    "requirements-dev.txt": "",
}
OWN = {  # a student's to add or change: not named
    "assignments/mha/helpers.py": "def f(): pass",
    "assignments/mha/notes.txt": "",
    "notes/todo.txt": "",
    "notes.txt": "",
    "environment.yml": "",
    "LICENSE": "",
    "notes/sketch.ipynb": "{}",
    "notebooks/mha.ipynb": "{}",
    "README.md": "# mine",
    ".gitignore": "*.log",
    "data/weights/readme.md": "",
    ".pytest_cache/v/cache/lastfailed": "{}",  # what running pytest writes
}


def test_files_added_where_they_change_what_runs_are_named_and_the_students_own_are_not(repository):
    for name, text in {**ADDED, **OWN}.items():
        (repository / name).parent.mkdir(parents=True, exist_ok=True)
        (repository / name).write_text(text)
    assert found(repository) == dict.fromkeys(ADDED, "added")


def test_links_are_never_followed_and_always_named(repository, tmp_path):
    (tmp_path / "copy").mkdir()
    shutil.move(repository / "autograder", tmp_path / "copy" / "autograder")
    (repository / "autograder").symlink_to(tmp_path / "copy" / "autograder")  # the same files, through a link
    (repository / "notes").mkdir()
    (repository / "notes" / "x").symlink_to("/etc/passwd")
    changes = found(repository)
    assert changes.pop("autograder") == "a link" and changes.pop("notes/x") == "a link"
    assert changes and set(changes.values()) == {"removed"}  # nothing under the link was read
    assert all(name.startswith("autograder/") for name in changes)


def test_what_a_student_can_forge_is_not_read(repository, released):
    # tolerances widened, and beside them a manifest and a course folder made to match
    (repository / "grading.yml").write_text((repository / "grading.yml").read_text().replace("atol", "atol: 10 #"))
    forged = kit_files.release_manifest(repository, ["assignments/mha"])
    folder = repository / ".mha-lab" / "releases"
    folder.mkdir(parents=True)
    (folder / f"{kit_files.manifest_id(forged)}.json").write_text(__import__("json").dumps(forged))
    (repository / ".mha-lab" / "course-secret").write_text("ab" * 32)
    kit = kit_files.kit_files(repository, "mha")
    assert kit["release"] == kit_files.manifest_id(released[1]) and found(repository) == {"grading.yml": "changed"}


def test_the_closest_kept_release_is_the_one_compared(repository, released, tmp_path):
    # two releases kept (a re-release in mid-term): a repository made from either reports nothing
    other = release(tmp_path / "again", assignment="mha", classroom="fractional", notebooks=False)
    assert len(kit_files.kept("mha")) >= 2
    shutil.copyfile(other / ".github" / "workflows" / "classroom.yml", repository / ".github/workflows/classroom.yml")
    assert found(repository) == {}


def test_a_walk_past_its_limit_says_so(repository, monkeypatch):
    monkeypatch.setattr(kit_files, "WALK_ENTRIES", 150)
    (repository / "data").mkdir()
    for i in range(200):
        (repository / "data" / f"{i}.txt").write_text("")
    assert any(
        item["change"].startswith("not all checked") for item in kit_files.kit_files(repository, "mha")["tampering"]
    )


def test_other_forms_of_submission_are_not_compared_and_no_kept_release_is_said(repository, tmp_path, monkeypatch):
    shutil.copytree(SOLUTIONS / "mha", tmp_path / "plain" / "mha")
    assert kit_files.kit_files(tmp_path / "plain", "mha") is None  # a folder holding the package
    monkeypatch.setenv("MHA_LAB_COURSE_DIR", str(tmp_path / "elsewhere"))
    kit = kit_files.kit_files(repository, "mha")
    assert kit["tampering"] is None and "no release of mha is kept" in kit["reason"]
    assert tampering_summary(kit) == "not checked (no release kept)"


def test_grades_csv_and_the_json_carry_it_and_only_where_there_are_repositories(repository):
    from autograder.engine.judge.results import GradeResult, StepResult

    step = StepResult(id="padding", title="Pad", score=10.0, max_score=10.0, checks=[])
    plain = GradeResult(assignment="mha", submission="x", steps=[step])
    assert "tampering" not in csv_text([plain], ["x"])
    (repository / "grading.yml").write_text("=cmd|' /C calc'!A0\n")  # the file's content never reaches the cell
    (repository / "=HYPERLINK(1).py").write_text("")
    tampered = GradeResult(
        assignment="mha", submission="y", steps=[step], kit_files=kit_files.kit_files(repository, "mha")
    )
    text = csv_text([plain, tampered], ["x", "y"])
    header, first, second = text.splitlines()
    assert header.endswith(",tampering") and first.endswith(",")
    assert second.endswith(",changed: grading.yml; added: =HYPERLINK(1).py")  # a cell that starts with a word
    assert from_json(tampered.to_json()).kit_files == tampered.kit_files  # a merge keeps it


def test_bytecode_is_named_only_where_it_runs_without_its_source(repository):
    import py_compile

    source = repository / "autograder" / "routes" / "pytest_plugin.py"
    for name, mode in (("pytest_plugin", py_compile.PycInvalidationMode.TIMESTAMP), ("checked", None)):
        target = repository / "autograder" / "routes" / "__pycache__" / f"{name}.cpython-311.pyc"
        py_compile.compile(
            str(source), cfile=str(target), invalidation_mode=mode or py_compile.PycInvalidationMode.CHECKED_HASH
        )
    # what a student could commit: bytecode of other code, marked to run without checking its source
    unchecked = repository / "autograder" / "routes" / "__pycache__" / "classroom.cpython-311.pyc"
    py_compile.compile(
        str(source), cfile=str(unchecked), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    assert found(repository) == {
        "autograder/routes/__pycache__/classroom.cpython-311.pyc": "added (bytecode that runs unchecked)"
    }


def test_moving_the_package_out_of_assignments_does_not_hide_the_kit(repository):
    shutil.move(repository / "assignments" / "mha", repository / "mha")  # graded from the top now
    (repository / "grading.yml").write_text("changed")
    assert found(repository) == {"grading.yml": "changed", "mha/__init__.py": "added"}


def test_names_a_student_chose_reach_no_terminal_or_cell_as_they_are(repository, capsys):
    from autograder.routes import cli

    (repository / "\x1b[2J\x1b]0;owned\x07.py").write_text("")  # clears a terminal, retitles it
    deep = repository / "autograder" / Path(*["dd"] * 80) / "x.py"  # a name of 250 characters
    deep.parent.mkdir(parents=True)
    deep.write_text("")
    names = [item["file"] for item in kit_files.kit_files(repository, "mha")["tampering"]]
    assert len(names) == 2 and not any("\x1b" in name or "\x07" in name for name in names)
    assert max(map(len, names)) < 220
    assert cli.main(["grade", str(repository), "--assignment", "mha", "--in-process", "--public-only"]) == 0
    out = capsys.readouterr().out
    assert "tampering: added: " in out and "\x1b" not in out


# Red-team attacks: ways to change what the per-push workflow runs while this column stays silent.
def test_moving_the_package_into_a_folder_of_its_own_does_not_hide_the_kit(repository):
    # package_root finds src/mha; the kit's files are still at the repository's top
    (repository / "src").mkdir()
    shutil.move(repository / "assignments" / "mha", repository / "src" / "mha")
    (repository / "grading.yml").write_text("changed")
    kit = kit_files.kit_files(repository, "mha")
    assert kit is not None and kit["tampering"] is not None, kit
    changes = {item["file"]: item["change"] for item in kit["tampering"]}
    assert changes.get("grading.yml") == "changed", changes


@pytest.mark.parametrize(
    "name",
    [
        *(f"yaml{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES),  # a compiled module
        *(f"yaml/__init__{suffix}" for suffix in (*importlib.machinery.EXTENSION_SUFFIXES, ".pyc")),  # a package
    ],
)
def test_anything_python_imports_from_the_top_is_named(repository, name):
    # `python -m autograder...` puts the repository's top first on sys.path: a module of any kind
    # there shadows one the grader imports
    path = repository / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF" if not name.endswith(".pyc") else b"\0" * 16)
    assert found(repository) == {name: "added"}


def test_files_a_student_adds_never_push_a_changed_kit_file_out_of_the_summary(repository):
    # On main 1607c35 the summary listed changes in the walk's order: forty long names that sort
    # before grading.yml filled its 300 characters, and "changed: grading.yml" was cut from the
    # CSV cell, the terminal and the class report.
    for i in range(40):
        (repository / f"a{i:02d}{'_' * 60}.py").write_text("")
    (repository / "grading.yml").write_text("changed")
    (repository / "requirements.txt").unlink()
    summary = tampering_summary(kit_files.kit_files(repository, "mha"))
    assert summary.startswith("changed: grading.yml; removed: requirements.txt; added: a00"), summary
    assert summary.endswith("(42 in all)") and len(summary) <= 300
