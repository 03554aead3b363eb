"""grades.csv of a batch (csv_text) and the one-line whys it shares with the report and the LMS
exports: the gradebook's notes (late policy, adjustments) and a repository's tampering. Every
cell goes through text.csv_table: none is a formula in a spreadsheet."""

from autograder.engine.checks.text import csv_table, printable
from autograder.engine.judge.result_files import write_atomically
from autograder.engine.judge.results import round_score


def csv_text(results, names, paths=None) -> str:
    """grades.csv's text: one row per submission (its id, then its path if `paths` is given), one
    column per step, then the total (empty cells for a result that is None: a submission that
    could not be graded); and, where any submission is a repository made from a release, a
    `tampering` column: what changed among its kit files (tampering_summary; empty: nothing).
    The total is the grade of record (GradeResult.total: the gradebook's, after the late penalty
    and adjustments, shown in their columns; `notes` says why, from the JSON's). Every cell through
    text.csv_table: none a spreadsheet reads as a formula."""
    graded = [result for result in results if result is not None]
    step_ids = [step.id for step in graded[0].steps] if graded else []
    kit = any(result.kit_files is not None for result in graded)
    rows = [
        ["submission", *(["path"] if paths is not None else []), *step_ids]
        + ["late_penalty", "adjustment", "total", "max_score", "notes"]
        + (["tampering"] if kit else [])
    ]
    for index, (name, result) in enumerate(zip(names, results, strict=True)):
        # a path holds names a student chose: one printable line (a spreadsheet or a terminal acts on no control character)
        head = [name, printable(paths[index], one_line=True)] if paths is not None else [name]
        if result is None:
            rows.append([*head, *([""] * (len(step_ids) + 5 + kit))])
            continue
        rows.append(
            [
                *head,
                *(round_score(result.step(s).score) for s in step_ids),
                round_score(result.late["penalty"]) if result.late else 0,
                round_score(sum(a.get("counted", 0) for a in result.adjustments or [])),
                round_score(result.grade),
                round_score(result.max_score),
                printable(gradebook_notes(result), one_line=True),
            ]
            + ([printable(tampering_summary(result.kit_files), one_line=True)] if kit else [])
        )
    return csv_table(rows)


def gradebook_notes(result) -> str:
    """Why a total is not the score, in one line: the late policy's and the adjustments' whys."""
    notes = []
    if result.late and result.late.get("status") != "on_time":
        notes.append(f"late: {result.late['why']}")
    for adjustment in result.adjustments or []:
        where = f" on {adjustment['step']}" if adjustment.get("step") else ""
        counted = adjustment.get("counted", 0)
        text = f"adjusted {counted:+g}{where}: {adjustment.get('comment') or '(no comment)'}"
        if adjustment.get("why"):
            text += f" (of {adjustment['points']:+g}: {adjustment['why']})"
        notes.append(text)
    return "; ".join(notes)


_KIT_CHANGES = ("not all checked", "changed", "not a file", "removed", "a link")  # then "added", "added (...)"


def tampering_summary(kit: dict, limit: int = 300) -> str:
    """One line of what became of a repository's kit files (GradeResult.kit_files): "" where
    nothing changed or it is not a repository, "not checked (...)" where no release is kept,
    else "changed: grading.yml; added: x.py", cut at `limit` with the count."""
    if kit is None:
        return ""
    if kit.get("tampering") is None:
        return "not checked (no release kept)"
    by_change = {}
    for item in kit["tampering"]:
        by_change.setdefault(item["change"], []).append(item["file"])
    # what became of the release's own files first: files a student adds (whose names and number
    # they choose) never push "changed: grading.yml" past the cut
    order = sorted(
        by_change, key=lambda change: next((i for i, k in enumerate(_KIT_CHANGES) if change.startswith(k)), 9)
    )
    text = "; ".join(
        f"{change}: {', '.join(by_change[change])}" if any(by_change[change]) else change for change in order
    )
    if len(text) > limit:
        text = text[: limit - 20].rstrip(" ,;") + f" ... ({len(kit['tampering'])} in all)"
    return text


def write_csv(results, names, path, paths=None):
    """grades.csv (csv_text), written atomically: a reader, or a run beside this one, never
    sees a row without its total."""
    write_atomically(path, csv_text(results, names, paths))
