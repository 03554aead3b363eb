"""grading.yml -> the Assignments it grades, validated, with errors that name the key and the line.

Validation is declared: grading.schema.json (JSON Schema, Draft 2020-12, also for editors) says
the keys, types and numbers, and jsonschema checks them; small functions after it check what a
schema cannot say (ids of assignments and steps that exist, used once; torch names that import;
a step's check ids and options, from its checks module).

grading.yml is the single source of grading truth. It lists the assignments (each an `id` naming
its folder autograder/assignments/<id>/, a title and its steps in order) and, per step, its
points, title, optional per-check weights, an all-or-nothing switch, tolerances, forbidden calls
and the per-check time limit. A course with one assignment may write its keys at the top level
instead of under `assignments:`. See docs/grading-yml.md for every key.

One module, though long: the dataclasses of an Assignment and the checks that only a reading
of the whole grading.yml can make; most of its length is error messages that name key and line.
"""

import datetime
import difflib
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from autograder import KIT, __version__, cache_base
from autograder.engine.course import assignment as assignments
from autograder.engine.course import late_policy
from autograder.engine.scan.submission import find_notebook, package_root

DEFAULT_TIMEOUT = 10.0  # seconds a check may run, unless grading.yml says otherwise
DEFAULT_BUDGET = 120.0  # seconds a whole submission may take (every check and probe), unless grading.yml says otherwise
DEFAULT_TOLERANCE = {"float64": (1e-7, 1e-9), "float32": (1e-4, 1e-5)}


class ConfigError(Exception):
    """grading.yml is malformed; the message names the file, the line and the key."""

    def _render_traceback_(self):
        """IPython/Jupyter shows this instead of a traceback: the message is the whole story (a
        notebook's check cell that reads a broken grading.yml)."""
        return [f"ConfigError: {self}"]


@dataclass
class StepConfig:
    id: str
    title: str
    points: float
    all_or_nothing: bool = False
    weights: dict = field(default_factory=dict)  # check id -> weight, overriding the check's own
    timeout: float = DEFAULT_TIMEOUT  # seconds per check
    tolerance: dict = field(default_factory=dict)  # torch dtype -> (rtol, atol)
    options: dict = field(default_factory=dict)  # step-specific settings, e.g. cuda's mode
    forbidden: tuple = ()  # dotted names of torch calls this step's code may not use


@dataclass
class Assignment:
    """One assignment as grading.yml grades it. Its code lives in autograder/assignments/<id>/;
    students write the package `<id>` (assignments/<id>/), the reference is solutions/<id>/."""

    id: str
    title: str
    steps: list
    path: Path = None
    budget: float = DEFAULT_BUDGET  # seconds one submission may take in all
    seed: int | None = None  # grading.yml defaults.seed: the hidden checks' seed when a grading gives none
    simulate_cuda: bool = True  # False: a step graded on the simulated device is not run (pytest without --cuda)
    late: late_policy.LatePolicy = None  # grading.yml's `late:`: applied in a batch's gradebook only

    @property
    def package(self) -> str:
        """The name of the package students write (a folder of that name holds their files)."""
        return self.id

    def step(self, step_id: str) -> StepConfig:
        return next(step for step in self.steps if step.id == step_id)

    def step_modules(self) -> dict:
        """step id -> checks module, for this assignment's steps."""
        return assignments.step_modules(self.id)

    def mistakes_of(self, step_id: str) -> list:
        return assignments.mistakes_of(self.id, step_id)


def default_path():
    """grading.yml at the root of the kit (beside autograder/)."""
    return KIT / "grading.yml"


def load_all(path=None, deep: bool = True) -> list:
    """Read and validate grading.yml: every Assignment it grades, in order (`deep`: the check ids
    too, which loads the checks modules: torch)."""
    path = Path(path) if path else default_path()
    return parse_all(_read(path), path, deep=deep)


def precheck(path=None) -> None:
    """Validate grading.yml as far as can be done without importing torch or any check: YAML,
    keys, types, numbers, assignment and step ids. Raises ConfigError. The command line runs it
    before it starts any process; load_all then checks the rest (check ids, step options)."""
    path = Path(path) if path else default_path()
    parse_all(_read(path), path, deep=False)


