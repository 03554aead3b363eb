"""The class report attacked as a student would: make an innocent classmate look like a copier,
hide a real copy, crash the report (or make it eat the machine), inject HTML or script through
names, messages or code. Each attack is kept here as a test (docs/threat-model.md, "The class
report").

The report reads only the out directory (reading.py): the results' JSONs, the code grading kept
(out/code/), the pictures. The fast tests build out directories by hand, hostile files included;
the slow one grades a hostile class for real, deletes its folders and reports it.
"""

import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.engine.judge import kept_code
from autograder.engine.scan.submission import SOURCE_LIMIT, submission_files
from autograder.publish.report import data as report
from autograder.publish.report import reading, similarity
from autograder.publish.report.html import render
from autograder.routes.cli.report import build_report
from conftest import KIT
from disguise import KINDS, disguise, independent_students, random_function, skeleton
from test_report import CHROMIUM, IN_CI, good, needs, tiny_png

SKELETON = skeleton()


def write_result(out: Path, sid: str, files: dict = None, result: dict = None) -> dict:
    """out/<sid>.json and, where `files` is given, the code grading kept of it, as batch.py
    writes them (the code first, the result naming its digest)."""
    data = dict(result or good(), submission=f"/class/{sid}")
    if files is not None:
        data["code"] = kept_code.write(out, sid, kept_code.keep({k: v.encode() for k, v in files.items()}))
    (out / f"{sid}.json").write_text(json.dumps(data))
    return data


def entries_by_id(out):
    return {entry["id"]: entry for entry in reading.load_out_dirs([out])}


# ------------------------------------------------------------------------------ crash the report
def test_hostile_files_in_the_out_directory_cost_their_student_alone(tmp_path):
    """Every file of an out directory that is not what the grader wrote is read within bounds,
    never followed, never waited on: one link to /dev/zero as a result (it used to make the
    report read until it ran out of memory), a pipe, a directory, JSON nested past the parser,
    a file over the limit, NaN scores, fields of the wrong kind. Each is that student's problem
    ("unreadable_result"); everyone else is reported, and the HTML is written."""
    out = tmp_path / "grades"
    out.mkdir()
    students = independent_students(3)
    for i, files in enumerate(students):
        write_result(out, f"ok{i}", files)
    os.symlink("/dev/zero", out / "zero.json")
    os.mkfifo(out / "pipe.json")
    (out / "folder.json").mkdir()
    (out / "deep.json").write_text("[" * 100_000)
    (out / "malformed.json").write_text('{"steps": [')
    with open(out / "huge.json", "wb") as f:
        f.write(b'{"steps": [], "pad": "' + b"x" * reading.RESULT_LIMIT + b'"}')
    nan = good()
    nan["score"] = float("nan")
    (out / "nan.json").write_text(json.dumps(nan))
    wrong = good()
    wrong["steps"][0]["checks"][0]["points"] = "ten"
    (out / "wrong.json").write_text(json.dumps(wrong))
    strange = good()
    strange["steps"] = {"not": "a list"}
    (out / "strange.json").write_text(json.dumps(strange))
    kit = dict(good(), kit_files={"tampering": [{"file": ["not", "a", "name"]}]})
    (out / "kit.json").write_text(json.dumps(kit))
    entries = entries_by_id(out)
    hostile = {"zero", "pipe", "folder", "deep", "malformed", "huge", "nan", "wrong", "strange", "kit"}
    assert {sid for sid, e in entries.items() if e["problem"] == "unreadable_result"} == hostile
    assert all(entries[f"ok{i}"]["result"] is not None and entries[f"ok{i}"]["code"] for i in range(3))
    data = report.build(list(entries.values()))
    assert data["summary"]["not_graded_reasons"] == {"unreadable_result": len(hostile)}
    assert data["summary"]["graded"] == 3
    html = render(data)
    assert html.count('<section class="student"') == 3 + len(hostile)


