"""The public corpus (issue 32): correct implementations and real bugs found in public code, issue
threads, pull requests and Q&A, each adapted to the kit's contract, as test fixtures.

    tests/fixtures/corpus/<assignment>/<item>/
        meta.toml        where it comes from, what was adapted, what the grader must do with it
        <file>.py ...    the files of the assignment's package the item replaces (the others are
                         the reference's)

An item is written for this kit, not copied: each file re-expresses the source's approach (its
structure, its style and, for a bug, its mistake) in the contract's names and shapes, with the
smallest change that makes it fit (notes in meta.toml say which). The source is provenance.

meta.toml:

    kind = "valid" | "bug"
    summary = "one line: what the code does (valid) or what goes wrong (bug)"

    [source]                  # where it was found
    kind = "code" | "issue" | "pull" | "commit" | "qa"
    url = "https://..."
    repo = "owner/name"       # with path and commit where the source is code
    path = "..."
    commit = "..."

    [adaptation]
    notes = "what was changed to fit the contract, and why"

    [expect]                  # bugs only
    step = "attention"        # the step it must lose points in
    diagnosis = "softmax_wrong_dim"   # the name it must get (a catalog id, or one proposed)
    also_breaks = ["masking"]         # steps the mistake genuinely breaks too (optional)

    [pending]                 # what the grader does not do yet (the test expects a failure)
    grade = "why a valid item loses points, or a bug loses elsewhere, today"
    name = "why the bug is not named (yet)"

tests/test_corpus.py grades every item on two seeds and asserts the expectations; a `pending`
entry turns its assertion into a strict expected failure, so that the fix that makes it pass must
also delete the entry.
"""

import functools
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

KIT = Path(__file__).resolve().parent.parent
SOLUTIONS = KIT / "solutions"
CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"

KINDS = ("valid", "bug")
SOURCE_KINDS = ("code", "docs", "issue", "pull", "commit", "qa")


class CorpusError(ValueError):
    """A corpus item that cannot be read as documented above."""


@dataclass(frozen=True)
class Item:
    assignment: str
    name: str
    kind: str
    summary: str
    source: dict = field(hash=False)
    files: tuple  # the package files it replaces, e.g. ("attention.py",)
    notes: str
    step: str | None = None
    diagnosis: str | None = None
    also_breaks: tuple = ()
    pending: dict = field(default_factory=dict, hash=False)

    @property
    def id(self) -> str:
        return f"{self.assignment}/{self.name}"

    @property
    def folder(self) -> Path:
        return CORPUS / self.assignment / self.name

    def source_of(self, file: str) -> str:
        return (self.folder / file).read_text(encoding="utf-8")

    def submission(self, root: Path) -> Path:
        """root/<assignment>/: the reference package with the item's files in place of its own."""
        if root.exists():
            shutil.rmtree(root)
        shutil.copytree(SOLUTIONS / self.assignment, root / self.assignment)
        for file in self.files:
            (root / self.assignment / file).write_text(self.source_of(file), encoding="utf-8")
        return root


