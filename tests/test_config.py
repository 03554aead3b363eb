"""grading.yml: the kit's own file is valid, and malformed files get errors naming key and line."""

import pytest
import yaml

from autograder import KIT
from autograder.engine.course import config as grading_config
from autograder.engine.course.assignment import step_modules

GOOD = """\
assignment: Test
steps:
  - id: padding
    title: Padding
    points: 10
    weights: {values: 5}
  - id: cuda
    title: Cuda
    points: 5
    options: {mode: off}
id: mha
"""


def parse(text):
    return grading_config.parse(text)


# grading.yml as plain YAML: what the loader must read, read without it
WRITTEN = {entry["id"]: entry for entry in yaml.safe_load((KIT / "grading.yml").read_text())["assignments"]}


@pytest.mark.parametrize("assignment", WRITTEN)
def test_kit_grading_yml_has_every_step_and_100_points(assignment):
    """What the loader reads is what grading.yml says, step by step, and every assignment is out of 100."""
    written = WRITTEN[assignment]
    config = grading_config.load(assignment=assignment)
    assert [s.id for s in config.steps] == [s["id"] for s in written["steps"]]
    assert sum(s.points for s in config.steps) == 100
    assert [s.points for s in config.steps] == [s["points"] for s in written["steps"]]


@pytest.mark.parametrize("assignment", WRITTEN)
def test_every_step_module_is_graded_by_the_kit_config(assignment):
    assert set(step_modules(assignment)) == {s.id for s in grading_config.load(assignment=assignment).steps}


def test_good_config_is_read_with_overrides():
    config = parse(GOOD)
    assert config.step("padding").weights == {"values": 5.0}
    assert config.step("cuda").options == {"mode": "off"}
    assert config.step("padding").timeout == grading_config.DEFAULT_TIMEOUT


@pytest.mark.parametrize(
    "text,line,words",
    [
        (GOOD.replace("points: 10", "points: ten"), 5, ["steps[0].points", "number"]),
        (GOOD.replace("points: 10", "points: -1"), 5, ["steps[0].points", ">= 0"]),
        (GOOD.replace("    title: Padding\n", "    title: Padding\n    pointz: 3\n"), 5, ["pointz", "not a known key"]),
        (GOOD.replace("id: padding", "id: paddin"), 3, ["steps[0].id", "paddin", "no known step"]),
        (GOOD.replace("{values: 5}", "{valuez: 5}"), 6, ["valuez", "not a known key"]),
        (GOOD.replace("mode: off", "mode: sometimes"), 10, ["options.mode", "one of"]),
        (GOOD.replace("    title: Cuda\n", ""), 7, ["steps[1]", "title"]),
        (GOOD.replace("id: cuda", "id: padding"), 7, ["repeats", "padding"]),
        (GOOD.replace("assignment: Test\n", "assignment: Test\nassignment: Again\n"), 2, ["appears twice"]),
        (GOOD.replace("    points: 5\n", "    points: 5\n   bad: [\n"), None, ["not valid YAML"]),
        ("id: mha\nassignment: Test\nsteps: []\n", 3, ["steps", "non-empty"]),
        (GOOD.replace("id: mha", "id: mhaa"), 11, ["id", "mhaa", "no known assignment"]),
        (
            "assignments:\n  - id: mha\n    title: A\n    steps: [{id: padding, title: P, points: 1}]\n"
            "  - id: mha\n    title: B\n    steps: [{id: padding, title: P, points: 1}]\n",
            5,
            ["repeats", "mha"],
        ),
        (
            GOOD.replace("    points: 10\n", "    points: 10\n    all_or_nothing: maybe\n"),
            6,
            ["all_or_nothing", "true or false"],
        ),
    ],
)
def test_malformed_config_names_key_and_line(text, line, words):
    with pytest.raises(grading_config.ConfigError) as error:
        parse(text)
    message = str(error.value)
    if line is not None:
        assert f"line {line}:" in message, message
    for word in words:
        assert word in message, message


def test_tolerance_and_timeout_overrides():
    text = GOOD.replace(
        "steps:", "defaults:\n  timeout: 2\n  tolerance:\n    float32: {rtol: 0.01, atol: 0.001}\nsteps:"
    )
    step = parse(text).step("padding")
    import torch

    assert step.timeout == 2.0
    assert step.tolerance[torch.float32] == (0.01, 0.001)
    assert step.tolerance[torch.float64] == grading_config.DEFAULT_TOLERANCE["float64"]


