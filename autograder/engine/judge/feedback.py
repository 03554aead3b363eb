"""A step's feedback as an explanation, not a log: built once from a StepResult, shown by every route.

    e = explanation(step)         # None: nothing to say (passed, not implemented, not checked)
    lines(e)                      # the block under the step's row: at most 8 lines, 1,200 characters
    lines(e, verbose=True)        # ... then every failing check in full (pytest -v)

What a student reads first is the cause: the strongest diagnosis (diagnosis.diagnose orders them),
which says what is wrong and how to fix it, in their language; where nothing is diagnosed, the
clearest single symptom (an exception with its file and line before a wrong shape, before wrong
values). Then the evidence, once per kind of failure ("5 of 5 checks: wrong values in weights, out
(largest error 1.39)"), one pointer to the paragraph of the skeleton that teaches the cause, and
the smallest failing input of a public check where a route found one (shrink.py, via
`smallest_example`). Each check's full message (indices, tolerances, dtypes) stays in the JSON and
behind `verbose`. Routes show a view without hidden checks (publish/public_view.py), so nothing here
decides what is hidden; `smallest_example` only ever runs a public check.

One module, though long: choosing what a student reads first (cause, evidence, pointer,
example) is one ordering, in one place; its parts are small functions in that order.
"""

import copy
import math
from dataclasses import dataclass, field

import torch

from autograder.engine.checks import messages
from autograder.engine.course import assignment as assignments
from autograder.engine.mistakes.evidence import says_nothing
from autograder.engine.checks.check import compare, judged
from autograder.engine.judge.verdict import charged_forbidden

MAX_LINES = 8
MAX_CHARS = 1200
LINE_CHARS = 320  # one line of the block, at most (a longer one is cut, with "…")
VALUE_CHARS = 70  # one value of an example, at most
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
class Example:
    """The smallest failing input of a public check (shrink.py), ready to show."""

    check: str  # the id of the check it shrank
    inputs: dict  # the shrunk inputs (tensors, numbers, lists)
    got: dict  # what the student's code gave on them (the parts that are wrong), or {}
    expected: dict  # what a correct solution gives on them (the same parts), or {} where none
    message: str  # the check's verdict on the shrunk inputs, in the student's language
    size_before: int  # shrink.size of the check's own inputs
    size_after: int  # shrink.size of `inputs`
    raised: str = None  # the type of the exception the code raised on them, if it raised

    def to_json(self) -> dict:
        return {
            "check": self.check,
            "inputs": plain(self.inputs),
            "got": plain(self.got),
            "expected": plain(self.expected),
            "message": self.message,
            **({"raised": self.raised} if self.raised else {}),
            "size_before": self.size_before,
            "size_after": self.size_after,
        }


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


def shape_of(value) -> str:
    """The shape shown before a tensor's entries (none where `compact` names it already)."""
    if not isinstance(value, torch.Tensor) or value.dim() < 2 or filled(value) is not None:
        return ""
    return f"{tuple(value.shape)} "


def filled(value):
    """ "zeros" or "ones" for a tensor of only those (shown by its shape alone), else None."""
    try:
        if value.numel() and value.dtype != torch.bool and not value.is_complex():
            for name, number in (("zeros", 0), ("ones", 1)):
                if bool((value.detach() == number).all()):
                    return name
    except Exception:  # noqa: BLE001 - a tensor without values (fake, meta)
        return None
    return None


