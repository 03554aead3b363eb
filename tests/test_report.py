"""The class report (`python -m autograder report`): its numbers, its HTML, and a real class.

Fast tests feed report.py hand-made result dicts (the JSON shape of docs/instructors.md); the slow one grades
a small class for real (the reference, the skeleton, planted mistakes, two near-copies) and
checks the report against the JSONs the grader wrote; one opens the HTML in headless Chromium.
"""

import csv
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import zlib
from importlib.util import find_spec
from pathlib import Path

import pytest

from autograder.engine.course import config as grading_config
from autograder.publish.report import data as report
from autograder.publish.report import html as report_html
from autograder.publish.report import reading, similarity
from autograder.publish.report.html import REPORT_CATALOG, render
from conftest import ASSIGNMENTS, KIT, SOLUTIONS
from planted import PLANTED

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
IN_CI = bool(os.environ.get("MHA_LAB_CI"))  # CI installs the instructor extra and chromium: never skip there


def needs(module):
    return pytest.mark.skipif(
        not IN_CI and find_spec(module) is None, reason=f"{module} is not installed: pip install -e .[instructor]"
    )


def check(cid, passed, visibility="public", points=1.0, message_id=None, message=""):
    return {
        "id": cid,
        "passed": passed,
        "points": points if passed else 0.0,
        "max_points": points,
        "visibility": visibility,
        "message": message,
        "message_id": message_id,
    }


def step(sid, checks, diagnoses=(), status="graded"):
    return {
        "id": sid,
        "title": sid.title(),
        "score": sum(c["points"] for c in checks),
        "max_score": sum(c["max_points"] for c in checks),
        "status": status,
        "checks": checks,
        "diagnoses": [{"id": d, "message": f"explained: {d}"} for d in diagnoses],
    }


def result(steps, duration=None, output=""):
    data = {
        "assignment": "MHA",
        "submission": "",
        "score": sum(s["score"] for s in steps),
        "max_score": sum(s["max_score"] for s in steps),
        "seed": 1,
        "output": output,
        "sandbox": [],
        "steps": steps,
    }
    if duration is not None:
        data["duration_s"] = duration
    return data


def entry(sid, data, path="", code=None, pictures=None):
    return {
        "id": sid,
        "path": path,
        "result": data,
        "file": None,
        "problem": None,
        "code": code,
        "code_note": None,
        "pictures": pictures or {},
    }


def good(duration=1.0):
    return result(
        [
            step("attention", [check("basic_weights", True), check("random_sizes", True, "hidden")]),
            step("masking", [check("causal", True), check("hidden_masks", True, "hidden")]),
        ],
        duration,
    )


def scale_mistake(duration=1.0):
    return result(
        [
            step(
                "attention",
                [check("basic_weights", False), check("random_sizes", False, "hidden")],
                ["scale_by_d_model"],
            ),
            step("masking", [check("causal", True), check("hidden_masks", True, "hidden")]),
        ],
        duration,
    )


def fitted_to_public():
    return result(
        [
            step(
                "attention",
                [check("basic_weights", True), check("random_sizes", False, "hidden")],
                ["no_known_mistake"],
            ),
            step("masking", [check("causal", True), check("hidden_masks", True, "hidden")]),
        ],
        2.5,
    )


def hang_and_crash():
    return result(
        [
            step(
                "attention",
                [
                    check("basic_weights", False, message_id="timeout", message="stopped after 10 s"),
                    check("random_sizes", False, "hidden", message_id="worker_crashed"),
                ],
            ),
            step("masking", [check("causal", None), check("hidden_masks", False, "hidden")]),
        ],
        30.0,
    )


def todo():
    return result(
        [
            step("attention", [check("basic_weights", False, message_id="not_implemented")], status="not_implemented"),
            step("masking", [check("causal", False, message_id="not_implemented")], status="not_implemented"),
        ]
    )


def small_class():
    return [
        entry("ann", good(0.5)),
        entry("bo", scale_mistake()),
        entry("cy", scale_mistake()),
        entry("di", fitted_to_public()),
        entry("ed", hang_and_crash()),
        entry("fay", todo()),
        entry("gus", None),
    ]


