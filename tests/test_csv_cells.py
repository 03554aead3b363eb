"""No cell of a CSV the kit writes is a formula in a spreadsheet (CSV injection), whatever a
student named: every value of every column generated hostile, every writer of the kit held to the
one that neutralises (text.csv_table), and every value read back as it was."""

import ast
import csv
import io
import json
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine.checks.text import (
    FORMULA_STARTS,
    QUOTE,
    csv_records,
    csv_table,
    printable,
    spreadsheet_cell,
    spreadsheet_text,
)
from autograder.engine.judge.grades_csv import csv_text
from autograder.engine.judge.results import CheckResult, GradeResult, StepResult
from conftest import KIT

# What a hostile value starts with: each formula start, after spaces or not, a quote, or nothing.
PREFIXES = st.sampled_from([*FORMULA_STARTS, *(" " + c for c in FORMULA_STARTS), "  =", QUOTE, QUOTE + "=", ""])
BODIES = st.text(alphabet=string.printable + "=+-@'\"，；ａ한", max_size=20)
HOSTILE = st.builds(lambda prefix, body: prefix + body, PREFIXES, BODIES)
NUMBERS = st.floats(allow_nan=False, allow_infinity=False, width=32) | st.integers(-(10**6), 10**6)


def number(cell: str) -> bool:
    """Whether `cell` is a plain number, which a spreadsheet reads as that number ("-5", "75.00")."""
    try:
        float(cell)
    except ValueError:
        return False
    return cell.isascii() and cell.strip() == cell and not any(c.isalpha() and c not in "eE" for c in cell)


def formula(cell: str) -> bool:
    """Whether a spreadsheet would read `cell` (as the CSV file holds it) as a formula."""
    starts = cell[:1] in FORMULA_STARTS or cell.lstrip(" ")[:1] in FORMULA_STARTS
    return starts and not number(cell)


def graded(step_ids, scores):
    steps = [
        StepResult(step_id, "T", score, 10.0, [CheckResult("c", score > 0, score, 10.0, "public")])
        for step_id, score in zip(step_ids, scores, strict=False)
    ]
    return GradeResult("A", "s", steps)


@settings(max_examples=100, deadline=None)
@given(
    names=st.lists(HOSTILE, min_size=1, max_size=4),
    paths=st.lists(HOSTILE, min_size=4, max_size=4),
    step_ids=st.lists(HOSTILE, min_size=1, max_size=3, unique=True),
    scores=st.lists(NUMBERS, min_size=3, max_size=3),
    missing=st.booleans(),
)
def test_no_cell_of_grades_csv_is_a_formula_and_every_value_reads_back(names, paths, step_ids, scores, missing):
    """Every column: the ids, the paths, the steps' names (a header), the scores."""
    results = [graded(step_ids, scores) for _ in names]
    if missing:
        results[-1] = None  # a submission the grader failed on: an empty row
    text = csv_text(results, names, paths=paths[: len(names)])
    rows = list(csv.reader(io.StringIO(text)))
    for row in rows:
        for cell in row:
            assert not formula(cell), (cell, row)
    records = csv_records(io.StringIO(text))
    columns = step_ids if any(result is not None for result in results) else []
    assert list(records[0]) == [
        "submission",
        "path",
        *columns,
        "late_penalty",
        "adjustment",
        "total",
        "max_score",
        "notes",
    ]
    assert [record["submission"] for record in records] == names
    assert [record["path"] for record in records] == [printable(p, one_line=True) for p in paths[: len(names)]]


@given(value=HOSTILE | NUMBERS | NUMBERS.map(lambda n: f"{n:.2f}"))
def test_a_cell_reads_back_as_it_was_written(value):
    cell = spreadsheet_cell(value)
    if isinstance(value, str):
        assert not formula(cell) and spreadsheet_text(cell) == value
        assert cell == value or not number(value)  # a number written as text ("-5.00") stays as it is
    else:
        assert cell == value  # a number stays a number
    (back,) = csv_records(io.StringIO(csv_table([["v"], [value]])))
    assert back["v"] == (value if isinstance(value, str) else str(value))


