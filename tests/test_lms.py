"""engine/operations/lms.py: an LMS's bulk download in (Canvas's submissions.zip, Moodle's folder
per participant), its gradebook import out (Canvas's columns, Moodle's grading worksheet),
through a roster; files in the shapes the LMSs write, names generated."""

import csv
import io
import random
import zipfile

import pytest

from autograder.engine.judge.results import GradeResult, StepResult
from autograder.engine.operations import lms

CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def canvas_roster(path, students):
    """A roster in the shape of Canvas's own gradebook export (with its Points Possible row)."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*CANVAS_HEADER, "MHA (4242)"])
        writer.writerow(["    Points Possible", "", "", "", "", "100.00"])
        for name, canvas_id, sis in students:
            writer.writerow([name, canvas_id, sis, f"{sis}@uni", "Sec 1", ""])
    return path


def sortable(name):
    last, first = name.split()[1], name.split()[0]
    return (last + first).lower()


@pytest.mark.parametrize("seed", range(3))
def test_canvas_zip_becomes_a_folder_per_roster_student(tmp_path, seed):
    rng = random.Random(seed)
    students = [(f"Ann{i} Lee{i}", str(1000 + i), f"S{i:03d}") for i in range(rng.randint(3, 9))]
    roster = lms.read_roster(canvas_roster(tmp_path / "roster.csv", students))
    assert [s.id for s in roster] == [sis for _, _, sis in students] and roster[0].canvas_id == "1000"
    download = tmp_path / "submissions.zip"
    late, expected = set(), {}
    with zipfile.ZipFile(download, "w") as z:
        for name, canvas_id, sis in students:
            flag = "_LATE" if rng.random() < 0.4 else ""
            if flag:
                late.add(sis)
            again = rng.choice(["", "-1", "-2"])  # Canvas's suffix for a file re-submitted under its name
            for file in ("attention", "masking"):
                z.writestr(f"{sortable(name)}{flag}_{canvas_id}_{rng.randint(10**6, 10**7)}_{file}{again}.py", file)
            expected[sis] = ["attention.py", "masking.py"]
        z.writestr("leejohn_9999_123_attention.py", "not on the roster")
        z.writestr("readme.txt", "not a submission name")
    imported, skipped = lms.import_canvas(download, tmp_path / "subs", roster)
    assert {entry.id: sorted(entry.files) for entry in imported} == expected
    for sis, files in expected.items():
        assert sorted(p.name for p in (tmp_path / "subs" / sis).iterdir()) == files
    assert {entry.id for entry in imported if entry.late} == late
    assert {why for _, why in skipped} == {"Canvas user 9999 is not on the roster", "not a Canvas submission name"}
    rows = list(csv.DictReader((tmp_path / "subs" / lms.LMS_CSV).open()))
    assert {row["submission"] for row in rows if row["lms_late"] == "true"} == late


def test_a_hostile_name_in_a_canvas_zip_refuses_it_whole(tmp_path):
    download = tmp_path / "submissions.zip"
    with zipfile.ZipFile(download, "w") as z:
        z.writestr("leeann_1000_1_attention.py", "x")
        z.writestr("../leeann_1000_2_masking.py", "x")  # outside the target
    with pytest.raises(lms.LmsError, match="archive_unsafe_name"):
        lms.import_canvas(download, tmp_path / "subs")
    assert not (tmp_path / "subs").exists() and not (tmp_path / "leeann_1000_2_masking.py").exists()


def test_moodle_download_in_folders_and_flat(tmp_path):
    roster_path = tmp_path / "roster.csv"
    roster_path.write_text("id,name,email,moodle_id\ns1,Ann Lee,ann@uni,501\ns2,Bo Kim,bo@uni,502\n")
    roster = lms.read_roster(roster_path)
    download = tmp_path / "moodle"
    (download / "Ann Lee_501_assignsubmission_file_" / "mha").mkdir(parents=True)
    (download / "Ann Lee_501_assignsubmission_file_" / "mha" / "attention.py").write_text("a")
    (download / "Bo Kim_502_assignsubmission_file_homework.zip").write_bytes(b"PK")  # flat
    (download / "Bo Kim_502_assignsubmission_onlinetext_onlinetext.html").write_text("<p>")
    imported, skipped = lms.import_moodle(download, tmp_path / "subs", roster)
    assert {e.id: e.files for e in imported} == {"s1": ["mha/attention.py"], "s2": ["homework.zip"]}
    assert "onlinetext" in skipped[0][1]


def result(score, total=None):
    steps = [StepResult(id="padding", title="p", score=score, max_score=100.0, checks=[])]
    return GradeResult(assignment="mha", submission="x", steps=steps, total=total)


def test_canvas_and_moodle_exports_have_their_documented_columns_and_the_grade_of_record(tmp_path):
    roster_path = tmp_path / "roster.csv"
    roster_path.write_text(
        "id,name,email,canvas_id,sis_id,moodle_id\ns1,Ann Lee,ann@uni,1000,S1,501\ns2,Bo Kim,bo@uni,1001,S2,502\n"
    )
    roster = lms.read_roster(roster_path)
    results = {"s1": result(80.0, total=75.0), "s2": None}
    rows = list(csv.reader(io.StringIO(lms.canvas_csv(results, roster, "MHA (4242)", 100.0))))
    assert rows[0] == [*CANVAS_HEADER, "MHA (4242)"] and rows[1][0] == "Points Possible"
    assert rows[2] == ["Ann Lee", "1000", "S1", "", "", "75.00"] and rows[3][-1] == ""
    rows = list(csv.reader(io.StringIO(lms.moodle_csv(results, roster, 100.0))))
    assert rows[0] == ["Identifier", "Full name", "Email address", "Grade", "Maximum Grade", "Feedback comments"]
    assert rows[1][:5] == ["Participant 501", "Ann Lee", "ann@uni", "75.00", "100.00"]


def test_a_roster_without_ids_or_with_one_twice_is_named_by_line(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("name,email\nAnn,a@x\n")
    with pytest.raises(lms.LmsError, match="line 1: a roster needs an `id`"):
        lms.read_roster(path)
    path.write_text("id,name\ns1,Ann\ns1,Bo\n")
    with pytest.raises(lms.LmsError, match="line 3: id s1 again"):
        lms.read_roster(path)


def test_moodle_worksheet_times_reach_lms_csv_with_the_courses_offset(tmp_path):
    import zoneinfo

    sheet = tmp_path / "worksheet.csv"
    with sheet.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["Identifier", "Full name", "Email address", "Status", "Grade", "Last modified (submission)"])
        writer.writerow(
            ["Participant 501", "Ann Lee", "ann@uni", "Submitted", "", "Thursday, 1 October 2026, 11:59 PM"]
        )
        writer.writerow(["Participant 502", "Bo Kim", "bo@uni", "No submission", "", "-"])
    times = lms.worksheet_times(sheet, zoneinfo.ZoneInfo("Asia/Seoul"))
    assert times == {"501": "2026-10-01T23:59:00+09:00"}
    download = tmp_path / "moodle" / "Ann Lee_501_assignsubmission_file_"
    download.mkdir(parents=True)
    (download / "attention.py").write_text("a")
    lms.import_moodle(tmp_path / "moodle", tmp_path / "subs", None, times)
    from autograder.engine.operations import gradebook

    assert gradebook.read_times(tmp_path / "subs" / lms.LMS_CSV)["Ann_Lee_501"]["at"] == "2026-10-01T23:59+09:00"
    sheet.write_text(sheet.read_text().replace("Thursday, 1 October 2026", "목요일, 1 10월 2026"))
    with pytest.raises(lms.LmsError, match="line 2: .* English"):
        lms.worksheet_times(sheet, zoneinfo.ZoneInfo("Asia/Seoul"))