def test_summary_counts_scores_and_says_why_some_were_not_graded():
    summary = report.summary(small_class())
    scores = [4.0, 2.0, 2.0, 3.0, 0.0]  # fay (all TODO) and gus (no result) are not in the mean
    assert summary["submissions"] == 7 and summary["graded"] == 5
    assert summary["mean"] == pytest.approx(statistics.fmean(scores), abs=1e-4)
    assert summary["median"] == pytest.approx(statistics.median(scores))
    assert summary["full_marks"] == 1
    assert sum(b["count"] for b in summary["histogram"]) == 5
    assert summary["histogram"][-1]["count"] == 1  # the top bin is closed: 4/4 lands in it
    assert {p["id"]: p["reason"] for p in summary["not_graded"]} == {
        "fay": "nothing_implemented",
        "gus": "grader_failed",
    }
    started = todo()
    started["steps"][0] = good()["steps"][0]  # one step done, one still a TODO: graded
    assert report.not_graded_reason(started) is None


def test_misconceptions_are_counted_per_student_and_sorted_by_frequency():
    docs = {"attention": {"file": "mha/attention.py", "text": "divide by sqrt(d_k)"}}
    rows = report.misconceptions([e for e in small_class() if e["result"]], docs)
    assert [(r["id"], r["count"], r["steps"], r["students"]) for r in rows] == [
        ("scale_by_d_model", 2, ["attention"], ["bo", "cy"]),
        ("no_known_mistake", 1, ["attention"], ["di"]),
    ]
    assert rows[0]["message"] == "explained: scale_by_d_model"
    assert rows[0]["teaching"] == {"attention": docs["attention"]}
    assert rows[1]["unexplained"]
    # one student with the same mistake seen in two steps is one student, in both steps
    twice = scale_mistake()
    twice["steps"][1]["diagnoses"] = twice["steps"][0]["diagnoses"]
    again = report.misconceptions([entry("bo", twice), entry("cy", scale_mistake())], docs)
    assert [(r["count"], r["steps"]) for r in again] == [(2, ["attention", "masking"])]


def test_one_mistake_is_one_misconception_not_its_symptom_too():
    """A softmax over the wrong axis was diagnosed `softmax_wrong_dim` and, by a probe, "rows do
    not sum to 1" (a symptom, said in its support): the report counted two misconceptions for
    the one mistake. A symptom counts only where no cause was named; two causes are two."""

    def diagnosed(*diagnoses):
        attention = step("attention", [check("basic_weights", False)])
        attention["diagnoses"] = [{"id": i, "message": i, **({"symptom": True} if s else {})} for i, s in diagnoses]
        return result([attention])

    cause_and_symptom = diagnosed(("softmax_wrong_dim", False), ("rows_not_normalised", True))
    symptom_only = diagnosed(("rows_not_normalised", True), ("weights_negative", True))
    two_causes = diagnosed(("no_scale", False), ("k_not_transposed", False), ("rows_not_normalised", True))
    rows = report.misconceptions(
        [entry("bo", cause_and_symptom), entry("cy", symptom_only), entry("di", two_causes)], {}
    )
    assert {r["id"]: r["students"] for r in rows} == {
        "softmax_wrong_dim": ["bo"],
        "rows_not_normalised": ["cy"],
        "no_scale": ["di"],
        "k_not_transposed": ["di"],
    }
    students = report.students([entry("bo", cause_and_symptom)])
    assert students[0]["diagnoses"] == ["softmax_wrong_dim"]


def test_checks_are_ordered_by_pass_rate_hardest_first():
    steps = report.per_step([e for e in small_class() if e["result"]])
    attention = next(s for s in steps if s["id"] == "attention")
    assert [(c["id"], c["passed"], c["failed"]) for c in attention["checks"]] == [
        ("random_sizes", 1, 4),
        ("basic_weights", 2, 4),
    ]
    assert attention["outcomes"] == {"full": 1, "partial": 1, "zero": 3, "not_implemented": 1, "not_checked": 0}
    masking = next(s for s in steps if s["id"] == "masking")
    causal = next(c for c in masking["checks"] if c["id"] == "causal")
    assert (causal["passed"], causal["failed"], causal["not_run"]) == (4, 1, 1)


