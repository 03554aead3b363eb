"""A step's feedback as an explanation, not a log: built once from a StepResult, shown by every route.

    e = explanation(step)         # None: nothing to say (passed, not implemented, not checked)
    lines(e)                      # the block under the step's row: at most 8 lines, 1,200 characters
    lines(e, verbose=True)        # ... then every failing check in full (pytest -v)

What a student reads first is the cause: the strongest diagnosis (diagnosis.diagnose orders them),
which says what is wrong and how to fix it, in their language; where nothing is diagnosed, the
clearest single symptom (an exception with its file and line before a wrong shape, before wrong
values). Then the evidence, once per kind of failure ("5 of 5 checks: wrong values in weights, out
(largest error 1.39)"), one pointer to the paragraph of the skeleton that teaches the cause, and
the smallest failing input of a public check where a route found one (example.py, with
shrink.py). Each check's full message (indices, tolerances, dtypes) stays in the JSON and behind
`verbose`. Routes show a view without hidden checks (publish/public_view.py), so nothing here
decides what is hidden; example.smallest_example only ever runs a public check. Values are shown
as shown_values.py writes them.
"""

import math
from dataclasses import dataclass, field

from autograder.engine.checks import messages
from autograder.engine.course import assignment as assignments
from autograder.engine.judge.example import Example
from autograder.engine.judge.shown_values import compact, shape_of

MAX_LINES = 8
MAX_CHARS = 1200
LINE_CHARS = 320  # one line of the block, at most (a longer one is cut, with "…")
SHOWN_SIZE = 64  # an example is shown when it is a few small tensors (shrink.size), else kept in the JSON only
# The clearest symptoms first: an error that names a file and line, then a wrong form, then values.
# An assignment's own contract failures (a layer not found) are errors too: rank().
ERRORS = (
    "syntax_error",
    "syntax_error_text",
    "syntax_error_in_import",
    "import_error",
    "missing_file",
    "missing_package",
    "missing_package_archive",
    "refused_file",
    "near_miss",
    "raised",
    "timeout",
    "skipped_after_hang",
    "skipped_after_hang_elsewhere",
    "forbidden_call",
    "forbidden_call_at",
    "forbidden_source",
    "tampering",
    "missing_attribute",
    "bad_attribute",
    "worker_crashed",
    "worker_exited",
    "not_implemented",
)
FORMS = ("not_tensor", "wrong_type", "wrong_length", "shape", "dtype", "device", "no_raise", "wrong_exception")


@dataclass
class KindOfFailure:
    """One kind of failure of a step, said once."""

    kind: str  # the message id its checks failed with ("values", "shape", ...)
    checks: list  # the ids of those checks, in step order
    text: str  # the summary, in the student's language


@dataclass
class Explanation:
    """What a student reads about one step."""

    step: str  # its id
    cause: str = None  # the first line: a diagnosis, or the clearest symptom
    cause_id: str = None  # the diagnosis id of `cause` (None: a symptom)
    also: list = field(default_factory=list)  # the other diagnoses that fit, weaker first
    evidence: list = field(default_factory=list)  # KindOfFailure, the kind of `cause`'s symptom first
    not_judged: str = None  # the checks that could not be judged, said once
    pointer: str = None  # where the skeleton teaches the cause (messages.concept's text)
    example: Example = None
    pictures: list = field(default_factory=list)  # --plots: saved pictures
    details: list = field(default_factory=list)  # (check id, full message) of each failing or unjudged check


