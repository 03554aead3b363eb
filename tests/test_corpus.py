"""The public corpus as a test (issue 32, "Your own corpus, as a test").

tests/fixtures/corpus/ holds correct implementations and real bugs from public code, issue threads,
pull requests and Q&A, each adapted to an assignment's contract (tests/corpus.py says how an item
is written). Every item is graded with the hidden checks on two seeds, in this process, and:

* a correct one gets full marks in every step and no diagnosis;
* a bug loses points in its own step on both seeds, and in no other step but the integration
  steps and the ones its mistake genuinely breaks (`also_breaks`);
* a bug is named: its own step's first diagnosis is the id the item expects, on both seeds;
* no bug is named wrong: its own step's first diagnosis is never another known mistake.

What the grader does not do yet is an item's `[pending]` entry, and turns that item's assertion into
a strict expected failure: the fix that makes it pass also deletes the entry (an XPASS fails).
`pytest tests/test_corpus.py -m "" -s -k figures` prints the figures issue 32 asks for (valid full
marks, right step only, named right, named wrong). A representative subset is graded once more in the
sandbox (the route of record) and must get the same scores and names as in this process.

Slow (every item on two seeds): CI runs it (pytest -m ""). The quick run checks the fixtures only.
"""

import functools
import re
from collections import Counter

import pytest

from autograder.engine.checks.folders import known
from autograder.engine.course import config as grading_config
from autograder.engine.course.assignment import step_modules
from autograder.engine.judge.runner import grade
from corpus import (
    KINDS,
    SEEDS,
    SOLUTIONS,
    SOURCE_KINDS,
    collateral,
    diagnosed,
    first_name,
    known_names,
    load,
    lost,
    named_wrong,
)

ITEMS = load()
VALID = [item for item in ITEMS if item.kind == "valid"]
BUGS = [item for item in ITEMS if item.kind == "bug"]
# a representative subset graded in the sandbox too: per assignment, one correct item and two bugs
SANDBOXED = [
    item
    for assignment in sorted({i.assignment for i in ITEMS})
    for item in [i for i in VALID if i.assignment == assignment][:1]
    + [i for i in BUGS if i.assignment == assignment][:2]
]


@functools.cache
def config_of(assignment: str):
    return grading_config.load(assignment=assignment)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """graded(item, seed, isolate=False) -> GradeResult, each grading done once for the module."""
    root = tmp_path_factory.mktemp("corpus")

    @functools.cache
    def run(item, seed, isolate=False):
        submission = item.submission(root / f"{item.assignment}-{item.name}")
        return grade(submission, config_of(item.assignment), reference=SOLUTIONS, seed=seed, isolate=isolate)

    return run


def cases(items, key):
    """pytest params of `items`, a strict expected failure where the item's [pending] has `key`."""
    return [
        pytest.param(
            item, marks=[pytest.mark.xfail(strict=True, reason=item.pending[key])] if key in item.pending else []
        )
        for item in items
    ]


# ---------------------------------------------------------------------------- the fixtures (quick)


@pytest.mark.parametrize("assignment", known())
def test_every_assignment_has_30_correct_items_and_30_bugs(assignment):
    counts = Counter((item.assignment, item.kind) for item in ITEMS)
    assert min(counts[assignment, kind] for kind in KINDS) >= 30, dict(counts)


@pytest.mark.parametrize("item", ITEMS, ids=lambda i: i.id)
def test_item_is_well_formed(item):
    """Its source is named, its notes say what was adapted, its files replace files of the
    assignment's package and change them, and a bug's expectation is a step of the assignment and an
    id (a new id is pending until a diagnosis gives it)."""
    assert item.assignment in known()
    assert item.summary and item.notes.strip()
    assert item.source.get("kind") in SOURCE_KINDS and re.match(r"https://", item.source.get("url", ""))
    if item.source["kind"] == "code":
        assert item.source.get("repo") and item.source.get("path"), "code: repo and path"
    package = SOLUTIONS / item.assignment
    for file in item.files:
        assert (package / file).is_file(), f"{file} is not a file of {item.assignment}"
        assert item.source_of(file) != (package / file).read_text(encoding="utf-8"), f"{file} unchanged"
    assert set(item.pending) <= {"grade", "name", "wrong"}
    steps = set(step_modules(item.assignment))
    if item.kind == "bug":
        assert item.step in steps and re.fullmatch(r"[a-z0-9_]+", item.diagnosis or "")
        assert set(item.also_breaks) <= steps
        if item.diagnosis not in known_names(item.assignment):
            assert "name" in item.pending, f"{item.diagnosis} is no known mistake yet: say so in [pending] name"
    else:
        assert item.step is None and item.diagnosis is None and "name" not in item.pending