def test_public_vs_hidden_lists_only_who_passes_every_public_check():
    rows = report.public_vs_hidden([e for e in small_class() if e["result"]])
    assert rows == [
        {"step": "attention", "count": 1, "students": [{"id": "di", "hidden_failed": ["random_sizes"], "lost": 1.0}]}
    ]


def test_runtime_finds_the_slowest_hangs_and_crashes():
    runtime = report.runtime([e for e in small_class() if e["result"]])
    assert [row["id"] for row in runtime["slowest"]][:2] == ["ed", "di"]
    assert [(h["id"], h["step"], h["checks"], h["count"]) for h in runtime["hangs"]] == [
        ("ed", "attention", ["basic_weights"], 1)
    ]
    assert [(c["id"], c["checks"]) for c in runtime["crashes"]] == [("ed", ["random_sizes"])]
    # a crash that fails every check of a step is one row per student and step, with the count
    crashed = result(
        [
            step("attention", [check(f"c{i}", False, message_id="worker_exited") for i in range(16)]),
            step("masking", [check("causal", False, message_id="worker_exited")]),
        ]
    )
    rows = report.runtime([entry("crash", crashed)])["crashes"]
    assert [(r["step"], r["count"]) for r in rows] == [("attention", 16), ("masking", 1)]
    # results written before message ids were in the JSON: the English text says it
    old = hang_and_crash()
    for s in old["steps"]:
        for c in s["checks"]:
            c.pop("message_id")
    assert len(report.runtime([entry("old", old)])["hangs"]) == 1


def test_load_out_dirs_reads_jsons_and_the_rows_the_grader_failed_on(tmp_path):
    out = tmp_path / "grades"
    out.mkdir()
    (out / "ann.json").write_text(json.dumps(good()))
    (out / "report.json").write_text(json.dumps({"summary": {}}))  # not a result: ignored
    with open(out / "grades.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", "path", "attention", "masking", "total", "max_score"])
        writer.writerow(["ann", "/class/ann", 2, 2, 4, 4])
        writer.writerow(["gus", "/class/gus", "", "", "", ""])
    entries = reading.load_out_dirs([out])
    assert [(e["id"], e["path"], e["result"] is not None) for e in entries] == [
        ("ann", "/class/ann", True),
        ("gus", "/class/gus", False),
    ]
    assert entries[0]["code"] is None and entries[0]["code_note"] == "code_not_kept"  # graded before code was kept
    # one result that cannot be read is that student's problem alone, said as such
    (out / "bad.json").write_text("{")
    entries = {e["id"]: e for e in reading.load_out_dirs([out])}
    assert entries["bad"]["problem"] == "unreadable_result" and entries["ann"]["result"] == good()
    assert report.summary(list(entries.values()))["not_graded_reasons"] == {
        "grader_failed": 1,
        "unreadable_result": 1,
    }


OWN_CODE = """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    out = torch.matmul(weights, v)
    return out, weights
"""
OTHER_CODE = """
def scaled_dot_product_attention(q, k, v, mask=None):
    d = q.size(-1)
    logits = torch.einsum("...qd,...kd->...qk", q, k) * d ** -0.5
    if mask is not None:
        logits = torch.where(mask, torch.full_like(logits, -1e9), logits)
    probs = logits.exp() / logits.exp().sum(dim=-1, keepdim=True)
    return torch.einsum("...qk,...kd->...qd", probs, v), probs
"""