def test_hostile_kept_code_and_pictures_are_not_read(tmp_path):
    """The code and the pictures beside a result are read only as the grader wrote them: a kept
    code file replaced by a link to a device, or edited after grading (its digest no longer the
    result's), is not compared and the report says why; a picture that is a link to /dev/zero,
    or not a PNG, or a path the JSON names outside the out directory, is not embedded."""
    out = tmp_path / "grades"
    out.mkdir()
    students = independent_students(3)
    for i, files in enumerate(students):
        write_result(out, f"s{i}", files)
    write_result(out, "copy", students[0])
    (out / "code" / "s1.json").unlink()
    os.symlink("/dev/zero", out / "code" / "s1.json")
    edited = json.loads((out / "code" / "s2.json").read_text())
    edited["files"][0]["text"] = "# edited after grading\n"
    (out / "code" / "s2.json").write_text(json.dumps(edited))
    entries = entries_by_id(out)
    assert (entries["s1"]["code"], entries["s1"]["code_note"]) == (None, "code_missing")
    assert (entries["s2"]["code"], entries["s2"]["code_note"]) == (None, "code_mismatch")
    found = similarity.find_similar(list(entries.values()), SKELETON)
    assert [(p["a"], p["b"]) for p in found["pairs"]] == [("copy", "s0")]
    assert found["not_compared"] == {"code_mismatch": ["s2"], "code_missing": ["s1"]}

    (out / "pictures" / "s0").mkdir(parents=True)
    os.symlink("/dev/zero", out / "pictures" / "s0" / "zero.png")
    (out / "pictures" / "s0" / "text.png").write_text("not a picture")
    tiny_png(out / "pictures" / "s0" / "real.png")
    result = json.loads((out / "s0.json").read_text())
    result["steps"][0]["pictures"] = ["pictures/s0/zero.png", "pictures/s0/text.png", "/dev/zero", "real.png"]
    (out / "s0.json").write_text(json.dumps(result))
    assert entries_by_id(out)["s0"]["pictures"] == {"attention": [str(out / "pictures" / "s0" / "real.png")]}


def test_hostile_code_kept_by_grading_does_not_stop_the_report(tmp_path):
    """Code grading took and kept as it was: binary junk, undecodable bytes (kept as U+FFFD),
    nesting past the parser, one line of 200,000 characters. The report compares what it can,
    and shows at most SHOWN_LINES lines of LINE_CHARS characters of any of it."""
    out = tmp_path / "grades"
    out.mkdir()
    hostile = {
        "attention.py": "\x00\x01\x1b[2J\x07" * 2000,
        "heads.py": "x = " + "(" * 150 + "1" + ")" * 150 + "\ny = a" + ".b" * 5000 + "\n",
        "masking.py": "x = '" + "<script>" * 25_000 + "'\n",
    }
    data = kept_code.keep({name: text.encode() for name, text in hostile.items()} | {"mha.py": b"\xff\xfe\x00bad"})
    assert "\ufffd" in next(r["text"] for r in data["files"] if r["path"] == "mha.py")
    for sid in ("a", "b"):
        result = dict(good(), submission=sid, code=kept_code.write(out, sid, data))
        (out / f"{sid}.json").write_text(json.dumps(result))
    found = similarity.find_similar(reading.load_out_dirs([out]), SKELETON, min_overlap=1)
    assert found["compared"] == 2
    for pair in found["pairs"]:
        for side in pair["regions"]:
            lines = [line for region in side["files"] for line, _ in region["lines"]]
            assert len(lines) <= similarity.SHOWN_LINES + 2 * len(side["files"])
            assert all(len(line) <= similarity.LINE_CHARS + 10 for line in lines)
            assert not any("\x1b" in line or "\x00" in line for line in lines)


# ------------------------------------------------------------------------- frame an innocent student
def test_a_package_of_links_to_a_classmates_files_is_not_that_classmates_code(tmp_path):
    """Staging refuses links, so grading takes nothing of a package that is only links to a
    classmate's files: nothing is kept, nothing is compared, and the report says so. (The report
    used to read the folder again itself, follow the links, and pair the two at 100 %.)"""
    innocent = tmp_path / "class" / "innocent"
    framer = tmp_path / "class" / "framer"
    (framer / "mha").mkdir(parents=True)
    for name, text in independent_students(1)[0].items():
        (innocent / "mha").mkdir(parents=True, exist_ok=True)
        (innocent / "mha" / name).write_text(text)
        os.symlink(innocent / "mha" / name, framer / "mha" / name)
    os.symlink("/dev/zero", framer / "mha" / "zero.py")
    os.mkfifo(framer / "mha" / "pipe.py")
    assert submission_files(framer, "mha") == {}
    out = tmp_path / "grades"
    out.mkdir()
    for sid, folder in (("innocent", innocent), ("framer", framer)):
        kept = kept_code.keep(submission_files(folder, "mha"))
        (out / f"{sid}.json").write_text(json.dumps(dict(good(), code=kept_code.write(out, sid, kept))))
    found = similarity.find_similar(reading.load_out_dirs([out]), SKELETON)
    assert found["pairs"] == [] and found["not_compared"] == {"code_empty": ["framer"]}


def test_a_classmates_code_pasted_as_dead_code_does_not_pair_them():
    """A student who pastes a classmate's whole solution into their own as code that never runs
    (unused functions, a branch on False) does not make the classmate look like their copier:
    dead code is not compared."""
    students = independent_students(4)
    own, innocent = students[1], students[2]
    framed = dict(own)
    for name, text in innocent.items():
        stem = name.removesuffix(".py")
        framed[f"{stem}_unused.py"] = text.replace("def ", "def unused_").replace("class ", "class Unused")
    framed["mha.py"] += "\n\nif False:\n" + "".join(f"    {line}\n" for line in innocent["attention.py"].splitlines())
    entries = [{"id": sid, "result": {}, "code": files} for sid, files in [("framer", framed), ("innocent", innocent)]]
    entries += [{"id": f"other{i}", "result": {}, "code": files} for i, files in enumerate([students[0], students[3]])]
    assert similarity.find_similar(entries, SKELETON)["pairs"] == []


