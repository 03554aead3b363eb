"""The commands and names of README.md, ARCHITECTURE.md and docs/*.md still work, so that a stale
command fails here rather than in a reader's terminal.

Every command of a shell block (```bash) and every `python -m ...` / `pytest ...` written inline
is checked: the module of `python -m` imports; `python -m autograder ...` parses with the real
command line (its commands stubbed, so nothing runs); another module's options appear in its
`--help`; `pytest` options exist (the kit's own plugin included); `pip install` names extras that
pyproject.toml declares and the torch the grading pins; every path into the kit exists (`<id>`
and the like stand for any name). Every `autograder.x.y` name resolves to a module or an
attribute. The cheap commands really run; those that take long (doctor, grading the reference)
are marked slow. The checker is shown to fail on planted stale lines.
"""

import functools
import importlib
import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from conftest import KIT

DOC_FILES = [KIT / "README.md", KIT / "ARCHITECTURE.md", *sorted((KIT / "docs").glob("*.md"))]
# What a path into the kit starts with (an output path such as out/ or grades/ is not the kit's).
KIT_ROOTS = ("autograder", "solutions", "assignments", "tests", "benchmarks", "docs", ".ci")
KIT_FILES = ("grading.yml", "babel.cfg", "pyproject.toml", "README.md", "ARCHITECTURE.md")
# Programs a shell block may run besides python, pytest and pip: their paths are checked.
OTHER_PROGRAMS = {
    "nbgrader",  # tests/test_nbgrader.py runs the course's commands
    "pybabel",  # tests/test_i18n.py runs the compile commands
    "ruff",
    "sbatch",  # tests/test_slurm.py runs the Slurm recipe
    "bash",
    "source",
    "set",
    "cd",
    "mkdir",
    "cp",
    "cat",
    "unzip",
    "echo",
    "ls",
    "realpath",
    "apt-get",
    "gh",  # docs/classroom.md: `gh classroom clone student-repos` (tests/test_classroom_record.py makes its layout)
    "git",
    "for",
    "do",
    "done",
}
SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")"}
REDIRECTS = {">", ">>", "<", ">&"}


# --- what the docs hold ---------------------------------------------------------------------------


