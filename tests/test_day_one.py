"""A newcomer's first day, as README.md and docs/ tell it, on a fresh clone.

- Every file a command writes goes where it is told, its folder made if missing: every output
  argument of the real command line (found by walking the parser, so a new one must be listed
  here) is run into a folder that does not exist yet.
- What the documented commands write inside the kit's folder is git-ignored: every output path of
  every documented command (parsed by the real command line) and every `> file` of the docs.
- The maintenance commands say what they did, and change nothing on an untouched clone.
"""

import argparse
import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.engine.checks.check import Fail
from autograder.engine.course import config as grading_config
from autograder.engine.judge import result_files
from autograder.engine.judge.score import refused
from autograder.routes import cli
from conftest import KIT
from test_docs import COMMANDS, DOC_FILES, is_python, shell_blocks

# Each path argument of the command line: what it is read from (None) or the command that writes
# it, with {path} where the output goes. A new path argument fails
# test_every_path_argument_is_known until it is listed here.
INPUTS = {
    ("grade", "paths"),
    ("grade", "config"),
    ("grade", "reference"),
    ("grade", "class_list"),
    ("merge", "dirs"),
    ("class-list", "paths"),
    ("report", "dirs"),
    ("adjust", "out"),  # the folder of grade --out, changed in place
    ("adjust", "config"),
    ("history", "out"),
    ("lms-import", "download"),
    ("lms-import", "roster"),
    ("lms-import", "worksheet"),
    ("lms-export", "grades"),
    ("lms-export", "roster"),
    ("nbgrader-sync", "course_dir"),  # the course `nbgrader` wrote: its gradebook changed in place
}
QUICK_OUTPUTS = {
    ("release", "out"): "release {path} --assignment mha",
    ("gradescope", "out"): "gradescope {path}",
    ("nbgrader", "course_dir"): "nbgrader {path}",
    ("student-notebook", "out"): "student-notebook {path}",
    ("report", "html"): "report {grades} --html {path}",
    ("report", "json"): "report {grades} --json {path}",
    ("lms-import", "out"): "lms-import moodle {download} --out {path}",
    ("lms-export", "out"): "lms-export canvas {grades} --roster {roster} --out {path}",
}
GRADING_OUTPUTS = {  # these grade the reference: slow
    ("grade", "json"): "grade solutions/ --assignment mha --public-only --json {path}",
    ("grade", "out"): "grade solutions/ --assignment mha --public-only --out {path}",
    ("grade", "gradescope"): "grade solutions/ --assignment mha --public-only --gradescope {path}",
    ("grade", "plots"): "grade {wrong} --public-only --plots {path}",  # pictures of failing checks
    ("merge", "out"): "merge {graded} --out {path}",
}


def path_arguments() -> set:
    """(command, dest) of every argument of the command line that takes a path."""
    (commands,) = [a for a in cli.command_line()._actions if isinstance(a, argparse._SubParsersAction)]
    return {(name, a.dest) for name, sub in commands.choices.items() for a in sub._actions if a.type is Path}


def test_every_path_argument_is_known():
    assert path_arguments() == INPUTS | set(QUICK_OUTPUTS) | set(GRADING_OUTPUTS)


