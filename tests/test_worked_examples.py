"""The worked examples in the reference's docstrings (`>>>` lines and the output below them) are
what the reference really prints: each is run with doctest against the reference package, loaded
as the package students write (`mha`, `kv_cache`, ...), and any difference fails.

Students read these examples in the skeletons and in the course notebook and compare them with
their own code's output, so a stale example would teach a wrong answer."""

import ast
import doctest
import importlib
import sys
from pathlib import Path

import pytest

from autograder.engine.course import config as grading_config
from autograder.harness.package import Package
from conftest import SOLUTIONS

# Every step file of every assignment shows one worked example at least, and explains its step in
# Korean and in English (issue 14: teach like the seeds).
STEP_FILES = [
    ("mha", stem) for stem in ["padding", "embedding", "projection", "heads", "attention", "masking", "output", "mha"]
] + [("kv_cache", stem) for stem in ["cache", "decode", "gqa", "decoder"]]


def reference_files():
    """(package, file stem) of each reference file of every assignment in grading.yml."""
    return [
        (assignment.package, path.stem)
        for assignment in grading_config.load_all()
        for path in sorted((SOLUTIONS / assignment.package).glob("*.py"))
    ]


def run_examples(root: Path, package: str, stem: str, fresh: bool = False):
    """Run the docstring examples of root/<package>/<stem>.py, imported as <package>.<stem>.

    With `fresh`, each docstring's examples start from an empty namespace, as in a new notebook
    cell: they must import what they use. Returns (failed, attempted, doctest's report)."""
    saved = {name: module for name, module in sys.modules.items() if name == package or name.startswith(package + ".")}
    report = []
    try:
        Package.load(root, package)
        module = importlib.import_module(f"{package}.{stem}")
        finder = doctest.DocTestFinder(exclude_empty=True)
        runner = doctest.DocTestRunner(verbose=False)
        for test in finder.find(module, f"{package}.{stem}", globs={} if fresh else None):
            runner.run(test, out=report.append)
        failed, attempted = runner.summarize(verbose=False)
    finally:
        for name in [name for name in sys.modules if name == package or name.startswith(package + ".")]:
            del sys.modules[name]
        sys.modules.update(saved)
    return failed, attempted, "".join(report)


@pytest.mark.parametrize("package, stem", reference_files())
def test_examples_print_what_the_reference_prints(package, stem):
    failed, _, report = run_examples(SOLUTIONS, package, stem)
    assert failed == 0, report


def module_docstring(package: str, stem: str) -> str:
    return ast.get_docstring(ast.parse((SOLUTIONS / package / f"{stem}.py").read_text(encoding="utf-8"))) or ""


@pytest.mark.parametrize("package, stem", STEP_FILES)
def test_every_step_has_a_self_contained_worked_example(package, stem):
    """Each step's module docstring has examples, and they run in an empty namespace (a student
    pastes them into a fresh notebook cell: the module's own imports are not there)."""
    assert ">>> " in module_docstring(package, stem), (
        f"solutions/{package}/{stem}.py: no worked example in the module docstring"
    )
    failed, attempted, report = run_examples(SOLUTIONS, package, stem, fresh=True)
    assert attempted >= 3 and failed == 0, report


@pytest.mark.parametrize("package, stem", STEP_FILES + [(package, "__init__") for package in ("mha", "kv_cache")])
def test_every_step_is_explained_in_korean_and_english(package, stem):
    """The module docstring has a Korean section, then an English one, and the Korean text is
    written in Korean (Hangul), not left in English under the heading. The explanation of a step
    is its docstring and its course note (solutions/notes/<package>/<stem>.md, the why that the
    docstring leaves to the notebook): the two [한국어] sections together are counted."""
    docstring = module_docstring(package, stem)
    assert "[한국어]" in docstring and "[English]" in docstring, f"solutions/{package}/{stem}.py"
    korean = docstring.split("[한국어]", 1)[1].split("[English]", 1)[0]
    note = SOLUTIONS / "notes" / package / f"{stem}.md"
    if note.is_file():
        korean += note.read_text(encoding="utf-8").split("[한국어]", 1)[1].split("[English]", 1)[0]
    hangul = sum("\uac00" <= ch <= "\ud7a3" for ch in korean)
    assert hangul >= 100, f"solutions/{package}/{stem}: the [한국어] sections have {hangul} Hangul syllables"


def test_a_wrong_expected_output_fails(tmp_path):
    """The check can fail: one printed value changed in a copy of the reference is reported."""
    copy = tmp_path / "mha"
    copy.mkdir()
    for path in (SOLUTIONS / "mha").glob("*.py"):
        (copy / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    source = (copy / "padding.py").read_text(encoding="utf-8")
    expected = "    tensor([[5, 2, 7],\n            [3, 0, 0]])\n"
    assert source.count(expected) == 1
    (copy / "padding.py").write_text(
        source.replace(expected, expected.replace("[3, 0, 0]", "[3, 0, 1]")), encoding="utf-8"
    )
    failed, _, report = run_examples(tmp_path, "mha", "padding")
    assert failed == 1 and "[3, 0, 1]" in report and "[3, 0, 0]" in report


def notes_files():
    """(package, file stem) of each course note, solutions/notes/<package>/<stem>.md."""
    return [(path.parent.name, path.stem) for path in sorted((SOLUTIONS / "notes").glob("*/*.md"))]


@pytest.mark.parametrize("package, stem", notes_files())
def test_the_why_of_a_step_is_in_its_notebook_cell_in_korean_and_english(package, stem):
    """What a skeleton's docstring leaves out (the why) lives in solutions/notes/<package>/<stem>.md:
    it belongs to a reference file, says everything in Korean, then in English, and the course
    notebook shows it in the file's cell, after the docstring."""
    from autograder.publish.nbgrader_course import course_notebook

    assert (SOLUTIONS / package / f"{stem}.py").is_file(), f"notes/{package}/{stem}.md: no such reference file"
    notes = (SOLUTIONS / "notes" / package / f"{stem}.md").read_text(encoding="utf-8").strip()
    korean = notes.split("[한국어]", 1)[1].split("[English]", 1)[0]
    english = notes.split("[English]", 1)[1]
    assert sum("\uac00" <= ch <= "\ud7a3" for ch in korean) >= 100 and len(english.split()) >= 50
    (config,) = [config for config in grading_config.load_all() if config.package == package]
    cells = {cell.get("id"): cell.source for cell in course_notebook(config).cells}
    assert cells[f"about-{stem}"].endswith(notes) and module_docstring(package, stem).strip() in cells[f"about-{stem}"]