def explanation(step):
    """The Explanation of a StepResult, or None when a student needs no block under its row."""
    if step.status not in ("graded", "partial"):
        return None
    failed = [check for check in step.checks if check.passed is False]
    unjudged = [check for check in step.checks if check.passed is None]
    if not failed and not unjudged:
        return None
    judged = [check for check in step.checks if check.passed is not None]
    groups = {}
    for check in failed:
        groups.setdefault(check.message_id or "", []).append(check)
    order = sorted(groups, key=lambda kind: (rank(kind), -len(groups[kind])))
    result = Explanation(step=step.id, pictures=list(step.pictures), example=getattr(step, "example", None))
    result.details = [(check.id, check.message) for check in failed + unjudged]
    shown = {d["id"] for d in step.diagnoses}
    # a finding a known mistake shown here refines is said by that mistake: once
    diagnoses = [
        d for d in step.diagnoses if d["id"] != "no_known_mistake" and not set(d.get("refined_by") or ()) & shown
    ]
    if diagnoses:
        result.cause, result.cause_id = diagnoses[0]["message"], diagnoses[0]["id"]
        result.also = [d["message"] for d in diagnoses[1:]]
    elif order:
        result.cause = symptom(groups[order[0]])
    for kind in order:
        checks = groups[kind]
        ids = [check.id for check in checks]
        if result.cause_id is None and kind == order[0]:
            text = messages.render("feedback.same", count=len(checks), total=len(judged), checks=", ".join(ids))
        elif kind == "values":
            text = messages.render("feedback.values", count=len(checks), total=len(judged), **values_summary(checks))
        else:
            text = messages.render("feedback.kind", count=len(checks), total=len(judged), message=checks[0].message)
        result.evidence.append(KindOfFailure(kind, ids, text))
    if unjudged:
        waiting = {(check.params or {}).get("blocked_by") for check in unjudged}
        if len(waiting) == 1 and None not in waiting:  # all wait on one step's mistake: say which, briefly
            result.not_judged = messages.render(
                "feedback.blocked", count=len(unjudged), total=len(step.checks), step=waiting.pop()
            )
        else:
            result.not_judged = messages.render(
                "feedback.not_judged", count=len(unjudged), total=len(step.checks), message=unjudged[0].message
            )
        if result.cause is None:
            result.cause, result.not_judged = result.not_judged, None
    if order:  # checks that only could not be judged point elsewhere already (the step that blocks them)
        result.pointer = pointer(step.id, result.cause_id, groups[order[0]][0].id)
    return result


def rank(kind: str) -> int:
    """0 for an error that names where, 1 for a wrong form, 2 for wrong values (module docstring)."""
    if kind in ERRORS or kind in assignments.every_contract_failure():
        return 0
    return 1 if kind in FORMS else 2


def symptom(checks) -> str:
    """The clearest single symptom of a kind of failure: its first check's message, or for wrong
    values the names and the largest error alone (the full message is behind -v)."""
    if checks[0].message_id == "values":
        return messages.render("feedback.values_brief", **values_summary(checks))
    return checks[0].message


def values_summary(checks) -> dict:
    """{"names", "largest"} of checks that failed with `values`: the outputs that differ, and the
    largest absolute error among them."""
    names, largest = [], None
    for check in checks:
        params = params_of(check)
        name = str(params.get("name", "")).strip()
        if name and name not in names:
            names.append(name)
        error = number(params.get("max_abs"))
        if error is not None and (largest is None or error > largest):
            largest = error
    return {"names": ", ".join(names) or "?", "largest": "?" if largest is None else f"{largest:.3g}"}


def params_of(check) -> dict:
    """A CheckResult's message parameters: those the route kept (`params`), else read back from
    its message with the template it was rendered from (any language)."""
    if getattr(check, "params", None):
        return check.params
    return read_params(check.message, check.message_id) or {}


def read_params(text: str, message_id: str) -> dict:
    """The parameters `text` was rendered with from `message_id`'s template in some language, as
    text; None where it matches none (or the id is unknown)."""
    if not text or not message_id:
        return None
    for lang in messages.LANGUAGES:
        try:
            fields, pattern = messages.reader(messages.template(message_id, lang))
        except KeyError:
            return None
        found = pattern.fullmatch(text)
        if found is not None:
            return {name: found.group(key) for key, name in fields.items()}
    return None