def read(folder: Path) -> Item:
    """The Item of one corpus folder; CorpusError naming the file where it does not fit."""
    meta_file = folder / "meta.toml"
    try:
        meta = tomllib.loads(meta_file.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise CorpusError(f"{meta_file}: {error}") from error
    kind = meta.get("kind")
    if kind not in KINDS:
        raise CorpusError(f"{meta_file}: kind must be one of {KINDS}, not {kind!r}")
    expect = meta.get("expect", {})
    files = tuple(sorted(path.name for path in folder.glob("*.py")))
    if not files:
        raise CorpusError(f"{folder}: no adapted file (*.py)")
    return Item(
        assignment=folder.parent.name,
        name=folder.name,
        kind=kind,
        summary=meta.get("summary", ""),
        source=meta.get("source", {}),
        files=files,
        notes=meta.get("adaptation", {}).get("notes", ""),
        step=expect.get("step"),
        diagnosis=expect.get("diagnosis"),
        also_breaks=tuple(expect.get("also_breaks", ())),
        pending=meta.get("pending", {}),
    )


def load(assignment: str | None = None, kind: str | None = None) -> list:
    """Every corpus item (of one assignment, of one kind), in a stable order."""
    folders = sorted(path.parent for path in CORPUS.glob("*/*/meta.toml"))
    items = [read(folder) for folder in folders]
    return [i for i in items if (assignment is None or i.assignment == assignment) and (kind is None or i.kind == kind)]


# ---------------------------------------------------------------------------- judging a graded item

SEEDS = (1, 2)  # the seeds issue 32 graded its sets with


@functools.cache
def known_names(assignment: str) -> frozenset:
    """The ids of the assignment's known mistakes, every step's."""
    from autograder.engine.course.assignment import mistakes_of, step_modules

    return frozenset(m.id for step in step_modules(assignment) for m in mistakes_of(assignment, step))


@functools.cache
def integration_steps(assignment: str) -> frozenset:
    """Steps that run the whole module (their checks modules say INTEGRATES)."""
    from autograder.engine.course.assignment import step_modules

    return frozenset(step for step, module in step_modules(assignment).items() if getattr(module, "INTEGRATES", False))


def lost(result) -> dict:
    """step id -> (score, maximum) of the steps below their maximum."""
    return {s.id: (round(s.score, 2), s.max_score) for s in result.steps if s.score < s.max_score - 1e-9}


def diagnosed(result) -> dict:
    """step id -> its diagnosis ids, for the steps that have any."""
    return {s.id: [d["id"] for d in s.diagnoses] for s in result.steps if s.diagnoses}


def collateral(item, result) -> dict:
    """The steps besides the bug's own that lost points and may not (integration steps and the
    item's also_breaks may)."""
    allowed = {item.step, *item.also_breaks} | integration_steps(item.assignment)
    return {step: score for step, score in lost(result).items() if step not in allowed}


def first_name(result, step) -> str | None:
    diagnoses = result.step(step).diagnoses
    return diagnoses[0]["id"] if diagnoses else None


def named_wrong(item, result) -> str | None:
    """The known mistake the bug's own step names first, where that is not the bug's."""
    name = first_name(result, item.step)
    return name if name in known_names(item.assignment) and name != item.diagnosis else None


def status(item, results: dict) -> dict:
    """What the grader does not do (yet) with `item`, given its GradeResult per seed: the [pending]
    entries it should have, each with what was measured ({} when it does everything)."""
    seeds = sorted(results)
    pending = {}
    if item.kind == "valid":
        misses = {
            s: (lost(results[s]), diagnosed(results[s])) for s in seeds if lost(results[s]) or diagnosed(results[s])
        }
        if misses:
            pending["grade"] = "; ".join(
                f"seed {s}: lost {lost_} named {names}" for s, (lost_, names) in misses.items()
            )
        return pending
    wrong_step = {
        s: lost(results[s]) for s in seeds if item.step not in lost(results[s]) or collateral(item, results[s])
    }
    if wrong_step:
        pending["grade"] = "; ".join(f"seed {s}: lost {lost_}" for s, lost_ in wrong_step.items())
    names = {s: [d["id"] for d in results[s].step(item.step).diagnoses] for s in seeds}
    if any(first_name(results[s], item.step) != item.diagnosis for s in seeds):
        pending["name"] = "; ".join(f"seed {s}: {names[s] or 'no diagnosis'}" for s in seeds)
    if any(named_wrong(item, results[s]) for s in seeds):
        pending["wrong"] = "; ".join(f"seed {s}: {named_wrong(item, results[s])}" for s in seeds)
    return pending


def write_pending(item, pending: dict) -> None:
    """Rewrite the item's [pending] table (the rest of meta.toml stays as it is)."""
    meta = item.folder / "meta.toml"
    text = meta.read_text(encoding="utf-8")
    head = text.split("\n[pending]\n")[0].rstrip("\n") + "\n"
    if pending:
        quoted = {k: v.replace("\\", "\\\\").replace('"', '\\"') for k, v in pending.items()}
        head += "\n[pending]\n" + "".join(f'{k} = "{v}"\n' for k, v in sorted(quoted.items()))
    meta.write_text(head, encoding="utf-8")