def test_a_student_can_only_add_to_their_own_code_and_the_figures_say_whose_is_in_whose():
    """A student controls only their own package. Where they run a classmate's whole solution
    beside code of their own, the pair is listed, and its figures say which way: all of the
    classmate's code is in the student's, not all of the student's in the classmate's."""
    innocent = independent_students(3)[2]
    extra = "import torch\nimport torch.nn.functional as F\n\n" + random_function(random.Random(2), "helper0", 20)
    framed = {**innocent, "extra.py": extra + "\nhelper0(torch.ones(2, 2), torch.ones(2, 2))\n"}
    entries = [{"id": sid, "result": {}, "code": files} for sid, files in [("framer", framed), ("innocent", innocent)]]
    pair = similarity.find_similar(entries, SKELETON)["pairs"][0]
    assert (pair["a"], pair["b"], pair["similarity_b"]) == ("framer", "innocent", 1.0)
    assert pair["similarity_a"] < 0.9


# ------------------------------------------------------------------------------------ hide a copy
def test_a_copy_padded_past_what_is_kept_is_still_compared():
    """Grading keeps the smallest files first: a copier who adds a file of a megabyte of padding
    loses that file from the comparison, not the copied ones; the report says the code was kept
    in part."""
    students = independent_students(4)
    copy = {name: text.encode() for name, text in disguise(students[0], random.Random(3), KINDS).items()}
    copy["padding_file.py"] = b"x = 1\n" * (SOURCE_LIMIT // 6)
    kept = kept_code.keep(copy)
    assert sum(len(r.get("text", "")) for r in kept["files"]) <= kept_code.KEEP_BYTES
    files = {r["path"]: r["text"] for r in kept["files"] if "text" in r}
    assert "padding_file.py" not in files and "attention.py" in files
    entries = [{"id": f"s{i}", "result": {}, "code": f} for i, f in enumerate(students)]
    entries.append({"id": "copy", "result": {}, "code": files, "code_note": "code_partial"})
    found = similarity.find_similar(entries, SKELETON)
    assert [(p["a"], p["b"]) for p in found["pairs"]] == [("copy", "s0")]
    assert found["not_compared"] == {"code_partial": ["copy"]}


def test_live_code_added_to_a_copy_cannot_hide_it():
    """Code a copier adds that does run (their own helpers called at import, dead functions
    named like attributes the code reads, so that reachability keeps them) lowers the share of
    the copy found in the original, never the share of the original found in the copy: the
    pair is still listed, at 100 % on the original's side."""
    students = independent_students(5)
    rng = random.Random(4)
    copy = disguise(students[0], rng, KINDS)
    helpers = "".join(random_function(rng, f"helper{i}", 12) + "\n\n" for i in range(8))
    calls = "".join(f"helper{i}(torch.ones(2, 2), torch.ones(2, 2))\n" for i in range(8))
    named_like_attributes = "def weight(x):\n    return x * 3\n\n\ndef dtype(x):\n    return x + 1\n"
    copy["padding_live.py"] = (
        "import torch\nimport torch.nn.functional as F\n\n" + helpers + calls + named_like_attributes
    )
    entries = [{"id": f"s{i}", "result": {}, "code": files} for i, files in enumerate(students)]
    entries.append({"id": "t_copy", "result": {}, "code": copy})
    pairs = similarity.find_similar(entries, SKELETON)["pairs"]
    assert [(p["a"], p["b"]) for p in pairs] == [("s0", "t_copy")]
    assert pairs[0]["similarity_a"] >= 0.95 and pairs[0]["similarity_b"] < 0.8


# --------------------------------------------------------------------------------- inject markup
PAYLOAD = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'
PROBE = """<script>
window.addEventListener("load", function () {
  var out = document.createElement("pre"); out.id = "probe";
  out.textContent = JSON.stringify({pwned: !!window.__pwned, scripts: document.scripts.length,
    images: document.querySelectorAll("img:not(.picture)").length, text: document.body.innerText.indexOf("__pwned") >= 0});
  document.body.appendChild(out);
});
</script>"""


@needs("jinja2")
@pytest.mark.skipif(
    CHROMIUM is None and not IN_CI, reason="no chromium executable (Debian: apt-get install chromium); CI installs it"
)
def test_markup_in_names_messages_and_code_is_shown_as_text_in_a_browser(tmp_path):
    """A student controls their folder's name, what their code prints, the messages its errors
    carry, and their code: each reaches the report. Opened in Chromium, none of it runs or
    becomes an element; all of it is shown as text."""
    out = tmp_path / "grades"
    out.mkdir()
    code = {name: f"# {PAYLOAD}\n{text}\nLABEL = '{PAYLOAD}'\n" for name, text in independent_students(1)[0].items()}
    for sid in ("a", "b"):
        result = good()
        result["output"] = PAYLOAD
        result["steps"][0]["checks"][0].update(passed=False, points=0.0, message=PAYLOAD, message_id="values")
        result["steps"][0]["diagnoses"] = [{"id": "scale_by_d_model", "message": PAYLOAD}]
        write_result(out, sid, code, result)
        data = json.loads((out / f"{sid}.json").read_text())
        data["submission"] = f"/class/{PAYLOAD}"
        (out / f"{sid}.json").write_text(json.dumps(data))
    data = build_report([out])
    assert data["similarity"]["pairs"], "the two identical packages are listed, with their code"
    html = render(data, "en", [out])
    assert "<script>window" not in html and "<img src=x" not in html
    page = tmp_path / "page.html"
    page.write_text(html.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    completed = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    found = re.search(r'<pre id="probe">(.*?)</pre>', completed.stdout, re.S)
    assert found, completed.stderr[-2000:]
    probe = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert probe == {"pwned": False, "scripts": 1, "images": 0, "text": True}


# --------------------------------------------------------------------------- a hostile class, for real
@pytest.mark.slow
@needs("jinja2")
def test_a_hostile_class_is_reported_from_what_grading_accepted_alone(tmp_path):
    """A class graded for real with `grade --out`: an innocent student; one whose package is only
    links to the innocent's files; one with a link to /dev/zero and a pipe among their files;
    one with a file over the size limit; one nested past staging's depth; one with binary junk
    and undecodable bytes; a disguised copy (renamed, reordered, padded, moved into a
    sub-package) of a classmate. The class's folders are then deleted: the report is made from
    the out directory alone, lists the copy and its source and no other pair, and says whose
    code was not compared and why."""
    students = independent_students(6)  # each hostile student a style of their own
    cls = tmp_path / "class"

    def package(sid, files):
        for name, text in files.items():
            (cls / sid / "mha" / name).parent.mkdir(parents=True, exist_ok=True)
            (cls / sid / "mha" / name).write_text(text)
        return cls / sid / "mha"

    innocent = package("innocent", students[0])
    (cls / "framer" / "mha").mkdir(parents=True)
    for path in innocent.iterdir():
        os.symlink(path, cls / "framer" / "mha" / path.name)
    device = package("device", students[1])
    (device / "attention.py").unlink()
    os.symlink("/dev/zero", device / "attention.py")
    os.mkfifo(device / "pipe.py")
    huge = package("huge", students[2])
    (huge / "big.py").write_bytes(b"x = 1\n" * (SOURCE_LIMIT // 5))
    deep = package("deep", students[3])
    nested = deep
    for level in range(20):
        nested = nested / f"d{level}"
    nested.mkdir(parents=True)
    (nested / "x.py").write_text("x = 1\n")
    junk = package("junk", students[4])
    (junk / "attention.py").write_bytes(bytes(range(256)) * 40)
    (junk / "heads.py").write_bytes(b"def split_heads(x, n):\n    return x  # \xff\xfe\n")
    package("source", students[5])
    package("copier", disguise(students[5], random.Random(11), KINDS))
    out = tmp_path / "grades"
    run = [sys.executable, "-m", "autograder"]
    completed = subprocess.run(
        [*run, "grade", *sorted(cls.iterdir()), "--out", out, "--seed", "5"],
        cwd=KIT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    shutil.rmtree(cls)
    completed = subprocess.run(
        [*run, "report", out, "--html", tmp_path / "r.html", "--json", tmp_path / "r.json"],
        cwd=KIT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["summary"]["submissions"] == 8
    assert [(p["a"], p["b"]) for p in data["similarity"]["pairs"]] == [("copier", "source")]
    assert data["similarity"]["clusters"] == [{"members": ["copier", "source"], "pairs": 1, "top": 1.0}]
    assert "framer" in data["similarity"]["not_compared"]["code_empty"]
    kept = json.loads((out / "code" / "huge.json").read_text())
    assert {r["path"] for r in kept["files"]} == set(students[2])  # the file over the limit: not taken
    assert "\ufffd" in next(
        r["text"] for r in json.loads((out / "code" / "junk.json").read_text())["files"] if r["path"] == "heads.py"
    )
    html = (tmp_path / "r.html").read_text()
    assert html.count('<section class="student"') == 8 and 'id="instructors-only"' in html