def number(value):
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def pointer(step_id: str, cause_id: str, first_check: str):
    """Where the skeleton teaches the cause: `concept.cause.<diagnosis>`, else the step's paragraph
    for a diagnosis; for a symptom, the paragraph of the first check that shows it."""
    if cause_id is not None:
        return messages.template_or(f"concept.cause.{cause_id}", None) or messages.concept(step_id)
    return messages.concept(step_id, first_check)


# ---------------------------------------------------------------------------- rendering


def lines(result: Explanation, verbose: bool = False, indent: str = "") -> list:
    """The block of text under a step's row, each line after `indent`: the cause, the evidence,
    the pointer and the example, at most MAX_LINES lines and MAX_CHARS characters (indentation
    included) where what matters most is kept (the cause, the first evidence, the pointer, the
    example, then the rest); with `verbose`, then every failing check's full message."""
    if result is None:
        return []
    parts = []  # (priority, [lines]): a part is kept whole or left out, the lowest priorities first

    def add(priority, prefix, *texts, limit=LINE_CHARS):
        parts.append((priority, [indent + prefix + cut(text, limit - len(prefix)) for text in texts]))

    add(0, "x " if result.evidence else "- ", result.cause)
    for index, evidence in enumerate(result.evidence[:2]):
        add(1 if index == 0 else 7, "  ", evidence.text)
    if len(result.evidence) > 2:
        rest = sum(len(evidence.checks) for evidence in result.evidence[2:])
        add(8, "  ", messages.render("feedback.more_kinds", count=rest))
    if result.also:
        add(6, "  ", messages.render("feedback.also", text=result.also[0]))
    if result.not_judged:
        add(4, "  - ", result.not_judged)
    if result.pointer:
        add(2, "  → ", messages.render("table.see_concept", where=result.pointer))
    if result.example is not None and result.example.size_after <= SHOWN_SIZE:
        add(3, "  ", *example_lines(result.example))
    if result.pictures:
        paths = ", ".join(map(str, result.pictures))  # never cut (a cut path is no use): kept whole or left out
        add(5, "  > ", messages.render("picture_saved", path=paths), limit=MAX_CHARS)
    kept, count, chars = set(), 0, 0
    for index in sorted(range(len(parts)), key=lambda i: parts[i][0]):
        texts = parts[index][1]
        if count + len(texts) <= MAX_LINES and chars + sum(map(len, texts)) <= MAX_CHARS:
            kept.add(index)
            count, chars = count + len(texts), chars + sum(map(len, texts))
    block = [text for index, (_, texts) in enumerate(parts) if index in kept for text in texts]
    if verbose:
        block += [indent + "  x " + cut(f"{check}: {message}", 100_000) for check, message in result.details]
    return block


def cut(text: str, limit: int = LINE_CHARS) -> str:
    text = " ".join(text.split())  # one line, whatever the message held
    return text if len(text) <= limit else text[: limit - 1] + "…"


def example_lines(example: Example) -> tuple:
    """The two lines of an example: the input, then what was expected and what the code gave."""
    shown = ", ".join(f"{name} {shape_of(value)}= {compact(value)}" for name, value in example.inputs.items())
    first = messages.render("feedback.example_input", check=example.check, inputs=shown)
    got = ", ".join(f"{name} = {compact(value)}" for name, value in example.got.items())
    if example.raised:
        expected = ", ".join(f"{name} = {compact(value)}" for name, value in example.expected.items())
        second = messages.render("feedback.example_raised", expected=expected or "-", type=example.raised)
    elif example.expected:
        expected = ", ".join(f"{name} = {compact(value)}" for name, value in example.expected.items())
        if len(example.got) == 1 and list(example.got) == list(example.expected):  # "yours = ...": the same name
            got = f"= {compact(next(iter(example.got.values())))}"
        second = messages.render("feedback.example_output", expected=expected, got=got or example.message)
    else:
        second = messages.render("feedback.example_yours", got=got, message=example.message)
    return first, second