def test_similarity_finds_the_copy_and_ignores_the_skeleton():
    skeleton_text = (ASSIGNMENTS / "mha" / "attention.py").read_text()
    head = skeleton_text[: skeleton_text.index("def scaled_dot_product_attention")]  # docstring, imports
    renamed = OWN_CODE.replace("scores", "s").replace("weights", "w")  # renaming hides nothing
    codes = {
        "orig": head + OWN_CODE,
        "copy": head + renamed,
        "other": head + OTHER_CODE,
        "todo1": skeleton_text,
        "todo2": skeleton_text,
    }
    entries = [entry(sid, good(), code={"attention.py": text}) for sid, text in codes.items()]
    found = similarity.find_similar(entries, {"attention.py": skeleton_text}, threshold=0.5, min_overlap=30)
    assert [(p["a"], p["b"]) for p in found["pairs"]] == [("copy", "orig")]
    pair = found["pairs"][0]
    assert pair["similarity_a"] > 0.9 and pair["similarity_b"] > 0.9
    side_b = pair["regions"][1]["files"][0]
    assert pair["regions"][1]["side"] == "b" and side_b["file"] == "attention.py"
    matched = "\n".join(text for text, hit in side_b["lines"] if hit)
    assert "masked_fill" in matched and "import" not in matched  # the skeleton's text is not a match
    shown = [text for text, _ in pair["regions"][0]["files"][0]["lines"]]  # the match, 3 lines around, ⋯ for the rest
    assert shown[0] == "⋯" and "\n".join(shown[1:]).strip() == renamed.strip() and len(shown) < len(head.splitlines())
    assert found["compared"] == 3  # the two all-TODO submissions have nothing of their own


@needs("jinja2")
def test_the_catalog_has_every_key_in_both_languages_and_the_html_uses_it():
    assert set(REPORT_CATALOG["en"]) == set(REPORT_CATALOG["ko"])
    data = report.build(small_class())
    html_ko = render(data, "ko")
    assert "오개념" in html_ko and "유사도" in html_ko and 'lang="ko"' in html_ko
    html_en = render(data, "en")
    assert "Misconceptions" in html_en
    for html in (html_en, html_ko):
        assert "{" not in re.sub(r"<style>.*?</style>", "", html, flags=re.S)  # no placeholder left unfilled


@needs("jinja2")
def test_html_is_self_contained_and_escapes_student_text():
    data = report.build([entry("ann", result(good()["steps"], output="<script>alert(1)</script>"))])
    html = render(data)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html)  # nothing fetched from elsewhere
    assert "<svg" in html and 'id="s-ann"' in html


@needs("jinja2")
def test_the_not_graded_are_counted_apart_and_the_mean_says_what_it_covers():
    html = render(report.build(small_class()))
    assert re.search(r'id="n-graded">5<', html) and re.search(r'id="n-not-graded">2<', html)
    assert REPORT_CATALOG["en"]["summary.covers"].format(count=5, left=2) in html
    assert "<th></th>" not in html  # every column says what it holds (the reason, the message)


@needs("jinja2")
def test_numbers_are_rounded_to_two_decimals_and_the_histogram_ticks_are_even():
    entries = []
    for i, score in enumerate([0.0, 12.5, 33.3333333, 78.2142857, 91.0, 100.0]):
        data = result([step("attention", [check("a", True, points=score), check("b", False, points=100.0 - score)])])
        entries.append(entry(f"s{i}", data))
    html = render(report.build(entries))
    assert "78.21 / 100" in html and "78.214" not in html and "33.333" not in html
    histogram = html[html.index('<svg class="chart"') : html.index("</svg>")]
    ticks = re.findall(r'<text x="[\d.]+" y="186" text-anchor="middle" class="tick">([^<]*)</text>', histogram)
    assert ticks == ["0", "20", "40", "60", "80", "100"]
    assert [report_html.tick_every(n) for n in (10, 5, 12, 7)] == [2, 1, 2, 7]


def test_similar_pairs_are_grouped_into_clusters():
    def pair(a, b, similarity):
        return {"a": a, "b": b, "similarity_a": similarity, "similarity_b": similarity / 2}

    pairs = [pair("a", "b", 0.9), pair("x", "y", 0.95), pair("b", "c", 0.7), pair("a", "c", 0.6)]
    assert [(c["members"], c["pairs"], c["top"]) for c in similarity.clusters(pairs)] == [
        (["a", "b", "c"], 3, 0.9),
        (["x", "y"], 1, 0.95),
    ]


