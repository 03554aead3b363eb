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


def formula(cell: str) -> bool:
    """Whether a spreadsheet would read `cell` (as the CSV file holds it) as a formula."""
    return cell[:1] in FORMULA_STARTS or cell.lstrip(" ")[:1] in FORMULA_STARTS


def number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def graded(step_ids, scores):
    steps = [
        StepResult(step_id, "T", score, 10.0, [CheckResult("c", score > 0, score, 10.0, "public")])
        for step_id, score in zip(step_ids, scores)
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
            assert not formula(cell) or number(cell), (cell, row)
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


@given(value=HOSTILE | NUMBERS)
def test_a_cell_reads_back_as_it_was_written(value):
    cell = spreadsheet_cell(value)
    if isinstance(value, str):
        assert not formula(cell) and spreadsheet_text(cell) == value
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
    from autograder.engine.judge.results import write_json
    from autograder.engine.operations.shard import _csv_rows
    from autograder.routes.report.reading import load_out_dirs

    names = ["-1-2", "-cmd.A0", "plain"]  # batch ids: letters, digits, "-", "_", "." (batch.submission_ids)
    results = [graded(["padding"], [5.0]) for _ in names]
    for name, result in zip(names, results):
        write_json(result, tmp_path / f"{name}.json", sync=False)
    write_csv(results, names, tmp_path / "grades.csv", paths=["@SUM(1+1)*cmd|' /C calc'!A0", "+y", "z"])
    assert not any(formula(line) for line in (tmp_path / "grades.csv").read_text().splitlines())
    assert set(_csv_rows(tmp_path)) == set(names)
    entries = load_out_dirs([tmp_path])
    assert sorted(entry["id"] for entry in entries) == sorted(names)
    assert {entry["path"] for entry in entries} == {"@SUM(1+1)*cmd|' /C calc'!A0", "+y", "z"}
    assert all(json.loads(json.dumps(entry["result"]))["steps"] for entry in entries)