def validation_key(path=None) -> str:
    """A digest of everything a full validation of grading.yml depends on: its text, the schema,
    this module, every assignment folder's checks, the kit's version and torch's. Torch-free."""
    import hashlib
    import importlib.metadata

    path = Path(path) if path else default_path()
    key = hashlib.sha256()
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "none"
    key.update(f"{__version__} {torch_version}\n".encode())
    checks = sorted((KIT / "autograder" / "assignments").glob("*/checks/*.py"))
    for source in (path, SCHEMA_PATH, Path(__file__), *checks):
        key.update(str(source).encode() + b"\0" + source.read_bytes() + b"\0")
    return key.hexdigest()[:32]


def _validated_mark(path) -> Path:

    return cache_base() / "validated" / validation_key(path)


def validated_before(path=None) -> bool:
    """Whether this exact grading.yml (with these checks, this kit, this torch) passed a full
    validation on this machine: then the command line may start the worker server while it
    validates again, so that the server's torch import overlaps its own (about a second)."""
    try:
        return _validated_mark(path).is_file()
    except OSError:
        return False


def remember_valid(path=None) -> None:
    """Note that grading.yml passed load_all (validated_before); a cache that cannot be written
    only costs the next run its head start."""
    try:
        mark = _validated_mark(path)
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()
    except OSError:
        pass


def _read(path):
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read it ({error.strerror})") from None


def load(path=None, assignment: str = None) -> Assignment:
    """The Assignment `assignment` of grading.yml (the first one listed when None)."""
    return choose(load_all(path), assignment, path or default_path())


def choose(graded: list, assignment_id: str, path) -> Assignment:
    if assignment_id is None:
        return graded[0]
    for candidate in graded:
        if candidate.id == assignment_id:
            return candidate
    raise ConfigError(f"{path}: no assignment `{assignment_id}` (it grades: {', '.join(a.id for a in graded)})")


def found_in(graded: list, submission) -> list:
    """The Assignments of `graded` whose package the submission holds, as staging finds it (a
    folder at its top, under assignments/ or one folder down; a notebook named after it)."""

    path = Path(submission)

    def holds(config):
        if package_root(path, config.package) is not None:
            return True
        notebook = find_notebook(path, config.package) if path.exists() else None
        return notebook is not None and notebook.stem == config.package

    return [config for config in graded if holds(config)]


def parse(text, path=Path("grading.yml"), assignment: str = None) -> Assignment:
    return choose(parse_all(text, path), assignment, path)


def parse_all(text, path=Path("grading.yml"), deep=True) -> list:
    """Read grading.yml's text: the schema first (grading.schema.json: keys, types, numbers), then
    what it cannot say (known assignment and step ids, used once; torch names that import; the
    check ids of `weights` and a step's `options`, read from its checks module when `deep`)."""
    loader = _Loader(text)
    try:  # one parse: the nodes give each key's line, and the data is built from the same nodes
        node = loader.get_single_node()
        data = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{line}: not valid YAML: {getattr(error, 'problem', error)}") from None
    finally:
        loader.dispose()
    lines = {}
    _index_lines(node, (), lines, path)
    where = _Where(path, lines)
    where.validate(data, _schema_validator, SCHEMA_PATH.read_bytes())
    return _Builder(where, deep).assignments(data)


def _passed_mark(schema: bytes, value) -> Path | None:
    """Where a note says that `value` passed `schema` (its text) on this machine: cache_base()/
    schema-valid/<digest of both and of this module>. None where no digest can be made."""
    import hashlib

    try:
        digest = hashlib.sha256(Path(__file__).read_bytes() + b"\0" + schema + b"\0")
        digest.update(json.dumps(value, sort_keys=True, default=repr).encode("utf-8", "surrogatepass"))
    except (OSError, TypeError, ValueError):  # keys of mixed kinds, a cycle: checked, not noted
        return None
    return cache_base() / "schema-valid" / digest.hexdigest()[:32]


def _is_file(path: Path | None) -> bool:
    try:
        return path is not None and path.is_file()
    except OSError:
        return False


def _touch(path: Path | None) -> None:
    """Leave the note (a cache that cannot be written costs only the next run its speed)."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError:
        pass


class _Loader(yaml.SafeLoader):
    """YAML's safe loader, except that a time stays the text it was written as: the schema then
    says what a time must look like (its UTC offset included), and the message quotes it."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


SCHEMA_PATH = Path(__file__).with_name("grading.schema.json")