@needs("jinja2")
def test_messages_and_titles_are_put_into_the_report_language():
    from markupsafe import escape

    from autograder.engine.checks import messages

    def values(lang):
        return messages.render(
            "values",
            lang,
            name="out",
            count=3,
            total=4,
            index=(0, 1),
            expected=0.5,
            got=0.25,
            max_abs=0.25,
            max_abs_index=(0, 1),
            max_rel=0.5,
            got_dtype="float64",
            expected_dtype="float64",
            tolerance=messages.render("tolerance", lang, atol=1e-9, rtol=1e-7),
        )

    assert report_html.relocalise(values("en"), "values", "ko") == values("ko")  # the tolerance inside it too
    assert report_html.relocalise(values("ko"), "values", "en") == values("en")
    assert report_html.relocalise("text of another kit", "values", "ko") == "text of another kit"
    assert report_html.relocalise("whatever", "no.such.id", "ko") == "whatever"
    attention = step(
        "attention", [check("weights", False, message_id="values", message=values("en"))], ["scale_by_d_model"]
    )
    attention["title"] = messages.render("step_title.mha.attention", "en")
    attention["diagnoses"][0]["message"] = messages.render("diagnosis.scale_by_d_model", "en")
    masking = step("masking", [check("causal", True)])
    masking["title"] = "A title an instructor wrote"  # not the catalog's: left as it is
    data = report.build([entry("bo", result([attention, masking]))])
    data["assignment"] = {"id": "mha", "title": "MHA"}
    html = render(data, "ko")
    for korean in (
        values("ko"),
        messages.render("diagnosis.scale_by_d_model", "ko"),
        messages.render("step_title.mha.attention", "ko"),
        "A title an instructor wrote",
    ):
        assert str(escape(korean)) in html
    assert messages.render("diagnosis.scale_by_d_model", "en") not in html and "values out of tolerance" not in html


def test_report_json_speaks_the_reports_language(tmp_path):
    """`report --lang ko --json`: the texts for people in report.json (the misconceptions' messages,
    the titles) are in Korean as the HTML's are; ids and numbers are not translated. Without it, the
    messages stayed in the language grading spoke (English)."""
    from autograder.engine.checks import messages

    attention = step("attention", [check("weights", False)], ["scale_by_d_model"])
    attention["title"] = messages.render("step_title.mha.attention", "en")
    attention["diagnoses"][0]["message"] = messages.render("diagnosis.scale_by_d_model", "en")
    data = report.build([entry("bo", result([attention]))])
    data["assignment"] = {"id": "mha", "title": messages.render("assignment_title.mha", "en")}
    korean = report_html.localised(data, "ko")
    assert korean["misconceptions"][0]["message"] == messages.render("diagnosis.scale_by_d_model", "ko")
    assert korean["misconceptions"][0]["id"] == "scale_by_d_model" and korean["lang"] == "ko"
    assert korean["steps"][0]["title"] == messages.render("step_title.mha.attention", "ko")
    assert korean["assignment"]["title"] == messages.render("assignment_title.mha", "ko")
    assert data["misconceptions"][0]["message"] == messages.render("diagnosis.scale_by_d_model", "en")  # a copy
    assert report_html.localised(korean, "en")["misconceptions"][0]["message"] == data["misconceptions"][0]["message"]


def test_report_cli_refuses_a_missing_directory(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "autograder", "report", tmp_path / "nope", "--html", tmp_path / "r.html"],
        cwd=KIT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 2 and "nope" in completed.stderr