def test_precheck_needs_no_torch_and_finds_what_it_can(tmp_path):
    """The command line validates grading.yml before it starts any process or imports torch."""
    bad = tmp_path / "grading.yml"
    bad.write_text(GOOD.replace("points: 10", "points: ten"))
    code = (
        "import sys\nfrom autograder.engine.course import config\n"
        f"try:\n    config.precheck({str(bad)!r})\nexcept config.ConfigError as e:\n    print('ERROR', e)\n"
        "print('torch loaded:', 'torch' in sys.modules)\n"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=KIT).stdout
    assert "ERROR" in out and "line 5" in out and "torch loaded: False" in out, out


def test_a_malformed_config_starts_no_worker_server(tmp_path, monkeypatch):
    from autograder.routes import cli
    from autograder.sandbox import fork_server

    started = []
    monkeypatch.setattr(fork_server, "start", lambda *args: started.append(args))
    bad = tmp_path / "grading.yml"
    bad.write_text(GOOD.replace("id: padding", "id: paddin", 1))
    assert cli.main(["grade", str(KIT / "solutions"), "--config", str(bad)]) == 2
    assert started == []
    good = tmp_path / "good.yml"
    good.write_text((KIT / "grading.yml").read_text())
    monkeypatch.setattr(
        fork_server, "start", lambda *args: started.append(args) or (_ for _ in ()).throw(SystemExit(9))
    )
    with pytest.raises(SystemExit):  # the planted server start: reached only once the file is valid
        cli.main(["grade", str(KIT / "solutions"), "--config", str(good)])
    assert started


def test_a_file_validated_before_lets_the_server_start_first_and_an_edit_does_not(tmp_path, monkeypatch):
    """grade validates all of grading.yml before the worker server starts; only a file that passed
    that on this machine lets the server's boot overlap the validation, and an edit (or a forbidden
    name that stopped resolving, whatever changes its key) loses that head start."""
    from autograder.routes import cli
    from autograder.sandbox import fork_server

    monkeypatch.setenv("MHA_LAB_CACHE", str(tmp_path / "cache"))
    order = []
    real_load_all = grading_config.load_all

    def load_all(path=None):
        order.append("validate")
        return real_load_all(path)

    class Started(Exception):
        pass

    def start(*args):
        order.append("server")
        raise Started  # the command itself is not the point: where the server starts is

    monkeypatch.setattr(grading_config, "load_all", load_all)
    monkeypatch.setattr(fork_server, "start", start)
    good = tmp_path / "grading.yml"
    good.write_text((KIT / "grading.yml").read_text())
    for expected in (["validate", "server"], ["server"]):  # first run, then the same file again
        order.clear()
        with pytest.raises(Started):
            cli.main(["grade", str(KIT / "solutions"), "--config", str(good)])
        assert order == expected
    assert grading_config.validated_before(good)
    good.write_text(good.read_text() + "\n# an edit\n")
    assert not grading_config.validated_before(good)
    order.clear()
    with pytest.raises(Started):
        cli.main(["grade", str(KIT / "solutions"), "--config", str(good)])
    assert order == ["validate", "server"]


def test_a_bad_file_is_never_remembered_as_validated(tmp_path, monkeypatch):
    monkeypatch.setenv("MHA_LAB_CACHE", str(tmp_path / "cache"))
    from autograder.routes import cli

    bad = tmp_path / "grading.yml"
    bad.write_text(
        (KIT / "grading.yml")
        .read_text()
        .replace("forbidden: [torch.nn.utils.rnn.pad_sequence]", "forbidden: [torch.nn.utils.rnn.pad_sequenc]", 1)
    )
    assert cli.main(["grade", str(KIT / "solutions"), "--config", str(bad)]) == 2
    assert not grading_config.validated_before(bad)


# --- the schema (autograder/engine/course/grading.schema.json): every level, with the line of the fault ---

COURSE = """\
defaults:
  timeout: 5
  tolerance:
    float32: {rtol: 0.01, atol: 0.001}
assignments:
  - id: mha
    title: Attention
    steps:
      - id: padding
        title: Padding
        points: 10
        weights: {values: 5}
      - id: cuda
        title: Cuda
        points: 5
        options: {mode: real}
        forbidden: [torch.nn.MultiheadAttention]
  - id: kv_cache
    title: Cache
    steps:
      - id: kv_cache
        title: The cache
        points: 20
"""
STEP0, STEP1 = "assignments[0].steps[0]", "assignments[0].steps[1]"


def test_the_course_text_is_valid():
    graded = parse_course(COURSE)
    assert [a.id for a in graded] == ["mha", "kv_cache"]
    assert graded[0].step("cuda").options == {"mode": "real"}
    assert graded[0].step("cuda").forbidden == ("torch.nn.MultiheadAttention",)


def parse_course(text):
    return grading_config.parse_all(text)