def shell_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, text) of each ```bash block."""
    return [
        (text.count("\n", 0, match.start()) + 2, match.group(1))
        for match in re.finditer(r"^```(?:bash|sh|shell)\n(.*?)^```", text, flags=re.S | re.M)
    ]


def shell_commands(block: str) -> list[list[str]]:
    """The simple commands of a shell block, each as its words: continuation lines joined,
    comments dropped, split at `&&`, `|`, `;` and `$(...)`, redirections and variable
    assignments left out."""
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words, skip_next = [], False
        for token in lexer:
            if skip_next:
                skip_next = False
            elif token in SEPARATORS:
                commands.append(words)
                words = []
            elif token in REDIRECTS:
                if words and words[-1].isdigit():  # 2> file
                    words.pop()
                skip_next = True
            else:
                words.append(token)
        commands.append(words)
    return [command for command in map(without_assignments, commands) if command]


def without_assignments(words: list[str]) -> list[str]:
    """The command without its leading `NAME=value` words and `sudo`."""
    while words and (re.match(r"^[A-Za-z_]\w*=", words[0]) or words[0] == "sudo"):
        words = words[1:]
    return words


def inline_commands(text: str) -> list[str]:
    """The inline code spans outside shell blocks that are a `python -m` or `pytest` command."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    spans = (" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose))
    return [span for span in spans if re.match(r"(python3? -m \w|pytest( |$))", span)]


def every_command() -> list[tuple[str, list[str]]]:
    """(where, words) for every command the docs give."""
    found = []
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(KIT)
        for line, block in shell_blocks(text):
            found += [(f"{name}, block at line {line}", words) for words in shell_commands(block)]
        for span in inline_commands(text):
            if "..." not in span:  # a sketch (`grade ... --shard K/N`), not a command
                found.append((f"{name}, inline", shlex.split(span)))
    return found


# --- checking one command -------------------------------------------------------------------------


def is_python(word: str) -> bool:
    return Path(word).name in ("python", "python3") or word == "$(command -v python)"


def command_problems(words: list[str]) -> list[str]:
    """What is wrong with one documented command: empty when it still works."""
    program, args = words[0], words[1:]
    brackets = [word for word in args if word.startswith("[")]
    if brackets:  # `grade DIR [--plots]`: a reader who pastes it passes "[--plots]" as a path
        return [f"{brackets[0]}: a shell block holds commands as typed; say what is optional in a comment"]
    if is_python(program) and args[:1] == ["-m"] and len(args) > 1:
        module, args = args[1], args[2:]
        problems = path_problems(args)
        if importlib.util.find_spec(module) is None:
            return [f"no module {module!r}"]
        if module == "autograder":
            return problems + autograder_problems(args)
        if module == "pytest":
            return problems + option_problems(args, pytest_options())
        if module == "pip":
            return problems + pip_problems(args)
        return problems + option_problems(args, help_options(sys.executable, "-m", module))
    if is_python(program):
        if not args or kit_path(args[0]) is None:
            return [f"python {' '.join(args)}: not a script of the kit"]
        return path_problems(args)
    if program == "pytest":
        return path_problems(args) + option_problems(args, pytest_options())
    if program == "pip":
        return pip_problems(args)
    if program == "pybabel":
        pybabel = str(Path(sys.executable).parent / "pybabel")  # Babel is a dependency of the kit
        return path_problems(args) + option_problems(args[1:], help_options(pybabel, args[0]))
    if program in OTHER_PROGRAMS or program.startswith("$") or program.startswith("#"):
        return path_problems(args)
    return [f"{program!r} is a program this test does not know: check it and add it to OTHER_PROGRAMS"]


def kit_path(word: str) -> str | None:
    """The part of `word` that is a path into the kit (`--config=grading.yml` too), or None."""
    word = word.split("=", 1)[-1]
    if word in KIT_FILES or word.split("/", 1)[0] in KIT_ROOTS and "/" in word:
        return word.rstrip(".,:;")
    return None


def exists_in_kit(path: str) -> bool:
    """Whether `path` names something in the kit: `<id>`, `<step>`, ... and `*` stand for any name."""
    pattern = re.sub(r"<[^>]+>", "*", path).rstrip("/")
    return any(KIT.glob(pattern)) if "*" in pattern else (KIT / pattern).exists()


def path_problems(words: list[str]) -> list[str]:
    paths = [kit_path(word) for word in words]
    return [f"{path} does not exist in the kit" for path in paths if path and not exists_in_kit(path)]


def autograder_problems(args: list[str]) -> list[str]:
    """`python -m autograder ARGS` parsed by the real command line, with nothing run."""
    import autograder.__main__ as entry

    cli = sys.modules[entry.main.__module__]
    parsed = []
    original = cli.run
    cli.run = parsed.append  # called with the parsed arguments once they are valid
    # a shell expansion ("$(nproc)", "$SEED") stands for a value: 1 parses as any of them
    args = ["1" if re.fullmatch(r"\$(\w+|\{.*\}|\(.*\))", arg) else arg for arg in args]
    try:
        status = cli.main(args)
    except SystemExit as stop:  # argparse: a usage error (2) or --help (0)
        status = stop.code
    finally:
        cli.run = original
    if parsed or status == 0:
        return []
    return [f"python -m autograder {' '.join(args)} does not parse (exit {status})"]


@functools.cache
def help_options(*command: str) -> frozenset:
    """The options a command's `--help` names."""
    completed = subprocess.run([*command, "--help"], capture_output=True, text=True, cwd=KIT, timeout=300)
    assert completed.returncode == 0, f"{' '.join(command)} --help: {completed.stderr[-2000:]}"
    return frozenset(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", completed.stdout))


def pytest_options() -> frozenset:
    """pytest's options and the kit's plugin's (assignments/conftest.py loads it)."""
    return help_options(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "assignments/")


def option_problems(args: list[str], known: frozenset) -> list[str]:
    options = [arg.split("=", 1)[0] for arg in args if re.match(r"^--?[A-Za-z]", arg)]
    return [f"{option} is not an option (its --help names no such option)" for option in options if option not in known]


def pip_problems(args: list[str]) -> list[str]:
    """The extras must be pyproject.toml's, a pinned torch the grading's, the index PyTorch's."""
    from autograder.engine.course.torch_pin import GRADING_TORCH

    project = tomllib.loads((KIT / "pyproject.toml").read_text())["project"]
    problems = []
    for arg in args:
        extras = re.fullmatch(r"\.\[([\w,-]+)\]", arg)
        for extra in extras.group(1).split(",") if extras else ():
            if extra not in project["optional-dependencies"]:
                problems.append(f"pyproject.toml declares no extra {extra!r}")
        if arg.startswith("torch==") and arg != f"torch=={GRADING_TORCH}":
            problems.append(f"{arg}: the grading runs on torch {GRADING_TORCH}")
        if arg.startswith("http") and not arg.startswith("https://download.pytorch.org/whl/"):
            problems.append(f"{arg} is not one of PyTorch's wheel indexes")
    return problems


def dotted_names(text: str) -> set[str]:
    """Every `autograder.x.y` name the text gives (not file names such as autograder.pot)."""
    names = re.findall(r"(?<![\w./-])autograder(?:\.[A-Za-z_]\w*)+", text)
    return {name for name in names if name.rsplit(".", 1)[1] not in ("pot", "po", "mo", "zip", "py", "json", "yml")}


def resolves(name: str) -> bool:
    """Whether `name` is a module, or an attribute of one."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(value, part):
                return False
            value = getattr(value, part)
        return True
    return False


def prose_paths(text: str) -> set[str]:
    """The paths into the kit that the text names, in code spans or blocks."""
    spans = re.findall(r"`([^`\n]+)`", text) + re.findall(r"^```\w*\n(.*?)^```", text, flags=re.S | re.M)
    found = set()
    for span in spans:
        for word in re.findall(r"(?<![\w./~$<>-])(?:" + "|".join(map(re.escape, KIT_ROOTS)) + r")/[\w./<>*-]*", span):
            found.add(word.rstrip(".,:;"))
    return found


# --- the tests --------------------------------------------------------------------------------------


COMMANDS = every_command()


def test_the_docs_give_commands():
    assert len(DOC_FILES) >= 10 and len(COMMANDS) > 60, (len(DOC_FILES), len(COMMANDS))
    readme = (KIT / "README.md").read_text(encoding="utf-8")
    # .ci/run runs "the test command that README.md gives": it must stay there, word for word
    assert 'python -m pytest tests -m ""' in readme
    assert 'python -m pytest tests -m ""' in (KIT / ".ci" / "run").read_text()


@pytest.mark.parametrize("where, words", COMMANDS, ids=[" ".join(words)[:90] for _, words in COMMANDS])
def test_every_documented_command_works(where, words):
    assert not command_problems(words), f"{where}: {' '.join(words)}: {command_problems(words)}"


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda path: str(path.relative_to(KIT)))
def test_every_path_and_module_name_exists(doc):
    text = doc.read_text(encoding="utf-8")
    missing = sorted(path for path in prose_paths(text) if not exists_in_kit(path))
    unresolved = sorted(name for name in dotted_names(text) if not resolves(name))
    assert not missing and not unresolved, f"{doc.relative_to(KIT)}: no such path {missing}, no such name {unresolved}"


def test_the_readme_fits_on_two_screens_before_its_links():
    lines = (KIT / "README.md").read_text(encoding="utf-8").splitlines()
    links = next(number for number, line in enumerate(lines) if line.startswith("## Documentation"))
    assert links <= 70, f"README.md reaches its links at line {links}"
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", "\n".join(lines)))
    assert linked == {str(path.relative_to(KIT)) for path in DOC_FILES if path.relative_to(KIT).parts[0] == "docs"}


@pytest.mark.parametrize(
    "line, problem",
    [
        ("python -m autograder.fake_cuda", "no module 'autograder.fake_cuda'"),
        ("python -m autograder grade solutions/ --jsn r.json", "does not parse"),
        ("python -m autograder grayde solutions/", "does not parse"),
        ("python -m pytest tests --quick", "--quick is not an option"),
        ("pytest assignments/ --lnag ko", "--lnag is not an option"),
        ("python -m autograder grade solutions/mha_old/", "solutions/mha_old/ does not exist"),
        ('pip install -e ".[teacher]"', "no extra 'teacher'"),
        ("pip install torch==2.12.0 --index-url https://download.pytorch.org/whl/cpu", "the grading runs on"),
        ("python benchmarks/speed.py", "benchmarks/speed.py does not exist"),
        ("pybabel compile -d autograder/locale -D autograder --strict-ish", "--strict-ish is not an option"),
        ("frobnicate solutions/", "a program this test does not know"),
    ],
)
def test_a_stale_command_fails(line, problem):
    """The checker is shown to fail: planted stale lines, as a README would give them."""
    (words,) = shell_commands(line + "   # a comment")
    assert any(problem in found for found in command_problems(words)), command_problems(words)


def test_stale_names_and_paths_fail():
    text = "calls `autograder.notebook.check_step`; see `autograder/engine/fake_cuda.py`"
    assert [name for name in dotted_names(text) if not resolves(name)] == ["autograder.notebook.check_step"]
    assert [path for path in prose_paths(text) if not exists_in_kit(path)] == ["autograder/engine/fake_cuda.py"]
    block = "```bash\npython -m autograder grade solutions/ \\\n    --shardd 1/2\n```\n"
    (commands,) = [shell_commands(body) for _, body in shell_blocks(block)]
    assert command_problems(commands[0]) == [
        "python -m autograder grade solutions/ --shardd 1/2 does not parse (exit 2)"
    ]
    inline = inline_commands("run `python -m autograder.fake_cuda` or `pytest assignments/`; ```bash\npytest x\n```")
    assert inline == ["python -m autograder.fake_cuda", "pytest assignments/"]


# --- the cheap commands run for real; the long ones are slow ---------------------------------------

RUN = {
    "python -m autograder --help": "grade",  # what the output must hold
    "python -m autograder doctor": "reference mha",
    "python -m autograder grade solutions/": "100.00 / 100",
    "python -m autograder secret": "this course's secret is set",  # the tests' course has one (conftest.py)
}


@pytest.mark.parametrize(
    "command",
    [
        command if "--help" in command or "secret" in command else pytest.param(command, marks=pytest.mark.slow)
        for command in RUN
    ],
)
def test_the_documented_command_runs(command):
    documented = [" ".join(words) for _, words in COMMANDS]
    assert command in documented, f"{command!r} is no longer in the docs: run what they give instead"
    completed = subprocess.run(
        [sys.executable, *shlex.split(command)[1:]], capture_output=True, text=True, cwd=KIT, timeout=600
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert RUN[command] in completed.stdout, completed.stdout[-3000:]


@pytest.mark.slow
def test_the_lms_round_trip_runs_as_documented(tmp_path):
    """docs/instructors.md's LMS block, each line run by bash as written, in a folder holding what
    it names in the shapes the LMSs write: Canvas's submissions.zip, Moodle's download, a roster."""
    import csv
    import os
    import zipfile

    from conftest import SOLUTIONS

    text = (KIT / "docs" / "instructors.md").read_text(encoding="utf-8")
    block = next(block for _, block in shell_blocks(text) if "lms-import canvas" in block)
    (tmp_path / "roster.csv").write_text(
        "id,name,email,canvas_id,sis_id,moodle_id\ns1,Ann Lee,ann@uni,1000,S1,501\ns2,Bo Kim,bo@uni,1001,S2,502\n"
    )
    files = sorted((SOLUTIONS / "mha").glob("*.py"))
    with zipfile.ZipFile(tmp_path / "submissions.zip", "w") as z:
        for prefix in ("leeann_1000_77", "kimbo_LATE_1001_78"):
            for file in files:
                z.writestr(f"{prefix}_{file.name}", file.read_text())
    with zipfile.ZipFile(tmp_path / "moodle-download.zip", "w") as z:
        for folder in ("Ann Lee_501_assignsubmission_file_", "Bo Kim_502_assignsubmission_file_"):
            for file in files:
                z.writestr(f"{folder}/mha/{file.name}", file.read_text())
    with (tmp_path / "worksheet.csv").open("w", newline="") as f:  # Moodle's grading worksheet
        writer = csv.writer(f)
        writer.writerow(["Identifier", "Full name", "Email address", "Status", "Last modified (submission)"])
        writer.writerow(["Participant 501", "Ann Lee", "ann@uni", "Submitted", "Thursday, 1 October 2026, 11:59 PM"])
        writer.writerow(["Participant 502", "Bo Kim", "bo@uni", "Submitted", "Friday, 2 October 2026, 9:05 AM"])
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for line in block.splitlines():
        if line.strip():
            done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True)
            assert done.returncode == 0, line + "\n" + done.stdout[-2000:] + done.stderr[-2000:]
    canvas = list(csv.reader((tmp_path / "canvas-import.csv").open()))
    assert canvas[0][-1] == "MHA (4242)" and [row[-1] for row in canvas[2:]] == ["100.00", "100.00"]
    times = {
        row["submission"]: row["submitted_at"] for row in csv.DictReader((tmp_path / "submissions/lms.csv").open())
    }
    assert times == {"s1": "2026-10-01T23:59:00+09:00", "s2": "2026-10-02T09:05:00+09:00"}
    moodle = list(csv.DictReader((tmp_path / "moodle-worksheet.csv").open()))
    assert [(row["Identifier"], row["Grade"]) for row in moodle] == [
        ("Participant 501", "100.00"),
        ("Participant 502", "100.00"),
    ]
