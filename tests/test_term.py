"""A scripted term, end to end through the documented commands (docs/instructors.md, "A term"):
a Canvas submissions.zip of 30 and a roster in Canvas's export shape; grading with a late policy
(one late submission with an extension, one without); a hand adjustment; a re-grade of two
students; a Canvas export whose grades are the JSONs' totals. After every step grades.csv holds
all 30, and the history shows both grades of each re-graded student. Real grading (sandboxed),
real zips: slow."""

import csv
import io
import json
import subprocess
import sys
import zipfile

import pytest

from conftest import KIT, SOLUTIONS
from planted import PLANTED

pytestmark = pytest.mark.slow

CLASS = 30
WRONG = next(p for p in PLANTED if p.name == "scale_by_d_model")  # loses points in attention only
LATE = """    late:
      deadline: 2026-10-01T23:59:00+09:00
      every: day
      deduct_percent: 10
      max_percent: 50
      extensions:
        S003: {days: 3}
"""


def cli(*args, cwd):
    done = subprocess.run(
        [sys.executable, "-m", "autograder", *map(str, args)], capture_output=True, text=True, cwd=cwd
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def rows(out):
    return {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}


def test_a_term_on_canvas_loses_nothing(tmp_path):
    # the course's grading.yml with a late policy for mha
    text = (KIT / "grading.yml").read_text()
    anchor = "    title: Multi-head attention from scratch\n"
    assert anchor in text
    config = tmp_path / "grading.yml"
    config.write_text(text.replace(anchor, anchor + LATE, 1))

    # the roster, as Canvas exports its gradebook, and its submissions.zip
    students = [(f"Student{i} Kim{i}", str(5000 + i), f"S{i:03d}") for i in range(CLASS)]
    with (tmp_path / "roster.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "MHA (4242)"])
        writer.writerow(["    Points Possible", "", "", "", "", "100.00"])
        for name, canvas_id, sis in students:
            writer.writerow([name, canvas_id, sis, sis.lower(), "A", ""])
    wrong = {"S001", "S002", "S004"}  # S001 and S002 fix their attention and are re-graded
    with zipfile.ZipFile(tmp_path / "submissions.zip", "w") as z:
        for name, canvas_id, sis in students:
            sortable = name.split()[1].lower() + name.split()[0].lower()
            flag = "_LATE" if sis in ("S003", "S004") else ""
            for file in sorted((SOLUTIONS / "mha").glob("*.py")):
                source = file.read_text()
                if sis in wrong and file.name == WRONG.file:
                    source = WRONG.apply(source)
                member = f"{sortable}{flag}_{canvas_id}_{700000 + int(canvas_id)}_{file.name}"
                z.writestr(member if sis != "S005" else member.replace(".py", "-1.py"), source)
    # each student's folder of files as Canvas flattened them: graded as step files uploaded flat
    cli(
        "lms-import",
        "canvas",
        tmp_path / "submissions.zip",
        "--out",
        tmp_path / "subs",
        "--roster",
        tmp_path / "roster.csv",
        cwd=KIT,
    )
    folders = sorted(p for p in (tmp_path / "subs").iterdir() if p.is_dir())
    assert [p.name for p in folders] == [sis for _, _, sis in students]
    # the times: Canvas's late flag says late, the instructor's export says when
    times = tmp_path / "times.csv"
    times.write_text(
        "submission,submitted_at\n"
        + "".join(f"{sis},2026-10-01T20:00:00+09:00\n" for _, _, sis in students if sis not in ("S003", "S004"))
        + "S003,2026-10-03T10:00:00+09:00\nS004,2026-10-03T10:00:00+09:00\n"
    )
    out = tmp_path / "grades"
    cli("grade", *folders, "--out", out, "--config", config, "--times", times, "--workers", "2", cwd=KIT)
    first = rows(out)
    assert len(first) == CLASS
    data = {sis: json.loads((out / f"{sis}.json").read_text()) for _, _, sis in students}
    assert data["S000"]["total"] == 100.0 and data["S005"]["total"] == 100.0  # the -1 of a re-submission undone
    assert data["S003"]["late"]["status"] == "on_time" and "extended" in data["S003"]["late"]["extension"]
    assert data["S004"]["late"]["penalty"] == 20.0 and data["S004"]["total"] == data["S004"]["score"] - 20.0
    assert data["S001"]["score"] < 100.0

    # a hand adjustment
    cli("adjust", out, "S010", "-5", "shared code with S011 (academic integrity case 12)", "--config", config, cwd=KIT)
    assert float(rows(out)["S010"]["total"]) == 95.0 and "academic integrity" in rows(out)["S010"]["notes"]
    assert len(rows(out)) == CLASS

    # S001 and S002 fix their attention; re-graded as the docs show
    for sis in ("S001", "S002"):
        (tmp_path / "subs" / sis / WRONG.file).write_text((SOLUTIONS / "mha" / WRONG.file).read_text())
    before = rows(out)
    cli(
        "grade",
        out.parent / "subs" / "S001",
        out.parent / "subs" / "S002",
        "--out",
        out,
        "--config",
        config,
        "--force",
        cwd=KIT,
    )
    after = rows(out)
    assert list(after) == list(before)  # all 30, in order
    assert {sis for sis in after if after[sis] != before[sis]} == {"S001", "S002"}
    assert float(after["S001"]["total"]) == 100.0 and float(after["S010"]["total"]) == 95.0  # the adjustment stays
    shown = cli("history", out, "S001", "S002", cwd=KIT).stdout
    for sis in ("S001", "S002"):
        lines = [line for line in shown.split(sis, 1)[1].split("\n\n")[0].splitlines() if "score" in line]
        assert len(lines) == 2 and f"score {data[sis]['score']:.2f}" in lines[0] and "score 100.00" in lines[1]

    # the Canvas export: every roster student, each grade the JSON's total
    cli(
        "lms-export",
        "canvas",
        out,
        "--roster",
        tmp_path / "roster.csv",
        "--out",
        tmp_path / "canvas.csv",
        "--column",
        "MHA (4242)",
        cwd=KIT,
    )
    exported = list(csv.reader(io.StringIO((tmp_path / "canvas.csv").read_text())))
    assert exported[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "MHA (4242)"]
    grades = {row[2]: float(row[5]) for row in exported[2:]}
    assert len(grades) == CLASS
    for _, _, sis in students:
        assert grades[sis] == pytest.approx(json.loads((out / f"{sis}.json").read_text())["total"], abs=0.005)
    assert grades["S004"] == pytest.approx(grades["S000"] - 20.0 - (100.0 - data["S004"]["score"]))
