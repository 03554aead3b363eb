"""grading.yml -> GradingConfig, validated, with errors that name the key and the line.

grading.yml is the single source of grading truth: the assignment title, the steps in order,
each step's points, title, optional per-check weights, an all-or-nothing switch, tolerances and
the per-check time limit. See README.md ("grading.yml reference") for every key.
"""
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

DEFAULT_TIMEOUT = 10.0
DEFAULT_TOLERANCE = {"float64": (1e-7, 1e-9), "float32": (1e-4, 1e-5)}
DTYPES = {"float64": torch.float64, "float32": torch.float32}

TOP_KEYS = {"assignment", "defaults", "steps"}
DEFAULT_KEYS = {"timeout", "tolerance"}
STEP_KEYS = {"id", "title", "points", "all_or_nothing", "weights", "timeout", "tolerance", "options",
             "forbidden"}


class ConfigError(Exception):
    """grading.yml is malformed; the message names the file, the line and the key."""


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
class GradingConfig:
    assignment: str
    steps: list
    path: Path = None
    simulate_cuda: bool = True  # False: a step graded on the simulated device is not run (pytest without --cuda)

    def step(self, step_id):
        return next(step for step in self.steps if step.id == step_id)


def default_path():
    """grading.yml at the root of the kit (beside autograder/)."""
    return Path(__file__).resolve().parent.parent / "grading.yml"


def load(path=None, known_steps=None):
    """Read and validate grading.yml. `known_steps` maps step id -> checks module, so that
    step ids, check ids in `weights` and step options can be validated too."""
    path = Path(path) if path else default_path()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read it ({error.strerror})") from None
    return parse(text, path, known_steps)


def parse(text, path=Path("grading.yml"), known_steps=None):
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path.name}{line}: not valid YAML: {getattr(error, 'problem', error)}") from None
    lines = {}
    _index_lines(node, (), lines, path)
    return _Validator(path, lines, known_steps).config(data)


def _index_lines(node, key_path, lines, path):
    """Record the line of every key path, and reject duplicate keys (YAML keeps the last)."""
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                raise ConfigError(f"{path.name}, line {key_node.start_mark.line + 1}: "
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
    def __init__(self, path, lines, known_steps):
        self.path, self.lines, self.known_steps = path, lines, known_steps

    def error(self, key_path, problem):
        line = None
        for n in range(len(key_path), -1, -1):
            line = self.lines.get(tuple(key_path[:n]))
            if line:
                break
        where = f", line {line}" if line else ""
        name = _dotted(key_path) or "the file"
        return ConfigError(f"{self.path.name}{where}: `{name}` {problem}")

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
        for name, pair in self.mapping(value, key_path, set(DTYPES)).items():
            pair_path = key_path + (name,)
            self.mapping(pair, pair_path, {"rtol", "atol"}, required=("rtol", "atol"))
            tolerance[DTYPES[name]] = (self.number(pair["rtol"], pair_path + ("rtol",)),
                                       self.number(pair["atol"], pair_path + ("atol",)))
        return tolerance

    def config(self, data):
        top = self.mapping(data, (), TOP_KEYS, required=("assignment", "steps"))
        assignment = self.text(top["assignment"], ("assignment",))
        defaults = self.mapping(top.get("defaults") or {}, ("defaults",), DEFAULT_KEYS)
        timeout = DEFAULT_TIMEOUT
        if "timeout" in defaults:
            timeout = self.number(defaults["timeout"], ("defaults", "timeout"), positive=True)
        tolerance = {DTYPES[name]: pair for name, pair in DEFAULT_TOLERANCE.items()}
        if "tolerance" in defaults:
            tolerance = self.tolerance(defaults["tolerance"], ("defaults", "tolerance"), tolerance)
        steps_value = top["steps"]
        if not isinstance(steps_value, list) or not steps_value:
            raise self.error(("steps",), f"must be a non-empty list of steps, got {_kind(steps_value)}")
        steps, seen = [], set()
        for i, entry in enumerate(steps_value):
            step_id = entry.get("id") if isinstance(entry, dict) else None
            if step_id in seen:
                raise self.error(("steps", i, "id"), f"repeats the step id `{step_id}`")
            seen.add(step_id)
            steps.append(self.step(entry, ("steps", i), timeout, tolerance))
        return GradingConfig(assignment=assignment, steps=steps, path=self.path)

    def step(self, entry, key_path, timeout, tolerance):
        entry = self.mapping(entry, key_path, STEP_KEYS, required=("id", "title", "points"))
        step_id = self.text(entry["id"], key_path + ("id",))
        module = None
        if self.known_steps is not None:
            module = self.known_steps.get(step_id)
            if module is None:
                raise self.error(key_path + ("id",), f"names no known step `{step_id}` "
                                 f"(known: {', '.join(sorted(self.known_steps))})")
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
            step.forbidden = tuple(names)
        if "tolerance" in entry:
            step.tolerance = self.tolerance(entry["tolerance"], key_path + ("tolerance",), tolerance)
        check_ids = None if module is None else {check.id for check in module.CHECKS}
        for check_id, weight in self.mapping(entry.get("weights") or {}, key_path + ("weights",),
                                             check_ids if check_ids is not None else _Anything()).items():
            step.weights[check_id] = self.number(weight, key_path + ("weights", check_id))
        options_allowed = getattr(module, "OPTIONS", {}) if module is not None else None
        options = self.mapping(entry.get("options") or {}, key_path + ("options",),
                               set(options_allowed) if options_allowed is not None else _Anything())
        for name, value in options.items():
            allowed = options_allowed.get(name) if options_allowed else None
            if value is False and allowed and "off" in allowed:
                options[name] = value = "off"  # YAML 1.1 reads a bare `off` as false
            if allowed and value not in allowed:
                raise self.error(key_path + ("options", name),
                                 f"must be one of {', '.join(map(str, allowed))}, got {value!r}")
        step.options = {**{name: values[0] for name, values in (options_allowed or {}).items()}, **options}
        return step


class _Anything:
    def __contains__(self, item):
        return True

    def __iter__(self):
        return iter(())


def _kind(value):
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}"[:60]