def autograder(*words, cwd=KIT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autograder", *words], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def a_class(folder: Path) -> Path:
    """A grade --out folder with one result (cheap: a submission refused without running)."""
    config = grading_config.load(assignment="mha")
    result = refused(config, Fail("missing_package", {"package": "mha", "path": "ann"}))
    result.submission = "ann"
    result_files.write_json(result, folder / "ann.json")
    return folder


def run_into_missing_folder(template, tmp_path, graded=None, wrong=None) -> subprocess.CompletedProcess:
    path = tmp_path / "not" / "yet" / "there" / "out.x"
    grades = a_class(tmp_path / "grades")
    roster, download = tmp_path / "roster.csv", tmp_path / "moodle"
    roster.write_text("id,name,email\nann,Ann Lee,ann@example.org\n")
    download.mkdir()
    command = template.format(path=path, grades=grades, graded=graded, wrong=wrong, roster=roster, download=download)
    completed = autograder(*command.split())
    assert completed.returncode in (0, 1) and "Traceback" not in completed.stderr, (
        f"{command}: {completed.stderr[-3000:]}"
    )
    assert path.exists(), f"{command} did not write {path}: {completed.stderr[-3000:]}"
    return completed


@pytest.mark.parametrize("where", sorted(QUICK_OUTPUTS), ids=" ".join)
def test_an_output_goes_into_a_folder_that_does_not_exist_yet(where, tmp_path):
    """`gradescope out/mha.zip`, the docs' first command on a fresh clone, crashed with a
    traceback when out/ did not exist; so did student-notebook and report."""
    completed = run_into_missing_folder(QUICK_OUTPUTS[where], tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "out.x" in completed.stdout, f"it does not say where it wrote: {completed.stdout[-2000:]}"


@pytest.mark.slow  # each grades the reference
@pytest.mark.parametrize("where", sorted(GRADING_OUTPUTS), ids=" ".join)
def test_a_grading_output_goes_into_a_folder_that_does_not_exist_yet(where, tmp_path):
    from planted import PLANTED

    graded, wrong = tmp_path / "graded", tmp_path / "wrong"
    if where == ("merge", "out"):
        assert (
            autograder("grade", "solutions/", "--assignment", "mha", "--public-only", "--out", str(graded)).returncode
            == 0
        )
    mistake = next(planted for planted in PLANTED if planted.diagnosis == "scale_by_d_model")
    shutil.copytree(KIT / "solutions" / "mha", wrong / "mha")
    (wrong / "mha" / mistake.file).write_text(mistake.apply((wrong / "mha" / mistake.file).read_text()))
    run_into_missing_folder(GRADING_OUTPUTS[where], tmp_path, graded, wrong)


# --- what the documented commands write is git-ignored ---------------------------------------------


DIRECTORIES = {
    ("release", "out"),
    ("nbgrader", "course_dir"),
    ("grade", "out"),
    ("grade", "plots"),
    ("merge", "out"),
    ("lms-import", "out"),
}


def documented_outputs() -> set:
    """Every output path a documented `python -m autograder` command gives (as the real command
    line parses it; a folder with its `/`) and every file a documented command writes with `>`."""
    outputs = set()
    for _, words in COMMANDS:
        if not (is_python(words[0]) and words[1:3] == ["-m", "autograder"]):
            continue
        # a shell expansion stands for a value: 1 parses as any of them (as test_docs.py does)
        args = ["1" if re.fullmatch(r"\$(\w+|\{.*\}|\(.*\))", arg) else arg for arg in words[3:]]
        parsed = []
        original, cli.run = cli.run, parsed.append
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                cli.main(args)
        except SystemExit:
            pass
        finally:
            cli.run = original
        for parsed_args in parsed:
            for command, dest in set(QUICK_OUTPUTS) | set(GRADING_OUTPUTS):
                value = getattr(parsed_args, dest, None) if parsed_args.command == command else None
                if value is cli.PLOTS_DEFAULT and getattr(parsed_args, "out", None) is not None:
                    continue  # --plots with --out: into OUT/pictures/
                if isinstance(value, Path):
                    outputs.add(str(value).rstrip("/") + ("/" if (command, dest) in DIRECTORIES else ""))
    redirect = r"(?:^|\s)>>?\s*([^\s;&|)]+)"
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        for _, block in shell_blocks(text):
            outputs.update(re.findall(redirect, block, flags=re.M))
        for span in re.findall(r"`([^`\n]*(?:python3? -m|pytest)[^`\n]*)`", text):
            outputs.update(re.findall(redirect, span))
    return outputs


def placeholder(path: str) -> bool:
    """A name that stands for the reader's own (OUT.zip, COURSE_DIR), or a path outside the kit."""
    return path.startswith(("$", "/", "~", '"$')) or bool(re.fullmatch(r"[A-Z][A-Z0-9_]*(\.\w+)?", Path(path).name))


def git_ignored(paths) -> set:
    completed = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin", "-z"],
        input="".join(f"{path}\0" for path in paths),
        capture_output=True,
        text=True,
        cwd=KIT,
    )
    return set(filter(None, completed.stdout.split("\0")))


def test_what_the_documented_commands_write_in_the_kit_is_git_ignored():
    """README's `grade submitted/* --out grades/` and `report grades/ --html report.html` left
    grades/ and report.html as new files to commit."""
    if not (KIT / ".git").exists():
        pytest.skip("not a git checkout")
    outputs = {path for path in documented_outputs() if not placeholder(path.rstrip("/"))}
    assert {"grades/", "report.html", "out/mha-lab/", "class.txt"} <= outputs  # the reading works
    assert outputs - git_ignored(outputs) == set()
    # and nothing the kit itself tracks is hidden by those rules
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=KIT).stdout.split()
    assert git_ignored(tracked) == set()