def schema() -> dict:
    """grading.yml's JSON Schema (Draft 2020-12): the file editors can check grading.yml with."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@functools.cache
def _schema_validator():
    return _draft_2020_12()(schema())


def _draft_2020_12():
    """jsonschema's Draft 2020-12 validator, imported on first use (this module is imported by every
    route). jsonschema's import loads every optional format checker it finds; one of them,
    rfc3987-syntax (Jupyter installs it), builds a parser for seconds each time. grading.yml's
    schema uses no `format`, so when this is jsonschema's first import that checker is left out:
    one more second or two on every command is not worth an IRI check nobody asks for."""
    import sys

    if "jsonschema" not in sys.modules and "rfc3987_syntax" not in sys.modules:
        sys.modules["rfc3987_syntax"] = None  # jsonschema skips a format whose module fails to import
        try:
            import jsonschema  # noqa: F401
        finally:
            del sys.modules["rfc3987_syntax"]  # importing it later, for itself, still works
    from jsonschema import Draft202012Validator

    return Draft202012Validator


def _index_lines(node, key_path, lines, path):
    """Record the line of every key path, and reject duplicate keys (YAML keeps the last)."""
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                raise ConfigError(
                    f"{path}, line {key_node.start_mark.line + 1}: `{_dotted(key_path + (key,))}` appears twice"
                )
            seen.add(key)
            lines[key_path + (key,)] = key_node.start_mark.line + 1
            _index_lines(value_node, key_path + (key,), lines, path)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[key_path + (i,)] = item.start_mark.line + 1
            _index_lines(item, key_path + (i,), lines, path)


def _dotted(key_path):
    text = ""
    for key in key_path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


TYPE_WORDS = {
    "object": "a mapping (key: value lines)",
    "array": "a list",
    "number": "a number",
    "integer": "a whole number",
    "string": "a text",
    "boolean": "true or false",
}


class _Where:
    """Errors that name grading.yml's file, the line of a key path and the key."""

    def __init__(self, path, lines):
        self.path, self.lines = path, lines

    def line(self, key_path):
        for n in range(len(key_path), -1, -1):
            line = self.lines.get(tuple(key_path[:n]))
            if line:
                return line
        return None

    def error(self, key_path, problem):
        line = self.line(key_path)
        where = f", line {line}" if line else ""
        name = _dotted(key_path) or "the file"
        return ConfigError(f"{self.path}{where}: `{name}` {problem}")

    def validate(self, value, validator, schema: bytes, key_path=()):
        """Raise the first (by line; the deepest on a line) of the schema's errors about `value`, which
        is at `key_path`. A missing key comes last: a misspelt key (`pointz`) is the clearer message.
        `validator()` makes the validator of `schema` (its text). A value that passed the same
        schema on this machine before is not checked again (_passed_mark): every later command, a
        student's `pytest assignments/` first, is spared jsonschema's import (a tenth of a second
        or more); what the schema cannot say is checked every time."""
        mark = _passed_mark(schema, value)
        if _is_file(mark):
            return
        found = []
        for error in validator().iter_errors(value):
            at, problem = _explain(error)
            at = tuple(key_path) + at
            found.append((error.validator == "required", self.line(at) or 0, -len(at), len(found), at, problem))
        if found:
            *_, at, problem = min(found)
            raise self.error(at, problem)
        _touch(mark)


def _explain(error) -> tuple:
    """(the key path to name, what is wrong) for one jsonschema error, in grading.yml's words."""
    at, kind, expected, value = tuple(error.absolute_path), error.validator, error.validator_value, error.instance
    if kind == "additionalProperties":
        known = sorted(error.schema.get("properties", {}))
        unknown = [key for key in value if key not in known]
        return at + (unknown[0],), f"is not a known key ({_did_you_mean(unknown[0], known)})"
    if kind == "required":
        missing = next(key for key in expected if key not in value)
        return at, f"is missing the required key `{missing}`"
    if kind == "type":
        wanted = [expected] if isinstance(expected, str) else [t for t in expected if t != "null"]
        words = TYPE_WORDS.get(wanted[0], wanted[0])
        bound = _bound(error.schema)
        return at, f"must be {words}{' ' + bound if bound and wanted[0] == 'number' else ''}, got {_kind(value)}"
    if kind in ("minimum", "exclusiveMinimum"):
        return at, f"must be {_bound(error.schema)}, got {value}"
    if kind == "minItems":
        return at, f"must be a non-empty list{' of ' + str(at[-1]) if at else ''}, got {_kind(value)}"
    if kind == "enum":
        return at, f"must be one of {', '.join(map(str, expected))}, got {value!r}"
    if kind == "pattern":  # the schema's description of the value says what it must be
        description = error.schema.get("description", f"text matching {expected}").rstrip(".")
        return at, f"must be {description[0].lower()}{description[1:]}, got {_kind(value)}"
    return at, error.message


