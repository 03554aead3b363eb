"""The class report's data: what the whole class got wrong, from the batch results.

    entries = reading.load_out_dirs([Path("grades")])   # what `grade ... --out grades/` wrote
    data = build(entries, similarity=find_similar(entries, skeleton_files))
    json.dumps(data)                                     # `report --json`; html.py renders it

Everything here works on the entries reading.py makes (the result JSON dicts of docs/instructors.md,
"JSON result", with what grading kept beside them), never on live grading objects nor on files:
the report can be rebuilt at any time from the out directories alone, and the aggregates are
pure functions that tests feed with hand-made dicts. Rendering (HTML, charts, the report's own
words in English and Korean) lives in autograder/publish/report/html.py.
"""

import ast
import statistics
from collections import Counter
from pathlib import Path

from autograder.engine.judge.grades_csv import gradebook_notes, tampering_summary
from autograder.engine.judge.results import from_json

# Check outcomes that mean the worker ran out of time, or the interpreter died (runner.py).
HANG_IDS = {"timeout"}
CRASH_IDS = {"worker_crashed", "worker_exited", "bad_worker_message"}
UNEXPLAINED = "no_known_mistake"  # diagnosis.py: a failure no cataloged mistake reproduces


def build(entries: list, step_docs: dict = None, similarity: dict = None, histogram_bins: int = 10) -> dict:
    """The whole report as one JSON-ready dict (see the functions below for each part)."""
    # The aggregates cover the submissions with something graded: one with nothing to grade (all
    # TODO, no package) or that the grader failed on is counted apart, with the reason.
    graded = [entry for entry in entries if not entry_reason(entry)]
    return {
        "summary": summary(entries, histogram_bins),
        "misconceptions": misconceptions(graded, step_docs or {}),
        "steps": per_step(graded),
        "public_vs_hidden": public_vs_hidden(graded),
        "runtime": runtime([entry for entry in entries if entry["result"] is not None]),
        "similarity": similarity
        or {"pairs": [], "threshold": None, "k": None, "compared": 0, "more": 0, "common_over": None, "clusters": []},
        "students": students(entries),
    }


def summary(entries: list, bins: int = 10) -> dict:
    """Counts, mean and median of the total scores of the graded submissions (something in them
    graded), a histogram, and the submissions that could not be graded or had nothing to grade
    (left out of the mean), with the reason."""
    problems, results = [], []
    for entry in entries:
        reason = entry_reason(entry)
        if reason:
            problems.append({"id": entry["id"], "reason": reason})
        else:
            results.append(entry["result"])
    scores = [result["score"] for result in results]
    max_score = max((entry["result"]["max_score"] for entry in entries if entry["result"] is not None), default=0)
    return {
        "submissions": len(entries),
        "graded": len(results),
        "mean": round(statistics.fmean(scores), 4) if scores else None,
        "median": round(statistics.median(scores), 4) if scores else None,
        "max_score": max_score,
        "full_marks": sum(1 for result in results if result["score"] >= result["max_score"] > 0),
        "histogram": histogram(scores, 0, max_score, bins),
        "not_graded": problems,
        "not_graded_reasons": dict(Counter(problem["reason"] for problem in problems).most_common()),
        # code that does not parse: a step of it scores 0 with no misconception to name it, so it is listed here
        "syntax_errors": [
            {"id": entry["id"], "what": syntax_errors(entry["result"])}
            for entry in entries
            if entry["result"] is not None and syntax_errors(entry["result"])
        ],
        # repositories whose kit files differ from the release (operations/kit_files.py): shown, never silent
        "tampering": [
            {"id": entry["id"], "what": tampering_summary(entry["result"].get("kit_files"))}
            for entry in entries
            if entry["result"] is not None and tampering_summary(entry["result"].get("kit_files"))
        ],
    }


SYNTAX_ERRORS = ("syntax_error", "syntax_error_text", "syntax_error_in_import")


def syntax_errors(result: dict) -> list:
    """The syntax errors grading met in a result, each said once (a file several steps import
    fails each of their checks with the same message)."""
    said = []
    for step in result["steps"]:
        for check in step["checks"]:
            if check.get("message_id") in SYNTAX_ERRORS and check.get("message") and check["message"] not in said:
                said.append(check["message"])
    return said


def entry_reason(entry: dict) -> str:
    """not_graded_reason of an entry's result, or the entry's own problem (`unreadable_result`:
    its JSON could not be read, reading.py)."""
    return entry.get("problem") or not_graded_reason(entry["result"])


def not_graded_reason(result) -> str:
    """None for a submission with something graded, else why not: `grader_failed` (no JSON),
    `missing_package` (no package in it), `nothing_implemented` (every step still a TODO)."""
    if result is None:
        return "grader_failed"
    ids = {check.get("message_id") for step in result["steps"] for check in step["checks"]}
    if "missing_package" in ids:
        return "missing_package"
    implementable = [step for step in result["steps"] if step.get("status") != "not_checked"]
    if implementable and all(step.get("status") == "not_implemented" for step in implementable):
        return "nothing_implemented"
    return None