def test_a_path_left_out_of_gitignore_is_found(tmp_path):
    """The check is shown to fail: a kit whose .gitignore lacks grades/."""
    if shutil.which("git") is None:
        pytest.skip("no git")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("/out/\n")
    completed = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        input="grades/\nout/mha-lab/\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert set(completed.stdout.split()) == {"out/mha-lab/"}


# --- the maintenance commands on an untouched clone -------------------------------------------------


def fresh_clone(tmp_path) -> Path:
    """The kit's tracked files, as a clone has them, committed in a repository of their own."""
    clone = tmp_path / "clone"
    tracked = subprocess.run(["git", "ls-files", "-z"], capture_output=True, text=True, cwd=KIT, check=True)
    for name in filter(None, tracked.stdout.split("\0")):
        if (KIT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(KIT / name, clone / name)
    for words in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"]):
        subprocess.run(["git", *words], cwd=clone, check=True, capture_output=True)
    return clone


@pytest.mark.slow  # regenerates the fingerprints (minutes)
def test_the_maintenance_commands_say_what_they_did_and_change_nothing_on_a_fresh_clone(tmp_path):
    """`skeleton` printed nothing on success; `fingerprints` rewrote its file with last-digit
    float changes on an untouched clone."""
    if not (KIT / ".git").exists():
        pytest.skip("not a git checkout")
    clone = fresh_clone(tmp_path)
    for command in (["skeleton"], ["fingerprints"], ["generate"], ["skeleton", "--check"], ["generate", "--check"]):
        completed = autograder(*command, cwd=clone)
        assert completed.returncode == 0, f"{command}: {completed.stderr[-3000:]}"
        assert completed.stdout.strip(), f"{' '.join(command)} printed nothing"
        status = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, cwd=clone)
        assert status.stdout == "", f"{' '.join(command)} changed an untouched clone:\n{status.stdout}"


def test_fingerprints_equal_up_to_the_last_bits_are_not_rewritten(tmp_path, monkeypatch):
    """What `fingerprints` does with a fresh generation that differs from the file only in the
    last bits of its floats (BLAS rounds differently on another machine): nothing."""
    from autograder.engine.generate import fingerprint_build
    from autograder.engine.mistakes import fingerprints
    from autograder.routes.cli import make

    config = grading_config.load(assignment="mha")
    shipped = fingerprints.path_of(config.id)
    copy = tmp_path / "fingerprints.json"
    shutil.copy(shipped, copy)

    def nudged(value):
        if isinstance(value, float) and value not in (0.0, 1.0):
            return value * (1 + 1e-13)
        if isinstance(value, dict):
            return {k: nudged(v) for k, v in value.items()}
        if isinstance(value, list):
            return [nudged(v) for v in value]
        return value

    data = json.loads(shipped.read_text())
    assert nudged(data) != data
    monkeypatch.setattr(fingerprint_build, "generate", lambda config: nudged(data))
    monkeypatch.setattr(fingerprints, "path_of", lambda assignment_id: copy)
    monkeypatch.setattr(fingerprints, "_loaded", {})
    monkeypatch.setattr(grading_config, "load_all", lambda path=None: [config])
    monkeypatch.setattr(make, "KIT", tmp_path)  # where it says it wrote, relative to
    monkeypatch.setattr(cli, "student_kit", lambda: False)  # which it reads from KIT
    before = copy.read_bytes()
    assert cli.main(["fingerprints"]) == 0
    assert copy.read_bytes() == before