# ---------------------------------------------------------------------------- graded (slow)


@pytest.mark.slow
@pytest.mark.parametrize("item", cases(VALID, "grade"), ids=lambda i: i.id)
def test_correct_item_gets_full_marks_and_no_diagnosis(graded, item):
    for seed in SEEDS:
        result = graded(item, seed)
        assert lost(result) == {}, (
            seed,
            [(s.id, [c.message for c in s.checks if c.passed is False]) for s in result.steps],
        )
        assert [(s.id, s.diagnoses) for s in result.steps if s.diagnoses] == [], seed


@pytest.mark.slow
@pytest.mark.parametrize("item", cases(BUGS, "grade"), ids=lambda i: i.id)
def test_bug_loses_points_in_its_own_step_only(graded, item):
    for seed in SEEDS:
        result = graded(item, seed)
        assert item.step in lost(result), (seed, lost(result))
        assert collateral(item, result) == {}, seed


@pytest.mark.slow
@pytest.mark.parametrize("item", cases(BUGS, "name"), ids=lambda i: i.id)
def test_bug_is_named(graded, item):
    assert [first_name(graded(item, seed), item.step) for seed in SEEDS] == [item.diagnosis] * len(SEEDS)


@pytest.mark.slow
@pytest.mark.parametrize("item", cases(BUGS, "wrong"), ids=lambda i: i.id)
def test_bug_is_not_named_wrong(graded, item):
    assert [named_wrong(item, graded(item, seed)) for seed in SEEDS] == [None] * len(SEEDS)


@pytest.mark.slow
@pytest.mark.parametrize("item", SANDBOXED, ids=lambda i: i.id)
def test_sandboxed_grade_is_the_in_process_grade(graded, item):
    """The route of record (the sandboxed worker) gives the same scores and names."""
    ours, sandboxed = graded(item, SEEDS[0]), graded(item, SEEDS[0], isolate=True)
    assert [(s.id, round(s.score, 6), [d["id"] for d in s.diagnoses]) for s in sandboxed.steps] == [
        (s.id, round(s.score, 6), [d["id"] for d in s.diagnoses]) for s in ours.steps
    ]


def figures(graded, items) -> dict:
    """The counts issue 32's closing note reports, for `items` (one assignment's)."""
    valid = [i for i in items if i.kind == "valid"]
    bugs = [i for i in items if i.kind == "bug"]
    results = {(i, seed): graded(i, seed) for i in items for seed in SEEDS}
    return {
        "valid": len(valid),
        "full marks": sum(all(not lost(results[i, s]) and not diagnosed(results[i, s]) for s in SEEDS) for i in valid),
        "bugs": len(bugs),
        "right step only": sum(
            all(i.step in lost(results[i, s]) and not collateral(i, results[i, s]) for s in SEEDS) for i in bugs
        ),
        "named right": sum(all(first_name(results[i, s], i.step) == i.diagnosis for s in SEEDS) for i in bugs),
        "named wrong": sum(any(named_wrong(i, results[i, s]) for s in SEEDS) for i in bugs),
    }


@pytest.mark.slow
def test_corpus_figures(graded, capsys):
    """The figures, per assignment (run with -s to see them), and the rows that miss."""
    table = {a: figures(graded, [i for i in ITEMS if i.assignment == a]) for a in sorted({i.assignment for i in ITEMS})}
    with capsys.disabled():
        print()
        for assignment, f in table.items():
            print(
                f"{assignment:9s} correct, full marks {f['full marks']}/{f['valid']}; bugs: right step only "
                f"{f['right step only']}/{f['bugs']}, named right {f['named right']}/{f['bugs']}, "
                f"named wrong {f['named wrong']}/{f['bugs']}"
            )
        for item in ITEMS:
            rows = [graded(item, seed) for seed in SEEDS]
            names = [first_name(r, item.step) for r in rows] if item.kind == "bug" else []
            if any(lost(r) for r in rows) if item.kind == "valid" else names != [item.diagnosis] * len(SEEDS):
                print(f"  {item.id:48s} {item.step or 'valid':22s} {item.diagnosis or '':34s} {lost(rows[0])} {names}")
    # the items' [pending] entries say what the grader does: the figures follow from them
    for assignment, f in table.items():
        mine = [i for i in ITEMS if i.assignment == assignment]
        assert f["full marks"] == sum(1 for i in mine if i.kind == "valid" and "grade" not in i.pending)
        assert f["named right"] == sum(1 for i in mine if i.kind == "bug" and "name" not in i.pending)