def histogram(values: list, low: float, high: float, bins: int) -> list:
    """[{"low", "high", "count"}]: `bins` equal bins over [low, high], the last one closed."""
    if high <= low:
        return [{"low": low, "high": high, "count": len(values)}] if values else []
    width = (high - low) / bins
    counts = [0] * bins
    for value in values:
        counts[min(bins - 1, max(0, int((value - low) / width)))] += 1
    return [
        {"low": round(low + i * width, 4), "high": round(low + (i + 1) * width, 4), "count": count}
        for i, count in enumerate(counts)
    ]


def misconceptions(graded: list, step_docs: dict) -> list:
    """One row per diagnosis id found in the results, most frequent first: how many students,
    in which steps, the explanation most of them got, and the paragraph of the skeleton that
    teaches the step (`step_docs`: {step id: text}, see skeleton_paragraphs)."""
    rows = {}
    for entry in graded:
        for step in entry["result"]["steps"]:
            for diagnosis in counted(step):
                row = rows.setdefault(
                    diagnosis["id"], {"id": diagnosis["id"], "students": [], "steps": [], "messages": Counter()}
                )
                if entry["id"] not in row["students"]:
                    row["students"].append(entry["id"])
                if step["id"] not in row["steps"]:
                    row["steps"].append(step["id"])
                row["messages"][diagnosis.get("message", "")] += 1
    out = []
    for row in rows.values():
        out.append(
            {
                "id": row["id"],
                "count": len(row["students"]),
                "share": round(len(row["students"]) / len(graded), 4) if graded else 0,
                "steps": row["steps"],
                "students": sorted(row["students"]),
                "message": row["messages"].most_common(1)[0][0],
                "unexplained": row["id"] == UNEXPLAINED,
                "teaching": {step: step_docs[step] for step in row["steps"] if step in step_docs},
            }
        )
    # The lesson plan: most frequent first; "no known mistake" last among equals.
    return sorted(out, key=lambda row: (-row["count"], row["unexplained"], row["id"]))


def counted(step: dict) -> list:
    """The diagnoses of a step that count as misconceptions: one mistake counts once. Its causes
    (the known mistakes that fit), not the symptoms said after them in support ("rows do not sum
    to 1": diagnosis.py marks them `symptom`); where no cause was named, the first diagnosis."""
    diagnoses = step.get("diagnoses", [])
    causes = [d for d in diagnoses if d.get("symptom") is not True and d["id"] != UNEXPLAINED]
    return causes or diagnoses[:1]


def per_step(graded: list) -> list:
    """Per step, in the order of the results: the scores, how many got full / partial / zero /
    left it unimplemented, and its checks ordered by pass rate (the hardest first)."""
    order, steps = [], {}
    for entry in graded:
        for step in entry["result"]["steps"]:
            if step["id"] not in steps:
                order.append(step["id"])
                steps[step["id"]] = {
                    "id": step["id"],
                    "title": step.get("title", ""),
                    "max_score": step["max_score"],
                    "scores": [],
                    "outcomes": Counter(),
                    "checks": {},
                }
            row = steps[step["id"]]
            row["max_score"] = max(row["max_score"], step["max_score"])
            row["scores"].append(step["score"])
            row["outcomes"][step_outcome(step)] += 1
            for check in step["checks"]:
                tally = row["checks"].setdefault(
                    check["id"],
                    {"id": check["id"], "visibility": check.get("visibility"), "passed": 0, "failed": 0, "not_run": 0},
                )
                tally["passed" if check["passed"] else "not_run" if check["passed"] is None else "failed"] += 1
    out = []
    for step_id in order:
        row = steps[step_id]
        checks = list(row["checks"].values())
        for check in checks:
            ran = check["passed"] + check["failed"]
            check["pass_rate"] = round(check["passed"] / ran, 4) if ran else None
        checks.sort(key=lambda c: (c["pass_rate"] if c["pass_rate"] is not None else 2, c["id"]))
        scores = row["scores"]
        out.append(
            {
                "id": step_id,
                "title": row["title"],
                "max_score": row["max_score"],
                "mean": round(statistics.fmean(scores), 4),
                "median": round(statistics.median(scores), 4),
                "outcomes": {
                    key: row["outcomes"].get(key, 0)
                    for key in ("full", "partial", "zero", "not_implemented", "not_checked")
                },
                "histogram": histogram(scores, 0, row["max_score"], 5),
                "checks": checks,
            }
        )
    return out


def step_outcome(step: dict) -> str:
    if step.get("status") in ("not_implemented", "not_checked"):
        return step["status"]
    if step["max_score"] and step["score"] >= step["max_score"]:
        return "full"
    return "partial" if step["score"] > 0 else "zero"


