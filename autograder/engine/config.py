"""grading.yml -> the Assignments it grades, validated, with errors that name the key and the line.

grading.yml is the single source of grading truth. It lists the assignments (each an `id` naming
its folder autograder/assignments/<id>/, a title and its steps in order) and, per step, its
points, title, optional per-check weights, an all-or-nothing switch, tolerances, forbidden calls
and the per-check time limit. A course with one assignment may write its keys at the top level
instead of under `assignments:`. See README.md ("grading.yml reference") for every key.
"""
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from autograder import KIT
from autograder.engine import assignment as assignments

DEFAULT_TIMEOUT = 10.0  # seconds a check may run, unless grading.yml says otherwise
DEFAULT_TOLERANCE = {"float64": (1e-7, 1e-9), "float32": (1e-4, 1e-5)}
DTYPE_NAMES = ("float64", "float32")  # the dtypes a tolerance may be given for

TOP_KEYS = {"assignments", "defaults"}
ASSIGNMENT_KEYS = {"id", "title", "steps"}
SHORT_FORM_KEYS = {"id", "assignment", "defaults", "steps"}  # one assignment, written at the top level
DEFAULT_KEYS = {"timeout", "tolerance"}
STEP_KEYS = {"id", "title", "points", "all_or_nothing", "weights", "timeout", "tolerance", "options",
             "forbidden"}


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
    simulate_cuda: bool = True  # False: a step graded on the simulated device is not run (pytest without --cuda)

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


def load_all(path=None) -> list:
    """Read and validate grading.yml: every Assignment it grades, in order."""
    path = Path(path) if path else default_path()
    return parse_all(_read(path), path)


def precheck(path=None) -> None:
    """Validate grading.yml as far as can be done without importing torch or any check: YAML,
    keys, types, numbers, assignment and step ids. Raises ConfigError. The command line runs it
    before it starts any process; load_all then checks the rest (check ids, step options)."""
    path = Path(path) if path else default_path()
    parse_all(_read(path), path, deep=False)


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
    raise ConfigError(f"{path}: no assignment `{assignment_id}` "
                      f"(it grades: {', '.join(a.id for a in graded)})")


def found_in(graded: list, submission) -> list:
    """The Assignments of `graded` whose package the submission holds, as staging finds it (a
    folder at its top, under assignments/ or one folder down; a notebook named after it)."""
    from autograder.engine.submission import find_notebook, package_root
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
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{line}: not valid YAML: {getattr(error, 'problem', error)}") from None
    lines = {}
    _index_lines(node, (), lines, path)
    return _Validator(path, lines, deep).assignments(data)


def _index_lines(node, key_path, lines, path):
    """Record the line of every key path, and reject duplicate keys (YAML keeps the last)."""
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                raise ConfigError(f"{path}, line {key_node.start_mark.line + 1}: "
                                  f"`{_dotted(key_path + (key,))}` appears twice")
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