def csv_writers(tree) -> list:
    """Lines where a module calls csv.writer / csv.DictWriter (however `csv` was imported)."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("writer", "DictWriter")
            and isinstance(node.value, ast.Name)
        ):
            if node.value.id == "csv":
                found.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "csv":
            found += [node.lineno for alias in node.names if alias.name in ("writer", "DictWriter")]
    return found


def test_every_csv_the_kit_writes_goes_through_the_one_that_neutralises():
    """Present and future columns and files: no module of the kit but text.py makes a CSV
    writer, so every row goes through csv_table."""
    writers = {}
    for path in sorted((KIT / "autograder").rglob("*.py")):
        lines = csv_writers(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            writers[path.relative_to(KIT).as_posix()] = lines
    assert list(writers) == ["autograder/engine/checks/text.py"], writers


def test_a_hostile_id_survives_a_merge_and_the_report(tmp_path):
    """The kit reads its own CSV back (merging shards, the class report): an id that starts
    like a formula (batch ids keep a leading '-') is the same id after the round trip."""
    from autograder.engine.judge.grades_csv import write_csv
    from autograder.engine.judge.result_files import write_json
    from autograder.engine.operations.shard import _csv_rows
    from autograder.publish.report.reading import load_out_dirs

    names = ["-1-2", "-cmd.A0", "plain"]  # batch ids: letters, digits, "-", "_", "." (batch.submission_ids)
    results = [graded(["padding"], [5.0]) for _ in names]
    for name, result in zip(names, results, strict=True):
        write_json(result, tmp_path / f"{name}.json", sync=False)
    write_csv(results, names, tmp_path / "grades.csv", paths=["@SUM(1+1)*cmd|' /C calc'!A0", "+y", "z"])
    assert not any(formula(line) for line in (tmp_path / "grades.csv").read_text().splitlines())
    assert set(_csv_rows(tmp_path)) == set(names)
    entries = load_out_dirs([tmp_path])
    assert sorted(entry["id"] for entry in entries) == sorted(names)
    assert {entry["path"] for entry in entries} == {"@SUM(1+1)*cmd|' /C calc'!A0", "+y", "z"}
    assert all(json.loads(json.dumps(entry["result"]))["steps"] for entry in entries)


HOSTILE_TEXT = ['=HYPERLINK("http://x","y")', "+1+cmd", "-2+3", "@SUM(A1)", " =1", "\t=1", "'=1", "\uff1d1"]


def kit_csv_writers() -> set:
    """(module, function) of every function of the kit that calls text.csv_table: found, not listed."""
    found = set()
    for path in sorted((KIT / "autograder").rglob("*.py")):
        module = ".".join(path.relative_to(KIT).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                calls = [c for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)]
                if any(c.func.id == "csv_table" for c in calls):
                    found.add((module, node.name))
    return found


def test_every_csv_the_kit_writes_holds_no_formula_and_reads_back(tmp_path, monkeypatch):
    """Every function that writes a CSV (grades.csv, an LMS import's lms.csv, adjustments.csv,
    Canvas's and Moodle's gradebook files) is run on values a student or a roster can choose;
    every CSV file it leaves holds no formula cell, and the kit's own readers get each value back.
    A new writer of the kit that this test does not run fails it."""
    import importlib
    import sys

    from autograder.engine.judge.grades_csv import write_csv
    from autograder.engine.operations import gradebook, lms

    called = set()
    for module_name in {module for module, _ in kit_csv_writers()}:
        module = importlib.import_module(module_name)

        def recording(rows, *args, _table=module.csv_table, **kwargs):
            called.add((sys._getframe(1).f_globals["__name__"], sys._getframe(1).f_code.co_name))
            return _table(rows, *args, **kwargs)

        monkeypatch.setattr(module, "csv_table", recording)

    ids = ["-x", "-1-2", "w"]  # folder names an LMS import keeps (safe_id: letters, digits, "-")
    roster = tmp_path / "roster.csv"
    with roster.open("w", newline="") as f:
        writer = csv.writer(f)  # a roster an instructor exported: names and ids the students chose
        writer.writerow(["id", "name", "email", "canvas_id", "sis_id", "moodle_id"])
        for i, sid in enumerate(ids):
            writer.writerow([sid, HOSTILE_TEXT[i], HOSTILE_TEXT[i + 3], 1000 + i, HOSTILE_TEXT[-1 - i], 500 + i])
    students = lms.read_roster(roster)
    download = tmp_path / "download"
    download.mkdir()
    for i in range(len(ids)):
        (download / f"name{i}_{1000 + i}_{7000 + i}_attention.py").write_text("x = 1\n")
    subs = tmp_path / "subs"
    imported, skipped = lms.import_canvas(download, subs, students)
    assert sorted(entry.id for entry in imported) == sorted(ids) and not skipped

    out = tmp_path / "out"
    results = [graded(["padding", "=step"], [5.0, -1.0]) for _ in ids]
    paths = [f"{text}/{sid}" for text, sid in zip(HOSTILE_TEXT, ids, strict=False)]
    write_csv(results, ids, out / "grades.csv", paths=paths)
    gradebook.add_adjustment(out, gradebook.Adjustment("-x", -5.0, HOSTILE_TEXT[0]))
    gradebook.add_adjustment(out, gradebook.Adjustment("-1-2", 2.5, HOSTILE_TEXT[1], step="=step"))
    by_id = dict(zip(ids, results, strict=True))
    (out / "canvas.csv").write_text(lms.canvas_csv(by_id, students, "=MHA (1)", 100.0))
    (out / "moodle.csv").write_text(lms.moodle_csv(by_id, students, 100.0))

    assert called == kit_csv_writers(), "a CSV writer of the kit this test does not run"
    files = sorted(tmp_path.rglob("*.csv"))
    assert {p.name for p in files} >= {"lms.csv", "grades.csv", "adjustments.csv", "canvas.csv", "moodle.csv"}
    for path in files:
        if path == roster:
            continue
        for row in csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline="")):
            for cell in row:
                assert not formula(cell), (path.name, cell, row)
    # the kit's own readers: each value as it was given
    assert set(gradebook.read_times(subs / lms.LMS_CSV)) == set(ids)
    adjustments = gradebook.read_adjustments(out)
    assert [(a.submission, a.points, a.comment, a.step) for a in adjustments] == [
        ("-x", -5.0, HOSTILE_TEXT[0], None),
        ("-1-2", 2.5, HOSTILE_TEXT[1], "=step"),
    ]
    assert gradebook._csv_paths(out) == {sid: printable(p, one_line=True) for sid, p in zip(ids, paths, strict=True)}