def public_vs_hidden(graded: list) -> list:
    """Per step, the students who pass every public check of it but fail hidden ones (code
    fitted to the visible tests, or a case the public checks do not reach), with those checks."""
    out = {}
    for entry in graded:
        for step in entry["result"]["steps"]:
            public = [c for c in step["checks"] if c.get("visibility") == "public"]
            hidden_failed = [
                c["id"] for c in step["checks"] if c.get("visibility") == "hidden" and c["passed"] is False
            ]
            if public and hidden_failed and all(c["passed"] for c in public):
                row = out.setdefault(step["id"], {"step": step["id"], "students": []})
                row["students"].append(
                    {
                        "id": entry["id"],
                        "hidden_failed": hidden_failed,
                        "lost": round(
                            sum(c["max_points"] - c["points"] for c in step["checks"] if c["id"] in hidden_failed), 4
                        ),
                    }
                )
    return [dict(row, count=len(row["students"])) for row in out.values()]


def runtime(graded: list, slowest: int = 10) -> dict:
    """The slowest submissions (the JSON's duration_s, where the grader recorded it), and every
    check stopped for time (hangs) or that killed its interpreter (crashes)."""
    timed = sorted(
        (entry for entry in graded if entry["result"].get("duration_s") is not None),
        key=lambda entry: -entry["result"]["duration_s"],
    )
    hangs, crashes = [], []  # one row per student and step: its checks stopped (or killed) that way
    for entry in graded:
        for step in entry["result"]["steps"]:
            rows = {}
            for check in step["checks"]:
                kind = _failure_kind(check)
                if kind:
                    row = rows.get(kind)
                    if row is None:
                        row = rows[kind] = {
                            "id": entry["id"],
                            "step": step["id"],
                            "checks": [],
                            "count": 0,
                            "message": check.get("message", ""),
                            "message_id": check.get("message_id"),
                        }
                        (hangs if kind == "hang" else crashes).append(row)
                    row["checks"].append(check["id"])
                    row["count"] += 1
    durations = [entry["result"]["duration_s"] for entry in timed]
    return {
        "slowest": [{"id": entry["id"], "duration_s": entry["result"]["duration_s"]} for entry in timed[:slowest]],
        "mean_s": round(statistics.fmean(durations), 3) if durations else None,
        "total_s": round(sum(durations), 3) if durations else None,
        "hangs": hangs,
        "crashes": crashes,
    }


def _failure_kind(check: dict) -> str:
    message_id = check.get("message_id")
    if message_id is None:  # results written before message ids were in the JSON: the English text
        message = check.get("message", "")
        message_id = (
            "timeout"
            if message.startswith("stopped after")
            else "worker_crashed"
            if message.startswith("your code crashed the interpreter")
            else "worker_exited"
            if message.startswith("your code ended the Python process")
            else None
        )
    return "hang" if message_id in HANG_IDS else "crash" if message_id in CRASH_IDS else None


def students(entries: list) -> list:
    """One row per submission: its score per step, its diagnoses, and its whole result."""
    rows = []
    for entry in entries:
        result = entry["result"]
        rows.append(
            {
                "id": entry["id"],
                "path": entry["path"],
                "score": result["score"] if result else None,
                # the grade of record: after the late policy and the adjustments (gradebook.py)
                "total": result.get("total", result["score"]) if result else None,
                "notes": _notes(result),
                "max_score": result["max_score"] if result else None,
                "steps": {step["id"]: step["score"] for step in result["steps"]} if result else {},
                "diagnoses": sorted({d["id"] for step in result["steps"] for d in counted(step)}) if result else [],
                "not_graded": entry_reason(entry),
                "tampering": tampering_summary(result.get("kit_files")) if result else "",
                "pictures": entry.get("pictures", {}),
                "result": result,
            }
        )
    return rows


def _notes(result) -> str:
    """Why a result's total is not its score (its late policy, its adjustments), or ""."""
    if not result or (result.get("late") is None and not result.get("adjustments")):
        return ""
    try:
        return gradebook_notes(from_json(result))
    except (KeyError, TypeError):
        return ""


def skeleton_paragraphs(skeleton_package: Path, step_files: dict) -> dict:
    """{step id: the module docstring of the skeleton file that teaches it} (`step_files`:
    {step id: [file names]}, the checks' FILES; the first one where a step grades several, as
    `masking` grades masking.py and the mask path of attention.py)."""
    out = {}
    for step_id, files in step_files.items():
        for name in files[:1]:
            path = Path(skeleton_package) / name
            try:
                doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
            except (OSError, SyntaxError):
                doc = None
            if doc:
                out[step_id] = {"file": f"{Path(skeleton_package).name}/{name}", "text": doc}
    return out