# --- what a release tells students names only what it holds ----------------------------------------

# A path a student could look for: into a folder the kit or a release has, or a page (*.md).
NAMED_PATH = re.compile(
    r"(?<![\w./<>{}-])((?:docs|notebooks|assignments|autograder|solutions|tests|benchmarks)/[\w./<>*{}-]*|[\w<>-]+\.md)\b"
)


def student_texts(release: Path) -> dict:
    """What students read in a release, by where: its README, the messages its catalogs hold
    (both languages), its notebooks' text, its skeletons and workflows."""
    from babel.messages.mofile import read_mo

    texts = {"README.md": (release / "README.md").read_text(encoding="utf-8")}
    for mo in sorted(release.glob("autograder/**/*.mo")):
        with open(mo, "rb") as f:
            for message in read_mo(f):
                strings = [message.string] if isinstance(message.string, str) else list(message.string)
                texts[f"{mo.relative_to(release)}: {message.id}"] = " ".join(filter(None, strings))
    for notebook in sorted(release.glob("notebooks/*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        texts[str(notebook.relative_to(release))] = "\n".join(
            "".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown"
        )
    for path in sorted([*release.glob("assignments/**/*.py"), *release.glob(".github/workflows/*.yml")]):
        texts[str(path.relative_to(release))] = path.read_text(encoding="utf-8")
    return texts


def missing_from(release: Path) -> list:
    """(where, path) of every path a student text names that the release does not hold."""
    found = []
    for where, text in student_texts(release).items():
        for named in NAMED_PATH.findall(text):
            named = named.rstrip(".,:;")
            pattern = re.sub(r"<[^>]+>|\{[^}]*\}", "*", named)
            if "<" in named:
                found.append((where, f"{named} (a placeholder)"))
            elif (
                not (any(release.glob(pattern.rstrip("/"))) if "*" in pattern else (release / named).exists())
                and not (release / "assignments" / named).exists()
            ):  # `mha/attention.py` of the package
                found.append((where, named))
    return found


@pytest.mark.parametrize("notebooks", [True, False], ids=["with the instructor extra", "without nbformat"])
def test_a_release_names_only_what_it_holds(notebooks, tmp_path, monkeypatch):
    """A release made without the instructor extra told students to open a notebook it did not
    write, and its README kept literal `<package>` placeholders; a refused-code message sent
    students to docs/security-model.md, which no release holds."""
    from autograder.publish.release import release

    if not notebooks:
        monkeypatch.setitem(sys.modules, "nbformat", None)  # `import nbformat` raises ImportError
    out = release(tmp_path / "release")
    assert (out / "notebooks").is_dir() == notebooks
    texts = student_texts(out)
    assert len(texts) > 100 and "tampering" in " ".join(texts)  # the catalogs were read
    assert missing_from(out) == []


def test_a_named_path_a_release_lacks_is_found(tmp_path):
    """The check is shown to fail: a README naming a page, a placeholder and a notebook that
    the release lacks."""
    (tmp_path / "assignments" / "mha").mkdir(parents=True)
    (tmp_path / "assignments" / "mha" / "attention.py").write_text('"""See mha/attention.py."""\n')
    (tmp_path / "README.md").write_text(
        "Fill in `assignments/<package>/*.py`; open `notebooks/mha.ipynb`; read docs/security-model.md. "
        "Your files: `assignments/mha/*.py`.\n"
    )
    assert sorted(named for _, named in missing_from(tmp_path)) == [
        "assignments/<package>/*.py (a placeholder)",
        "docs/security-model.md",
        "notebooks/mha.ipynb",
    ]