# A script added to a copy of the report only (the report itself has none): it records every
# resource the page fetched or failed to fetch, how many SVG shapes were laid out, the pictures'
# decoded widths, how far the page or the student table overflow, and whether Hangul is drawn
# with glyphs of its own (two syllables differ) or as the missing-glyph box (they are the same).
PROBE = """<script>
window.__failed = [];
window.addEventListener("error", function (e) { var t = e.target || {}; window.__failed.push(t.src || t.href || String(e.message)); }, true);
function glyphs(text) {
  var canvas = document.createElement("canvas"); canvas.width = 80; canvas.height = 60;
  var g = canvas.getContext("2d"); g.font = "40px " + getComputedStyle(document.body).fontFamily;
  g.fillText(text, 10, 45); return canvas.toDataURL();
}
window.addEventListener("load", function () {
  var shapes = Array.prototype.slice.call(document.querySelectorAll("svg.chart rect"));
  var drawn = shapes.filter(function (r) { var b = r.getBBox(); return b.width > 0 && b.height > 0; }).length;
  var table = document.getElementById("student-table");
  var out = document.createElement("pre"); out.id = "probe";
  out.textContent = JSON.stringify({charts: document.querySelectorAll("svg.chart").length, drawn: drawn,
    failed: window.__failed, fetched: performance.getEntriesByType("resource").map(function (r) { return r.name; }),
    pictures: Array.prototype.map.call(document.querySelectorAll("img.picture"), function (i) { return i.naturalWidth; }),
    page_overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    table_overflow: table ? table.getBoundingClientRect().width - table.parentElement.clientWidth : null,
    hangul_drawn: glyphs("\uac00") !== glyphs("\ub098")});
  document.body.appendChild(out);
});
</script>"""


def open_in_chromium(html, tmp_path, env=None, probe=PROBE):
    """What `probe` (a script that writes JSON into <pre id="probe">) finds in `html` in Chromium."""
    page = tmp_path / "probe.html"
    page.write_text(html.replace("<head>", "<head>" + probe, 1), encoding="utf-8")
    completed = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
            "--window-size=1280,2000",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    found = re.search(r'<pre id="probe">(.*?)</pre>', completed.stdout, re.S)
    assert found, f"chromium gave no probe result: {completed.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@needs("jinja2")
@pytest.mark.skipif(
    CHROMIUM is None and not IN_CI, reason="no chromium executable (Debian: apt-get install chromium); CI installs it"
)
def test_html_renders_its_charts_in_headless_chromium_and_loads_nothing(tmp_path):
    assert CHROMIUM, "CI must install chromium (.ci/run)"
    data = report.build(small_class())
    probe = open_in_chromium(render(data, "ko"), tmp_path)
    assert probe["failed"] == [] and probe["fetched"] == []
    assert probe["charts"] == 1 + 2 * len(data["steps"])  # the class histogram, per step: outcomes + scores
    assert probe["drawn"] >= 6  # bars with a size, laid out by the browser
    assert probe["pictures"] == []
    # the probe itself can fail: a page that loads something missing is seen
    broken = open_in_chromium(render(data).replace("</body>", '<img src="missing.png"></body>'), tmp_path)
    assert any("missing.png" in url for url in broken["failed"])


def tiny_png(path, width=12, height=5):
    """A real PNG (red pixels), written without an imaging library."""

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\0" + b"\xff\0\0" * width for _ in range(height))
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
    return path


# The steps of a whole assignment, with long ids: the student table must still fit the page.
LONG_STEPS = [step.id for step in grading_config.load(assignment="mha").steps]


def many_steps(scores, diagnoses=()):
    return result(
        [
            step(
                sid,
                [check("a", True, points=score), check("b", False, points=15 - score)],
                diagnoses if sid == "attention" else (),
            )
            for sid, score in zip(LONG_STEPS, scores, strict=True)
        ]
    )


@needs("jinja2")
@pytest.mark.skipif(
    CHROMIUM is None and not IN_CI, reason="no chromium executable (Debian: apt-get install chromium); CI installs it"
)
def test_the_student_table_fits_the_page_and_the_pictures_are_shown(tmp_path):
    picture = tiny_png(tmp_path / "attention-weights.png")
    with_picture = many_steps([15, 15, 10.3333, 15, 0, 12.5, 15, 15, 15], ["scale_by_d_model", "no_known_mistake"])
    with_picture["steps"][4]["pictures"] = [str(picture), str(tmp_path / "gone.png")]  # one deleted since: left out
    pictures = reading.picture_files(tmp_path, "a_student_with_a_long_name", with_picture)
    entries = [entry("a_student_with_a_long_name", with_picture, pictures=pictures)]
    entries += [
        entry(f"student{i:02d}", many_steps([15 - i % 4] * 9, ["mha_split_without_transpose"])) for i in range(12)
    ]
    data = report.build(entries)
    assert data["students"][0]["pictures"] == {"attention": [str(picture)]}
    html = render(data, "en")
    assert html.count('<img class="picture" src="data:image/png;base64,') == 1  # in the file itself
    probe = open_in_chromium(html, tmp_path)
    assert probe["pictures"] == [12]  # decoded: the student's picture, as wide as it was drawn
    assert probe["failed"] == [] and probe["fetched"] == []
    assert probe["page_overflow"] <= 0 and probe["table_overflow"] <= 0