SCHEMA_FAULTS = {  # name: (old, new, line, the key named, words of what is wrong)
    # an unknown key, at each level
    "unknown_top": (
        "defaults:\n",
        "colour: red\ndefaults:\n",
        1,
        "colour",
        ["not a known key", "known: assignments, defaults"],
    ),
    "unknown_defaults": (
        "  timeout: 5",
        "  timeut: 5",
        2,
        "defaults.timeut",
        ["not a known key", "did you mean `timeout`"],
    ),
    "unknown_dtype": ("float32:", "float16:", 4, "defaults.tolerance.float16", ["not a known key", "float32, float64"]),
    "unknown_in_tolerance": (
        "atol: 0.001}",
        "atol: 0.001, btol: 1}",
        4,
        "defaults.tolerance.float32.btol",
        ["not a known key", "known: atol, rtol"],
    ),
    "unknown_assignment_key": (
        "    title: Attention\n",
        "    title: Attention\n    points: 100\n",
        8,
        "assignments[0].points",
        ["not a known key", "known: budget, id, late, steps, title"],
    ),
    "unknown_step_key": (
        "        points: 10\n",
        "        points: 10\n        wieghts: {}\n",
        12,
        f"{STEP0}.wieghts",
        ["not a known key", "did you mean `weights`"],
    ),
    "misspelt_points": (
        "        points: 10\n",
        "        pointz: 10\n",
        11,
        f"{STEP0}.pointz",
        ["not a known key", "did you mean `points`"],
    ),  # not: `points` is missing
    "unknown_check": (
        "{values: 5}",
        "{valuez: 5}",
        12,
        f"{STEP0}.weights.valuez",
        ["not a known key", "did you mean `values`"],
    ),
    "unknown_option": ("{mode: real}", "{mood: real}", 16, f"{STEP1}.options.mood", ["not a known key", "known: mode"]),
    # a wrong type
    "title_list": (
        "    title: Attention",
        "    title: [Attention]",
        7,
        "assignments[0].title",
        ["must be a text", "list"],
    ),
    "timeout_text": ("  timeout: 5", "  timeout: soon", 2, "defaults.timeout", ["must be a number > 0", "'soon'"]),
    "weights_list": ("{values: 5}", "[values]", 12, f"{STEP0}.weights", ["must be a mapping"]),
    "forbidden_text": (
        "[torch.nn.MultiheadAttention]",
        "torch.nn.MultiheadAttention",
        17,
        f"{STEP1}.forbidden",
        ["must be a list"],
    ),
    "forbidden_not_torch": (
        "[torch.nn.MultiheadAttention]",
        "[nn.MultiheadAttention]",
        17,
        f"{STEP1}.forbidden[0]",
        ["dotted torch name"],
    ),
    "points_bool": (
        "points: 20",
        "points: yes",
        23,
        "assignments[1].steps[0].points",
        ["must be a number >= 0", "bool True"],
    ),
    "steps_mapping": (
        "      - id: kv_cache\n        title: The cache\n        points: 20\n",
        "      kv_cache: {title: The cache, points: 20}\n",
        20,
        "assignments[1].steps",
        ["must be a list"],
    ),
    # a missing required key
    "no_title": ("    title: Attention\n", "", 6, "assignments[0]", ["missing the required key `title`"]),
    "no_points": ("        points: 5\n", "", 13, STEP1, ["missing the required key `points`"]),
    "no_atol": (
        "{rtol: 0.01, atol: 0.001}",
        "{rtol: 0.01}",
        4,
        "defaults.tolerance.float32",
        ["missing the required key `atol`"],
    ),
    # a negative number
    "points_negative": ("points: 20", "points: -20", 23, "assignments[1].steps[0].points", ["must be >= 0, got -20"]),
    "rtol_negative": ("rtol: 0.01", "rtol: -0.01", 4, "defaults.tolerance.float32.rtol", ["must be >= 0"]),
    "timeout_zero": ("  timeout: 5", "  timeout: 0", 2, "defaults.timeout", ["must be > 0, got 0"]),
    "weight_negative": ("{values: 5}", "{values: -5}", 12, f"{STEP0}.weights.values", ["must be >= 0"]),
    # a value outside its enum (the step's OPTIONS)
    "cuda_mode": (
        "{mode: real}",
        "{mode: gpu}",
        16,
        f"{STEP1}.options.mode",
        ["must be one of auto, real, simulated, off", "'gpu'"],
    ),
    "cuda_mode_number": ("{mode: real}", "{mode: 3}", 16, f"{STEP1}.options.mode", ["must be one of", "3"]),
}