def _bound(schema):
    if "exclusiveMinimum" in schema:
        return f"> {schema['exclusiveMinimum']}"
    if "minimum" in schema:
        return f">= {schema['minimum']}"
    return ""


def _did_you_mean(word, known) -> str:
    """'did you mean `x`? known: ...' for a misspelt name, 'known: ...' for another."""
    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1)
    suggestion = f"did you mean `{close[0]}`? " if close else ""
    return f"{suggestion}known: {', '.join(map(str, known)) or 'none'}"


class _Builder:
    """The Assignments of a grading.yml that the schema accepted, with the checks it cannot make."""

    def __init__(self, where, deep=True):
        self.where, self.deep = where, deep
        self.error = where.error

    def dtype(self, name):
        """The torch dtype called `name` (the name itself in a shallow check: no torch)."""
        if not self.deep:
            return name
        import torch

        return getattr(torch, name)

    def tolerance(self, value, base):
        tolerance = dict(base)
        for name, pair in (value or {}).items():
            tolerance[self.dtype(name)] = (float(pair["rtol"]), float(pair["atol"]))
        return tolerance

    def unique(self, entries, key_path, what):
        """Each entry's id is used once."""
        seen = set()
        for i, entry in enumerate(entries):
            if entry["id"] in seen:
                raise self.error(key_path + (i, "id"), f"repeats the {what} id `{entry['id']}`")
            seen.add(entry["id"])

    def assignments(self, data):
        defaults = data.get("defaults") or {}
        timeout = float(defaults.get("timeout", DEFAULT_TIMEOUT))
        budget = float(defaults.get("budget", DEFAULT_BUDGET))
        seed = defaults.get("seed")
        tolerance = self.tolerance(
            defaults.get("tolerance"), {self.dtype(name): pair for name, pair in DEFAULT_TOLERANCE.items()}
        )
        if "assignments" not in data:  # the short form (the schema's `if`)
            entry = {"id": data["id"], "title": data["assignment"], "steps": data["steps"]}
            if "late" in data:
                entry["late"] = data["late"]
            return [self.assignment(entry, (), timeout, tolerance, budget, seed, title_key="assignment")]
        self.unique(data["assignments"], ("assignments",), "assignment")
        return [
            self.assignment(entry, ("assignments", i), timeout, tolerance, budget, seed)
            for i, entry in enumerate(data["assignments"])
        ]

    def assignment(self, entry, key_path, timeout, tolerance, budget=DEFAULT_BUDGET, seed=None, title_key="title"):
        assignment_id = entry["id"]
        known = assignments.known()
        if assignment_id not in known:
            raise self.error(
                key_path + ("id",),
                f"names no known assignment `{assignment_id}` "
                f"({_did_you_mean(assignment_id, known)}; each is a folder in autograder/assignments/)",
            )
        modules = (
            assignments.step_modules(assignment_id) if self.deep else dict.fromkeys(assignments.step_ids(assignment_id))
        )
        self.unique(entry["steps"], key_path + ("steps",), "step")
        steps = [
            self.step(step, key_path + ("steps", i), timeout, tolerance, modules)
            for i, step in enumerate(entry["steps"])
        ]
        budget = float(entry.get("budget", budget))
        late = self.late(entry["late"], key_path + ("late",)) if entry.get("late") is not None else None
        return Assignment(
            id=assignment_id,
            title=entry["title"],
            steps=steps,
            path=self.where.path,
            budget=budget,
            seed=seed,
            late=late,
        )

    def late(self, entry, key_path):
        """grading.yml's `late:` (the schema passed it) as a LatePolicy; the times must read, a
        cut-off come after the deadline, one kind of deduction and of cap be given."""

        def moment(key):
            try:
                return late_policy.parse_time(str(entry[key]))
            except ValueError as error:
                raise self.error(key_path + (key,), f"is not a time: {error}") from None

        for pair in (("deduct_percent", "deduct_points"), ("max_percent", "max_points")):
            if all(key in entry for key in pair):
                raise self.error(key_path + (pair[1],), f"and `{pair[0]}` are both given: keep one")
        deadline = moment("deadline")
        cutoff = moment("cutoff") if "cutoff" in entry else None
        if cutoff is not None and cutoff < deadline:
            raise self.error(key_path + ("cutoff",), f"({entry['cutoff']}) comes before the deadline")
        extensions = []
        for student, value in (entry.get("extensions") or {}).items():
            at = key_path + ("extensions", student)
            if isinstance(value, dict):
                delta = datetime.timedelta(days=value.get("days", 0), hours=value.get("hours", 0))
                extensions.append(late_policy.Extension(str(student), delta=delta, line=self.where.line(at)))
                continue
            try:
                later = late_policy.parse_time(str(value))
            except ValueError as error:
                raise self.error(at, f"is not a time: {error}") from None
            if later < deadline:
                raise self.error(at, f"({value}) comes before the deadline: an extension moves it later")
            extensions.append(late_policy.Extension(str(student), deadline=later, line=self.where.line(at)))
        return late_policy.LatePolicy(
            deadline=deadline,
            grace=datetime.timedelta(minutes=entry.get("grace_minutes", 0)),
            every=entry.get("every", "day"),
            deduct_percent=entry.get("deduct_percent"),
            deduct_points=entry.get("deduct_points"),
            max_percent=entry.get("max_percent"),
            max_points=entry.get("max_points"),
            cutoff=cutoff,
            extensions=tuple(extensions),
        )

    def step(self, entry, key_path, timeout, tolerance, modules):
        step_id = entry["id"]
        if step_id not in modules:
            raise self.error(
                key_path + ("id",), f"names no known step `{step_id}` ({_did_you_mean(step_id, sorted(modules))})"
            )
        step = StepConfig(
            id=step_id,
            title=entry["title"],
            points=float(entry["points"]),
            all_or_nothing=entry.get("all_or_nothing", False),
            timeout=float(entry.get("timeout", timeout)),
            tolerance=self.tolerance(entry.get("tolerance"), tolerance),
            forbidden=tuple(entry.get("forbidden", ())),
        )
        for i, name in enumerate(step.forbidden if self.deep else ()):  # resolving imports torch
            if not _resolves(name):
                raise self.error(
                    key_path + ("forbidden", i),
                    f"names `{name}`, which is not a torch function "
                    "or class (a typo? the name must import, e.g. torch.nn.functional.softmax)",
                )
        module = modules[step_id]
        if module is None:  # a shallow check: check ids and options are validated later
            return step
        weights = entry.get("weights") or {}
        schema = _weights_schema(module)
        self.where.validate(weights, lambda: _validator(schema), schema.encode(), key_path + ("weights",))
        step.weights = {check_id: float(weight) for check_id, weight in weights.items()}
        allowed = getattr(module, "OPTIONS", {})
        options = dict(entry.get("options") or {})
        for name, value in options.items():
            if value is False and "off" in allowed.get(name, ()):
                options[name] = "off"  # YAML 1.1 reads a bare `off` as false
        schema = _options_schema(module)
        self.where.validate(options, lambda: _validator(schema), schema.encode(), key_path + ("options",))
        step.options = {**{name: values[0] for name, values in allowed.items()}, **options}
        return step


@functools.cache
def _validator(schema_text: str):
    """The validator of a schema given as its JSON text."""
    return _draft_2020_12()(json.loads(schema_text))


@functools.cache
def _weights_schema(module) -> str:
    """The schema of a step's `weights` (JSON text): its checks module's check ids, each a number >= 0."""
    weight = schema()["$defs"]["step"]["properties"]["weights"]["additionalProperties"]
    properties = {check.id: weight for check in module.CHECKS}
    return json.dumps({"type": "object", "additionalProperties": False, "properties": properties}, sort_keys=True)


@functools.cache
def _options_schema(module) -> str:
    """The schema of a step's `options` (JSON text): the names its checks module's OPTIONS
    declares, each one of its values."""
    allowed = getattr(module, "OPTIONS", {})
    properties = {name: {"enum": list(values)} for name, values in allowed.items()}
    return json.dumps({"type": "object", "additionalProperties": False, "properties": properties}, sort_keys=True)


def _resolves(dotted):
    """Whether a dotted torch name stands for something: a typo would forbid nothing, silently."""
    from autograder.harness.watch import resolve  # late: keeps torch out until it runs

    return resolve(dotted) is not None


def _kind(value):
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}"[:60]