def has_cjk_font():
    try:
        return bool(subprocess.run(["fc-list", ":lang=ko"], capture_output=True, text=True, timeout=60).stdout.strip())
    except OSError:
        return False


@needs("jinja2")
@pytest.mark.skipif(
    (CHROMIUM is None or not has_cjk_font()) and not IN_CI,
    reason="needs chromium and a Korean font (Debian: apt-get install chromium fonts-noto-cjk)",
)
def test_korean_text_is_drawn_with_hangul_glyphs(tmp_path):
    html = render(report.build(small_class()), "ko")
    assert re.search(r"font-family:[^;]*Noto Sans CJK KR", html)  # a font stack that can draw Hangul
    assert open_in_chromium(html, tmp_path)["hangul_drawn"], (
        "Hangul is drawn as missing-glyph boxes: install a Korean font (Debian: fonts-noto-cjk; .ci/run)"
    )


# ---------------------------------------------------------------------------------- a real class
def make_student(root, planted=(), patches=()):
    shutil.copytree(SOLUTIONS / "mha", root / "mha")
    for name in planted:
        mistake = next(p for p in PLANTED if p.name == name)
        target = root / "mha" / mistake.file
        target.write_text(mistake.apply(target.read_text()))
    for file, old, new in patches:
        target = root / "mha" / file
        assert target.read_text().count(old) == 1
        target.write_text(target.read_text().replace(old, new))
    return root


# pad_id honoured only without max_len: every public check passes (they use one or the other),
# the hidden random batches (both at once) fail.
FITTED = (
    "padding.py",
    "ids = torch.full((len(sequences), L), pad_id,",
    "ids = torch.full((len(sequences), L), pad_id if max_len is None else 0,",
)
# A distinctive rewrite of merge_heads shared by two students, one of whom renamed the variables:
# the near-copies the similarity section must find (live code: an unused helper is dead code,
# which the comparison strips).
COPIED = (
    "heads.py",
    "def merge_heads(x):",
    """def merge_heads(x):
    batch, heads, length, width = x.shape
    pieces = [x[:, head] for head in range(heads)]
    stacked = x.new_empty(batch, length, heads * width)
    for head, piece in enumerate(pieces):
        stacked[..., head * width : (head + 1) * width] = piece
    return stacked


def _reference_merge_heads(x):""",
)
COPIED_RENAMED = (COPIED[0], COPIED[1], COPIED[2].replace("pieces", "chunks").replace("stacked", "st"))


