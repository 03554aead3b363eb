"""A malformed grading.yml, met by every route: one message naming the file and the line, exit
code 2 (pytest too), no traceback, nothing started or written before."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.engine.course import config as grading_config
from conftest import KIT, SOLUTIONS

TYPO = "torch.nn.utils.rnn.pad_sequense"  # pad_sequence, misspelt: it would forbid nothing
FAULTS = {  # name: (what replaces a line of the kit's grading.yml (REPLACED's, else padding's points), a word the message has)
    "forbidden_typo": (f"        forbidden: [{TYPO}]", TYPO),
    "points_text": ("        points: ten", "number"),
    "unknown_key": ("        pointz: 10", "pointz"),  # the schema: additionalProperties
    "unknown_step": ("      - id: paddin", "paddin"),  # no checks module of that name
}
REPLACED = {
    "forbidden_typo": "        forbidden: [torch.nn.utils.rnn.pad_sequence]",
    "unknown_key": "        forbidden: [torch.nn.utils.rnn.pad_sequence]",
    "unknown_step": "      - id: padding",
}


def fault_line(text, fault):
    return next(n for n, line in enumerate(text.splitlines(), 1) if line == FAULTS[fault][0])


@pytest.fixture(scope="module", params=sorted(FAULTS))
def bad_kit(request, tmp_path_factory):
    """A copy of the kit whose grading.yml has one fault: a forbidden torch name that does not
    exist, points given as text, an unknown key or an unknown step."""
    root = tmp_path_factory.mktemp("kit") / "kit"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for top in ("autograder", "assignments", "solutions"):
        shutil.copytree(KIT / top, root / top, ignore=ignore)
    shutil.copyfile(KIT / "pyproject.toml", root / "pyproject.toml")
    text = (KIT / "grading.yml").read_text()
    old = REPLACED.get(request.param, "        points: 10")
    assert old in text
    (root / "grading.yml").write_text(text.replace(old, FAULTS[request.param][0], 1))
    return request.param, root


COMMANDS = {
    "grade": ["-m", "autograder", "grade", "solutions"],
    "release": ["-m", "autograder", "release", "out/release"],
    "gradescope": ["-m", "autograder", "gradescope", "out/autograder.zip"],
    "nbgrader": ["-m", "autograder", "nbgrader", "out/course"],
    "skeleton": ["-m", "autograder", "skeleton", "--check"],
    "fingerprints": ["-m", "autograder", "fingerprints", "--check"],
    "classroom": ["-m", "autograder.routes.classroom", "padding", "--path", "assignments"],
    "pytest": ["-m", "pytest", "assignments/", "-q", "-p", "no:cacheprovider"],
}


QUICK = ("pytest",)  # the quick run tries the student's command; CI (pytest -m "") every command


@pytest.mark.parametrize(
    "command", [pytest.param(c, marks=[] if c in QUICK else [pytest.mark.slow]) for c in sorted(COMMANDS)]
)
def test_every_command_reports_a_bad_grading_yml_with_file_and_line(bad_kit, command):
    fault, bad_kit = bad_kit
    shutil.rmtree(bad_kit / "out", ignore_errors=True)
    (bad_kit / "out").mkdir()
    completed = subprocess.run(
        [sys.executable, *COMMANDS[command]], cwd=bad_kit, capture_output=True, text=True, timeout=300
    )
    output = completed.stdout + completed.stderr
    line = fault_line((bad_kit / "grading.yml").read_text(), fault)
    assert completed.returncode == 2, output  # every command, pytest too
    assert f"{bad_kit / 'grading.yml'}, line {line}:" in output and FAULTS[fault][1] in output, output
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    assert list((bad_kit / "out").iterdir()) == [], "nothing may be written"


def test_grade_validates_before_the_worker_server_starts(bad_kit, monkeypatch, capsys):
    _, bad_kit = bad_kit
    from autograder.routes import cli as cli
    from autograder.sandbox import fork_server

    def start(*args, **kwargs):
        raise AssertionError("the worker server started before the configuration was validated")

    monkeypatch.setattr(fork_server, "start", start)
    assert cli.main(["grade", str(SOLUTIONS), "--config", str(bad_kit / "grading.yml")]) == 2
    assert "line" in capsys.readouterr().err


def test_the_notebook_check_shows_the_message_not_a_traceback(bad_kit, monkeypatch):
    fault, bad_kit = bad_kit
    from autograder.routes import nbgrader_cell as notebook

    monkeypatch.setattr(grading_config, "default_path", lambda: bad_kit / "grading.yml")
    with pytest.raises(grading_config.ConfigError) as error:
        notebook.check_step("padding", directory=str(SOLUTIONS))
    # IPython renders an exception with _render_traceback_ as those lines alone
    rendered = error.value._render_traceback_()
    line = fault_line((bad_kit / "grading.yml").read_text(), fault)
    assert len(rendered) == 1 and f"grading.yml, line {line}:" in rendered[0] and FAULTS[fault][1] in rendered[0]


def test_a_failed_release_leaves_nothing_and_the_rerun_works(tmp_path, monkeypatch):
    from autograder.publish import release as release_module
    from autograder.publish import student_release

    def broken_readme(*args):
        raise OSError("disk full")

    out = tmp_path / "release"
    monkeypatch.setattr(student_release, "student_readme", broken_readme)
    with pytest.raises(OSError):
        release_module.release(out)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    assert release_module.release(out) == out
    assert (out / ".github" / "workflows" / "classroom-mha.yml").is_file() and (out / "README.md").is_file()


def test_a_forbidden_name_that_does_not_resolve_is_rejected_with_its_line():
    text = Path(KIT / "grading.yml").read_text().replace("torch.nn.MultiheadAttention", "torch.nn.MultiHeadAttention")

    with pytest.raises(grading_config.ConfigError) as error:
        grading_config.parse(text)
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "torch.nn.MultiHeadAttention" in row)
    assert f"line {line}:" in str(error.value) and "torch.nn.MultiHeadAttention" in str(error.value)