def compact(value, limit: int = VALUE_CHARS) -> str:
    """A value as few characters show it: a tensor of zeros or ones by its shape alone
    (`zeros(1, 1, 2, 1)`), another by its entries without its leading axes of length 1 (its shape
    is shown beside it), whole numbers without decimals, others to 4 digits."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if filled(value) is not None:
            return f"{filled(value)}{tuple(value.shape)}".replace(",)", ")")
        while value.dim() > 2 and value.shape[0] == 1:
            value = value[0]
        try:
            text = nested(value.cpu().tolist())
        except Exception:  # noqa: BLE001 - a tensor without values (fake, meta)
            text = f"tensor{tuple(value.shape)}"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{key}: {compact(item, limit)}" for key, item in value.items()) + "}"
    else:
        text = nested(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def nested(value) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value == round(value):
            return str(int(value)) if abs(value) < 1e15 else f"{value:.4g}"
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(nested(item) for item in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, torch.Tensor):
        return compact(value)
    return repr(value) if isinstance(value, str) else str(value)


def plain(value):
    """`value` with tensors as nested lists: JSON-ready."""
    if isinstance(value, torch.Tensor):
        try:
            return value.detach().cpu().tolist()
        except Exception:  # noqa: BLE001 - a tensor without values
            return f"tensor{tuple(value.shape)}"
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)


# ---------------------------------------------------------------------------- the smallest example


def smallest_example(check, inputs, fail, run, tol, observation=None, **limits):
    """The Example of a public `check` whose `inputs` failed with `fail` (a Fail), or None.
    `observation`: what the student's code gave on `inputs` (the Observation judged), if at hand.

    `run(inputs) -> Observation` (values, error, forbidden) runs the student's half of the check on
    a candidate: in the student's own process (the pytest route) or in a worker. A candidate still
    fails when the check judges it against its own oracle (never a reference: public checks only)
    and the verdict is the same kind of failure: the same message id (and, for an exception, the
    same type). The check may declare `dims` (shrink.dimensions) or opt out with `shrink = False`."""
    from autograder.engine.judge.shrink import shrink  # late: not at the start of a notebook's check cell

    if check.visibility != "public" or not getattr(check, "shrink", True) or not inputs or fail is None:
        return None
    wanted = kind_of(fail)

    def verdict_on(candidate, observation):
        if observation is None or charged_forbidden(observation, check):
            return None
        try:  # a candidate the oracle cannot take (0 heads, say) shows nothing: rejected
            expected = check.expected(**copy.deepcopy(candidate))
        except Exception:  # noqa: BLE001 - the oracle's own limits, not the student's code
            return None
        if observation.error is not None:
            return observation.error
        return judged(check, candidate, observation.values, expected, tol)

    def fails(candidate, observation):
        return kind_of(verdict_on(candidate, observation)) == wanted

    def seeded(candidate):
        # A check in train() mode draws from the global CPU generator (the search shrinks CPU
        # checks only): seeded alone, since torch.manual_seed also queues a seed for every
        # device library, each with the text of the call's stack (milliseconds a candidate).
        torch.default_generator.manual_seed(0)
        return run(candidate)

    shrunk = shrink(inputs, seeded, fails, dims=getattr(check, "dims", None), observation=observation, **limits)
    if shrunk is None:
        return None
    found = verdict_on(shrunk.inputs, shrunk.observation)
    expected = check.expected(**copy.deepcopy(shrunk.inputs))
    raised = found.params.get("type") if found.message_id == "raised" else None
    if shrunk.observation.error is None:
        got, expected = differing(shrunk.observation.values, expected, found, tol)
    else:
        got, expected = {}, expected if isinstance(expected, dict) else {}
    return Example(
        check=check.id,
        inputs={name: value for name, value in shrunk.inputs.items() if name != "mode"},
        got=snapshot(got),
        expected=expected,
        message=messages.render(found.message_id, **found.params),
        raised=raised,
        size_before=shrunk.size_before,
        size_after=shrunk.size_after,
    )


def snapshot(values: dict) -> dict:
    """`values` with each tensor copied: what the student's code gave, as it was when judged. In
    the grader's own process the code may still hold the tensors it returned, and write over
    them once hidden inputs reach it (runner.grade_package: the example is shown after that)."""
    return {key: value.detach().clone() if isinstance(value, torch.Tensor) else value for key, value in values.items()}


def kind_of(fail):
    """What makes two failures the same kind: the message id, and an exception's type."""
    if fail is None:
        return None
    return fail.message_id, fail.params.get("type") if fail.message_id in ("raised", "wrong_exception") else None


def differing(got, expected, fail, tol):
    """(got, expected) cut to the parts of the observation that are wrong: the keys whose values
    differ (all of them where that cannot be told), or, without an expectation, the tensors the
    failure names."""

    if not isinstance(got, dict):
        return {}, {}
    tensors = {key: value for key, value in got.items() if isinstance(value, (torch.Tensor, int, float, bool))}
    if isinstance(expected, dict) and expected:
        keys = []
        for key in expected:
            try:
                if compare(got.get(key), expected[key], tol) is not None:
                    keys.append(key)
            except Exception:  # noqa: BLE001 - values from student code
                keys.append(key)
        keys = keys or list(expected)
        return {key: got.get(key) for key in keys}, {key: expected[key] for key in keys}
    named = str(fail.params.get("name", "")).split(" ")[0] if fail is not None else ""
    if named in tensors:
        return {named: tensors[named]}, {}
    return tensors, {}


def first_example(records, observe, tol, skip=None, **limits):
    """The smallest failing input of a step: smallest_example of the first of its `records`
    (diagnosis.Record) that `shrinkable` says may be shrunk. `observe(check, inputs) ->
    Observation` runs the student's half; `skip(check)`: True for a check not to run again (code
    that hung). One search per step, so that a failing run stays quick; None where there is
    nothing to show."""
    for record in records:
        if shrinkable(record) and (skip is None or not skip(record.check)):
            try:
                return smallest_example(
                    record.check,
                    record.inputs,
                    record.fail,
                    lambda inputs, check=record.check: observe(check, inputs),
                    tol,
                    observation=record.observation,
                    **limits,
                )
            except Exception:  # noqa: BLE001 - the search is a courtesy: it never costs a grade
                return None
    return None


def shrinkable(record) -> bool:
    """Whether a record's failure says something about the computation, on a check whose inputs
    may be shown: no exception the grader expects, no time limit, no forbidden call, not blocked
    by another step's mistake; a public check that needs no device and takes inputs."""
    fail, check, observation = record.fail, record.check, record.observation
    if fail is None or says_nothing(fail, check) or fail.message_id == "not_checked" or not record.inputs:
        return False  # (no inputs: a check that makes its own, nothing to shrink or show)
    if fail.params.get("blocked_by") or check.visibility != "public" or check.requires:
        return False
    return observation is not None and not charged_forbidden(observation, check)