@pytest.mark.parametrize("fault", sorted(SCHEMA_FAULTS))
def test_the_schema_names_the_key_its_line_and_what_is_wrong(fault):
    old, new, line, key, words = SCHEMA_FAULTS[fault]
    assert old in COURSE
    with pytest.raises(grading_config.ConfigError) as error:
        parse_course(COURSE.replace(old, new, 1))
    message = str(error.value)
    assert message.startswith(f"grading.yml, line {line}: `{key}` "), message
    for word in words:
        assert word in message, message


@pytest.mark.parametrize(
    "text,words",
    [
        ("defaults: {timeout: 1}\n", ["`the file` is missing the required key `assignments`"]),
        (
            "id: mha\nassignment: T\nsteps: [{id: padding, title: P, points: 1}]\ntitle: U\n",
            ["line 4: `title` is not a known key", "known: assignment, defaults, id, late, steps"],
        ),
        (
            "id: mha\nsteps: [{id: padding, title: P, points: 1}]\n",
            ["`the file` is missing the required key `assignment`"],
        ),
        ("- mha\n", ["`the file` must be a mapping"]),
    ],
)
def test_the_schema_checks_both_forms_of_the_file(text, words):
    with pytest.raises(grading_config.ConfigError) as error:
        grading_config.parse(text)
    for word in words:
        assert word in str(error.value), str(error.value)


def test_the_shallow_precheck_uses_the_schema_too(tmp_path):
    bad = tmp_path / "grading.yml"
    bad.write_text(COURSE.replace("points: 20", "points: -20"))
    with pytest.raises(
        grading_config.ConfigError, match=r"line 23: `assignments\[1\]\.steps\[0\]\.points` must be >= 0"
    ):
        grading_config.precheck(bad)


def test_the_schema_is_for_editors_too():
    """A Draft 2020-12 schema with an $id, and a description for every key an editor completes."""
    from jsonschema import Draft202012Validator

    schema = grading_config.schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema" and schema["$id"]

    def described(sub):
        return sub.get("description") or schema["$defs"][sub["$ref"].split("/")[-1]].get("description")

    undescribed = [
        f"{name}.{key}"
        for name, definition in schema["$defs"].items()
        for key, sub in definition.get("properties", {}).items()
        if not described(sub)
    ]
    undescribed += [name for name, definition in schema["$defs"].items() if not definition.get("description")]
    assert not undescribed
    import yaml

    assert not list(Draft202012Validator(schema).iter_errors(yaml.safe_load((KIT / "grading.yml").read_text())))


def test_what_is_accepted_is_the_schema_files_decision(tmp_path, monkeypatch):
    """Validation is declared, not hand-written: a schema that allows any key in a step lets a
    misspelt key through."""
    import json

    schema = grading_config.schema()
    del schema["$defs"]["step"]["additionalProperties"]
    planted = tmp_path / "grading.schema.json"
    planted.write_text(json.dumps(schema))
    text = GOOD.replace("    title: Padding\n", "    title: Padding\n    pointz: 3\n")
    with pytest.raises(grading_config.ConfigError, match="pointz"):
        parse(text)
    monkeypatch.setattr(grading_config, "SCHEMA_PATH", planted)
    grading_config._schema_validator.cache_clear()
    try:
        assert parse(text).step("padding").points == 10
    finally:
        monkeypatch.undo()
        grading_config._schema_validator.cache_clear()


def test_the_precheck_leaves_out_jsonschemas_slow_optional_format_checker():
    """rfc3987-syntax (installed with Jupyter) builds a parser for seconds when jsonschema imports
    it; grading.yml's schema uses no format, so precheck does not load it, and it still imports."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("rfc3987_syntax") is None:
        pytest.skip("rfc3987-syntax is not installed here")
    code = (
        "import sys\nfrom autograder.engine.course import config\nconfig.precheck()\n"
        "print('loaded:', 'rfc3987_syntax' in sys.modules)\nimport rfc3987_syntax\nprint('imports')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=KIT).stdout
    assert "loaded: False" in out and "imports" in out, out


def test_grading_yml_is_parsed_once_per_read(monkeypatch):
    # its text is parsed once: the keys' lines and the data come from the same nodes (it was
    # parsed twice, for the lines and for the data); same data, duplicates still refused
    from yaml.composer import Composer

    parsed = []
    compose = Composer.compose_document
    monkeypatch.setattr(Composer, "compose_document", lambda self: parsed.append(1) or compose(self))
    assignment = parse(GOOD)
    assert len(parsed) == 1
    assert [step.id for step in assignment.steps] == ["padding", "cuda"]
    with pytest.raises(grading_config.ConfigError, match="line 12: `steps` appears twice"):
        parse(GOOD + "steps: []\n")