@pytest.mark.slow
@needs("jinja2")
def test_a_graded_class_gives_the_numbers_of_its_jsons(tmp_path):
    cls = tmp_path / "class"
    students = [
        make_student(cls / "ref"),
        make_student(cls / "d_model_a", ["scale_by_d_model"]),
        make_student(cls / "d_model_b", ["scale_by_d_model"]),
        make_student(cls / "softmax", ["softmax_wrong_dim"]),
        make_student(cls / "fitted", patches=[FITTED]),
        make_student(cls / "copy_a", patches=[COPIED]),
        make_student(cls / "copy_b", patches=[COPIED_RENAMED]),
    ]
    shutil.copytree(ASSIGNMENTS / "mha", cls / "todo" / "mha")
    students.append(cls / "todo")
    (cls / "empty").mkdir()
    students.append(cls / "empty")
    out = tmp_path / "grades"
    run = [sys.executable, "-m", "autograder"]
    completed = subprocess.run(
        [*run, "grade", *students, "--out", out, "--seed", "11", "--plots"],
        cwd=KIT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr
    completed = subprocess.run(
        [*run, "report", out, "--html", tmp_path / "r.html", "--json", tmp_path / "r.json", "--threshold", "0.5"],
        cwd=KIT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    results = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}

    summary = data["summary"]
    scored = {sid: r for sid, r in results.items() if sid not in ("todo", "empty")}  # nothing to grade in those
    assert summary["submissions"] == len(results) == 9 and summary["graded"] == len(scored) == 7
    assert summary["mean"] == pytest.approx(statistics.fmean(r["score"] for r in scored.values()), abs=1e-3)
    assert summary["median"] == pytest.approx(statistics.median(r["score"] for r in scored.values()), abs=1e-3)
    assert summary["full_marks"] == sum(r["score"] == r["max_score"] for r in scored.values())
    assert {p["id"]: p["reason"] for p in summary["not_graded"]} == {
        "todo": "nothing_implemented",
        "empty": "missing_package",
    }

    diagnosed = {}  # a step's causes; what it found beside them is their symptom, not one more misconception
    for sid, r in results.items():
        for s in r["steps"]:
            causes = [d for d in s["diagnoses"] if not d.get("symptom") and d["id"] != "no_known_mistake"]
            for d in causes or s["diagnoses"][:1]:
                diagnosed.setdefault(d["id"], set()).add(sid)
    mis = {m["id"]: m for m in data["misconceptions"]}
    assert {mid: set(m["students"]) for mid, m in mis.items()} == diagnosed
    softmax = next(s for s in results["softmax"]["steps"] if s["id"] == "attention")["diagnoses"]
    assert [(d["id"], d.get("symptom", False)) for d in softmax] == [
        ("softmax_wrong_dim", False),
        ("localised.weights.softmax_axis", True),  # where it happens, in support of the cause
        ("rows_not_normalised", True),
    ]
    assert "rows_not_normalised" not in mis  # one mistake, one misconception
    assert mis["scale_by_d_model"]["students"] == ["d_model_a", "d_model_b"]
    assert mis["scale_by_d_model"]["steps"] == ["attention"]
    assert data["misconceptions"][0]["id"] == "scale_by_d_model"  # the most frequent first
    assert "sqrt(d_k)" in mis["scale_by_d_model"]["teaching"]["attention"]["text"]
    assert set(mis["softmax_wrong_dim"]["students"]) == {"softmax"}

    hidden = {row["step"]: [s["id"] for s in row["students"]] for row in data["public_vs_hidden"]}
    assert hidden.get("padding") == ["fitted"]
    assert results["fitted"]["steps"][0]["score"] < 10

    attention = next(s for s in data["steps"] if s["id"] == "attention")
    assert attention["mean"] == pytest.approx(
        statistics.fmean(next(s["score"] for s in r["steps"] if s["id"] == "attention") for r in scored.values()),
        abs=1e-3,
    )

    pairs = {(p["a"], p["b"]): p for p in data["similarity"]["pairs"]}
    assert ("copy_a", "copy_b") in pairs
    copied = "".join(
        text
        for side in pairs[("copy_a", "copy_b")]["regions"]
        for region in side["files"]
        if region["file"] == "heads.py"
        for text, hit in region["lines"]
        if hit
    )
    assert "enumerate(pieces)" in copied
    assert not any("empty" in pair or "todo" in pair for pair in pairs)  # nothing of their own to compare

    assert {row["id"] for row in data["runtime"]["slowest"]} <= set(results)
    html = (tmp_path / "r.html").read_text()
    assert html.count('<section class="student"') == 9
    # --plots with --out: each student's pictures in out/pictures/<id>/, embedded in their section
    saved = sorted(p.name for p in (out / "pictures" / "d_model_a").glob("*.png"))
    attention_a = next(s for s in results["d_model_a"]["steps"] if s["id"] == "attention")
    assert saved and sorted(Path(p).name for p in attention_a["pictures"]) == saved
    assert not (out / "pictures" / "ref").exists()  # nothing failed: nothing drawn
    section = html[html.index('id="s-d_model_a"') : html.index('id="s-d_model_b"')]
    assert section.count('<img class="picture" src="data:image/png;base64,') == len(saved)