class _Validator:
    def __init__(self, path, lines, deep=True):
        self.path, self.lines, self.deep = path, lines, deep

    def dtype(self, name):
        """The torch dtype called `name` (the name itself in a shallow check: no torch)."""
        if not self.deep:
            return name
        import torch
        return getattr(torch, name)

    def error(self, key_path, problem):
        line = None
        for n in range(len(key_path), -1, -1):
            line = self.lines.get(tuple(key_path[:n]))
            if line:
                break
        where = f", line {line}" if line else ""
        name = _dotted(key_path) or "the file"
        return ConfigError(f"{self.path}{where}: `{name}` {problem}")

    def mapping(self, value, key_path, allowed, required=()):
        if not isinstance(value, dict):
            raise self.error(key_path, f"must be a mapping (key: value lines), got {_kind(value)}")
        for key in value:
            if key not in allowed:
                raise self.error(key_path + (key,), f"is not a known key (known: {', '.join(sorted(allowed))})")
        for key in required:
            if key not in value:
                raise self.error(key_path, f"is missing the required key `{key}`")
        return value

    def number(self, value, key_path, positive=False):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key_path, f"must be a number, got {_kind(value)}")
        if value < 0 or (positive and value == 0):
            raise self.error(key_path, f"must be {'> 0' if positive else '>= 0'}, got {value}")
        return float(value)

    def text(self, value, key_path):
        if not isinstance(value, str) or not value.strip():
            raise self.error(key_path, f"must be a non-empty text, got {_kind(value)}")
        return value

    def tolerance(self, value, key_path, base):
        tolerance = dict(base)
        for name, pair in self.mapping(value, key_path, set(DTYPE_NAMES)).items():
            pair_path = key_path + (name,)
            self.mapping(pair, pair_path, {"rtol", "atol"}, required=("rtol", "atol"))
            tolerance[self.dtype(name)] = (self.number(pair["rtol"], pair_path + ("rtol",)),
                                       self.number(pair["atol"], pair_path + ("atol",)))
        return tolerance

    def assignments(self, data):
        if isinstance(data, dict) and "assignments" not in data and "steps" in data:  # the short form
            top = self.mapping(data, (), SHORT_FORM_KEYS, required=("id", "assignment", "steps"))
            timeout, tolerance = self.defaults(top.get("defaults"))
            return [self.assignment({"id": top["id"], "title": top["assignment"], "steps": top["steps"]},
                                    (), timeout, tolerance, title_key="assignment")]
        top = self.mapping(data, (), TOP_KEYS, required=("assignments",))
        timeout, tolerance = self.defaults(top.get("defaults"))
        entries = top["assignments"]
        if not isinstance(entries, list) or not entries:
            raise self.error(("assignments",), f"must be a non-empty list of assignments, got {_kind(entries)}")
        graded, seen = [], set()
        for i, entry in enumerate(entries):
            graded.append(self.assignment(entry, ("assignments", i), timeout, tolerance))
            if graded[-1].id in seen:
                raise self.error(("assignments", i, "id"), f"repeats the assignment id `{graded[-1].id}`")
            seen.add(graded[-1].id)
        return graded

    def defaults(self, value):
        defaults = self.mapping(value or {}, ("defaults",), DEFAULT_KEYS)
        timeout = DEFAULT_TIMEOUT
        if "timeout" in defaults:
            timeout = self.number(defaults["timeout"], ("defaults", "timeout"), positive=True)
        tolerance = {self.dtype(name): pair for name, pair in DEFAULT_TOLERANCE.items()}
        if "tolerance" in defaults:
            tolerance = self.tolerance(defaults["tolerance"], ("defaults", "tolerance"), tolerance)
        return timeout, tolerance

    def assignment(self, entry, key_path, timeout, tolerance, title_key="title"):
        if title_key == "title":
            entry = self.mapping(entry, key_path, ASSIGNMENT_KEYS, required=("id", "title", "steps"))
        assignment_id = self.text(entry["id"], key_path + ("id",))
        known = assignments.known()
        if assignment_id not in known:
            raise self.error(key_path + ("id",), f"names no known assignment `{assignment_id}` "
                             f"(known: {', '.join(known)}; each is a folder in autograder/assignments/)")
        title = self.text(entry["title"], key_path + (title_key,))
        modules = assignments.step_modules(assignment_id) if self.deep \
            else dict.fromkeys(assignments.step_ids(assignment_id))
        steps_value = entry["steps"]
        if not isinstance(steps_value, list) or not steps_value:
            raise self.error(key_path + ("steps",), f"must be a non-empty list of steps, got {_kind(steps_value)}")
        steps, seen = [], set()
        for i, step_entry in enumerate(steps_value):
            step_id = step_entry.get("id") if isinstance(step_entry, dict) else None
            if step_id in seen:
                raise self.error(key_path + ("steps", i, "id"), f"repeats the step id `{step_id}`")
            seen.add(step_id)
            steps.append(self.step(step_entry, key_path + ("steps", i), timeout, tolerance, modules))
        return Assignment(id=assignment_id, title=title, steps=steps, path=self.path)

    def step(self, entry, key_path, timeout, tolerance, modules):
        entry = self.mapping(entry, key_path, STEP_KEYS, required=("id", "title", "points"))
        step_id = self.text(entry["id"], key_path + ("id",))
        module = modules.get(step_id)
        if step_id not in modules:
            raise self.error(key_path + ("id",), f"names no known step `{step_id}` "
                             f"(known: {', '.join(sorted(modules))})")
        step = StepConfig(id=step_id, title=self.text(entry["title"], key_path + ("title",)),
                          points=self.number(entry["points"], key_path + ("points",)),
                          timeout=timeout, tolerance=dict(tolerance))
        if "all_or_nothing" in entry:
            if not isinstance(entry["all_or_nothing"], bool):
                raise self.error(key_path + ("all_or_nothing",), f"must be true or false, got {_kind(entry['all_or_nothing'])}")
            step.all_or_nothing = entry["all_or_nothing"]
        if "timeout" in entry:
            step.timeout = self.number(entry["timeout"], key_path + ("timeout",), positive=True)
        if "forbidden" in entry:
            names = entry["forbidden"]
            if not isinstance(names, list) or not all(isinstance(n, str) and n.startswith("torch.") for n in names):
                raise self.error(key_path + ("forbidden",), f"must be a list of dotted torch names "
                                 f"(e.g. torch.nn.functional.scaled_dot_product_attention), got {_kind(names)}")
            for i, name in enumerate(names if self.deep else ()):  # resolving imports torch
                if not _resolves(name):
                    raise self.error(key_path + ("forbidden", i), f"names `{name}`, which is not a torch function "
                                     "or class (a typo? the name must import, e.g. torch.nn.functional.softmax)")
            step.forbidden = tuple(names)
        if "tolerance" in entry:
            step.tolerance = self.tolerance(entry["tolerance"], key_path + ("tolerance",), tolerance)
        if module is None:  # a shallow check: check ids and options are validated later
            return step
        check_ids = {check.id for check in module.CHECKS}
        for check_id, weight in self.mapping(entry.get("weights") or {}, key_path + ("weights",), check_ids).items():
            step.weights[check_id] = self.number(weight, key_path + ("weights", check_id))
        options_allowed = getattr(module, "OPTIONS", {})
        options = self.mapping(entry.get("options") or {}, key_path + ("options",), set(options_allowed))
        for name, value in options.items():
            allowed = options_allowed.get(name) if options_allowed else None
            if value is False and allowed and "off" in allowed:
                options[name] = value = "off"  # YAML 1.1 reads a bare `off` as false
            if allowed and value not in allowed:
                raise self.error(key_path + ("options", name),
                                 f"must be one of {', '.join(map(str, allowed))}, got {value!r}")
        step.options = {**{name: values[0] for name, values in options_allowed.items()}, **options}
        return step


def _resolves(dotted):
    """Whether a dotted torch name stands for something: a typo would forbid nothing, silently."""
    from autograder.engine.forbidden import resolve
    return resolve(dotted) is not None


def _kind(value):
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}"[:60]
