"""The nbgrader route for real and offline: the whole cycle of docs/nbgrader.md, command by command
(a real exchange folder, real `nbgrader` commands, real kernels), then the same submissions
through every route: CLI (`python -m autograder grade`), nbgrader, GitHub Classroom, Gradescope.

One course for the module, with honest students (the reference, the untouched skeleton, the
reference with a masking mistake that also writes to stderr) and students who attack the grade
from their notebook (ATTACKS): the gradebook must hold, for each, what the sandboxed judge gives
their notebook, and no feedback page may show the kit.
"""

import base64
import contextlib
import html
import io
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from autograder.engine.course.assignment import step_modules
from autograder.engine.generate.skeleton import solution_regions
from autograder.engine.scan.submission import notebook_files
from autograder.publish.nbgrader_course import fill_notebook
from autograder.publish.student_release import HIDDEN_MARKER, PROBES_MARKER
from autograder.routes import classroom
from autograder.routes.cli import main as cli
from conftest import KIT, SOLUTIONS
from planted import PLANTED, planted_of

if not os.environ.get("MHA_LAB_CI"):  # CI installs the instructor extra: never skip there
    pytest.importorskip("nbgrader", reason="pip install -e .[instructor]")
import nbformat  # noqa: E402 - comes with nbgrader

from test_nbgrader_kernel import (  # noqa: E402
    LANDLOCK,
    NO_LANDLOCK,
    NO_PID_NAMESPACE,
    kernel_gets_a_pid_namespace,
    processes,
)

pytestmark = pytest.mark.slow  # real nbgrader / Classroom runs: minutes; CI runs them (pytest -m "")

STEPS = [step_id for step_id in step_modules("mha")]
MISTAKE = next(m for m in planted_of("masking") if m.id == "mask_fill_zero")
HIDDEN_ONLY = next(p for p in PLANTED if p.name == "causal_ignores_device")  # a hidden check's catch only
NO_SCALE = next(p for p in PLANTED if p.name == "no_scale")
DOC = KIT / "docs" / "nbgrader.md"
SLEEPER = "613"  # seconds of the `sleep` a student leaves running: no such process may outlive autograde


def reference_files():
    return {p.name: p.read_text() for p in sorted((SOLUTIONS / "mha").glob("*.py"))}


def with_mistake(mistake):
    files = reference_files()
    files[mistake.file] = mistake.apply(files[mistake.file])
    return files


def student_files():
    """The honest students: student id -> {file: source} (empty: the skeleton as released). The
    masking student also leaves debugging output on stderr, which must cost nothing."""
    mistaken = with_mistake(MISTAKE)
    mistaken["masking.py"] += (
        '\nimport sys, warnings\nprint("debugging masks", file=sys.stderr)\nwarnings.warn("still debugging")\n'
    )
    return {"reference": reference_files(), "skeleton": {}, "masking": mistaken}


# ---- students who attack the grade from their notebook -----------------------------------------

REBIND = "check_step = lambda *a, **k: None  # every check cell: no output, so nbgrader's full marks"
SWITCH = """import os
for name in ("NBGRADER_EXECUTION", "MHA_LAB_HIDDEN", "MHA_LAB_PUBLIC_ONLY"):
    os.environ[name] = "off"  # the check cell of old switched the hidden checks on from this one"""
PRINT_KIT = """import glob, importlib.util, os, pathlib, sys
spec = importlib.util.find_spec("autograder")
print("grader at", spec and spec.origin)
guesses = [pathlib.Path(spec.origin).parents[1] if spec else None]
guesses += [parent for entry in sys.path for parent in pathlib.Path(entry or ".").absolute().parents]
guesses += list(pathlib.Path.cwd().parents)
guesses += [pathlib.Path(p).parent.parent for p in glob.glob("/**/solutions/mha/attention.py", recursive=True)[:5]]
for root in dict.fromkeys(g for g in guesses if g):
    for name in ("solutions/mha/attention.py", "grading.yml", "gradebook.db", "source/mha/mha.ipynb",
                 "autograder/assignments/mha/checks/attention.py"):
        try:
            print(name, "->", (root / name).read_text()[:4000])
        except FileNotFoundError:
            pass
        except Exception as error:
            print(root / name, "refused:", type(error).__name__)
try:
    print(open("/proc/self/environ", "rb").read()[:2000])
except OSError as error:
    print("environ refused:", type(error).__name__)"""
# What formgrader would run in the instructor's browser, logged in (it could set manual scores).
SCRIPTS = """from IPython.display import HTML, Javascript, display
display(HTML('<img src=x onerror="window.mhaLabXSS=1"><script>window.mhaLabXSS=2</script>'))
display(Javascript("window.mhaLabXSS=3"))"""
SCRIPT_NOTE = '<script>window.mhaLabXSS=4</script> <img src=y onerror="window.mhaLabXSS=5">'
FAKE_CHECK = """def check_step(*args, points=None, **kwargs):
    print("padding 10.00 / 10.00  (all checks passed)")
    return points
"""
HANG = "while True:\n    pass  # nbgrader's per-cell timeout interrupts it"
FLOOD = """import os, subprocess
written = 0
for i in range(64):  # 64 files of up to 1 GiB each, into the folder the kernel may write
    try:
        with open(f"flood{i}", "wb") as out:
            for _ in range(1024):
                out.write(b"x" * (1 << 20))
                written += 1
    except OSError as error:
        print("stopped at", written, "MiB:", error.strerror)
subprocess.Popen(["sleep", "{sleeper}"], start_new_session=True)  # left running, in a session of its own
""".replace("{sleeper}", SLEEPER)


def cell_after_setup(notebook, source):
    """`notebook` with a code cell holding `source` right after the setup cell."""
    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))
    where = next(i for i, c in enumerate(notebook.cells) if c.get("id") == "setup") + 1
    notebook.cells.insert(where, nbformat.v4.new_code_cell(source))
    return notebook


def with_scripts(notebook):
    """`notebook` with outputs and a markdown cell that a browser would run (SCRIPTS, SCRIPT_NOTE)."""
    notebook = cell_after_setup(notebook, SCRIPTS)
    notebook.cells.insert(1, nbformat.v4.new_markdown_cell(SCRIPT_NOTE))
    return notebook


def tampered_metadata(notebook):
    """The handles nbgrader gives a student on a check cell that nbgrader autograde survives:
    its points, checksum and cell id edited."""
    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))
    cells = {c.get("id"): c for c in notebook.cells}
    cells["check-masking"].metadata.nbgrader["points"] = 1000.0
    cells["check-attention"].metadata.nbgrader["checksum"] = "0" * 32
    cells["check-attention"]["id"] = "check-attention-renamed"
    return notebook


def unflagged(notebook):
    """The handles nbgrader autograde fails on: every check cell without its grade and lock
    flags, one under a grade id of its own, and a cell of the student's that claims a check
    cell's id (before it, so that nbgrader's dedup would keep the student's) with full points."""
    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))
    cells = {c.get("id"): c for c in notebook.cells}
    claim = nbformat.v4.new_code_cell("15.0", id="my-claim")
    claim.metadata["nbgrader"] = {**cells["check-masking"].metadata.nbgrader, "locked": False, "checksum": ""}
    notebook.cells.insert(notebook.cells.index(cells["check-masking"]), claim)
    for cell in cells.values():
        if cell.get("id", "").startswith("check-"):
            cell.metadata.nbgrader.update(grade=False, locked=False)
    cells["check-embedding"].metadata.nbgrader["grade_id"] = "mine"
    return notebook


@dataclass
class Attack:
    """A student who attacks the grade: their files (as student_files), what they do to their
    notebook, the files they leave beside it, and what nbgrader autograde makes of it."""

    files: dict
    notebook: object = None  # the released notebook, filled in -> what the student submits
    beside: dict = field(default_factory=dict)  # path relative to the notebook's folder -> text
    raw: bytes = None  # submitted in place of a notebook
    autograde_fails: bool = False  # nbgrader itself cannot autograde it (its problem, not the class's)


ATTACKS = {
    # the two switches the issue found, and the reference read from a cell
    "rebinds": Attack(with_mistake(NO_SCALE), lambda nb: cell_after_setup(nb, REBIND)),
    "switches": Attack(with_mistake(HIDDEN_ONLY), lambda nb: cell_after_setup(nb, SWITCH)),
    "prints": Attack(reference_files(), lambda nb: with_scripts(cell_after_setup(nb, PRINT_KIT))),
    # nbgrader's handles on a check cell, and files beside the notebook that shadow the grader
    # in the kernel (an `autograder` package) or hold a solved package
    "tampers": Attack(
        with_mistake(MISTAKE),
        tampered_metadata,
        beside={
            "autograder/__init__.py": "",
            "autograder/routes/__init__.py": "",
            "autograder/routes/nbgrader_cell.py": FAKE_CHECK,
            "autograder/engine/__init__.py": "",
            "autograder/engine/course/__init__.py": "",
            "autograder/engine/course/torch_pin.py": "def torch_note():\n    return ''\n",
            **{f"mha/{name}": text for name, text in reference_files().items()},
        },
    ),
    # check cells that are no longer graded nor locked, graded under another id, or claimed by
    # the student's cell: nbgrader autograde fails on them
    "unflags": Attack(with_mistake(NO_SCALE), unflagged, autograde_fails=True),
    # a cell that never ends, one that fills the disk and leaves a process behind
    "hangs": Attack(reference_files(), lambda nb: cell_after_setup(cell_after_setup(nb, HANG), FLOOD)),
    # not a notebook at all
    "breaks": Attack({}, raw=b"\x00\xff not a notebook " * 1000, autograde_fails=True),
}


def honest_scores(tmp_path, course) -> dict:
    """student -> {step: points} that `python -m autograder grade` gives each submitted notebook."""
    found = {}
    for student in [*student_files(), *ATTACKS]:
        notebook = course / "submitted" / student / "mha" / "mha.ipynb"
        found[student] = cli_points(tmp_path / student, notebook)
    return found


# ---- the cycle of docs/nbgrader.md --------------------------------------------------------------


def doc_blocks() -> list:
    """(role, cwd word, [command lines]) of each ```bash block of docs/nbgrader.md, in order: the
    role ("instructor" or "student") and where it runs ("course/" or the start) from the comment
    that opens the block."""
    from test_docs import shell_blocks

    blocks = []
    for _, text in shell_blocks(DOC.read_text(encoding="utf-8")):
        lines = [line for line in text.splitlines() if line.strip()]
        opening = lines[0]
        assert opening.startswith("# "), f"docs/nbgrader.md: a block opens with who runs it, where: {opening}"
        role = "student" if "student" in opening else "instructor"
        where = "course" if "in course/" in opening else "start"
        commands = [shlex.split(line, comments=True) for line in lines[1:]]
        blocks.append((role, where, [command for command in commands if command]))
    return blocks


@dataclass
class Cycle:
    root: Path
    course: Path
    homes: dict
    logs: dict = field(default_factory=dict)  # command -> (exit code, output)
    ran: list = field(default_factory=list)  # the commands run, as words


def environments(root: Path, students) -> dict:
    """role or student -> the environment its commands run in: the kit's python and nbgrader
    first on PATH, a home of its own, and nbgrader's configuration as a hub gives it (the
    exchange folder; a student's id)."""
    exchange = root / "exchange"
    exchange.mkdir(mode=0o777)
    os.chmod(exchange, 0o777)
    base = {
        **os.environ,
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
        "MHA_LAB_CACHE": str(Path(os.environ.get("MHA_LAB_CACHE") or Path.home() / ".cache" / "mha-lab")),
    }
    base.pop("PYTHONPATH", None)
    found = {}
    for who in ["instructor", *students]:
        home = root / "homes" / who
        config = home / ".jupyter"
        config.mkdir(parents=True)
        lines = [f"c.Exchange.root = {str(exchange)!r}"]
        if who != "instructor":
            lines.append(f"c.CourseDirectory.student_id = {who!r}")
        (config / "nbgrader_config.py").write_text("\n".join(lines) + "\n")
        found[who] = {**base, "HOME": str(home), "JUPYTER_CONFIG_DIR": str(config), "TMPDIR": str(root / "tmp")}
    (root / "tmp").mkdir()
    found["instructor"].update(unconfined())
    return found


def unconfined() -> dict:
    """Where the machine's kernel has no Landlock, the autograde kernel refuses to start: the
    instructor's knowing opt-out (docs/threat-model.md), so that the rest of the cycle (the judge's
    gradebook, the feedback filter, the inert outputs) is still tested. The confinement's own
    assertions skip there, saying why (LANDLOCK)."""
    return {} if LANDLOCK else {"MHA_LAB_UNCONFINED_KERNEL": "1"}


def run_block(cycle, env, cwd, commands, allowed_failures=()):
    for words in commands:
        if words[0] == "cd":
            cwd = (cwd / words[1]).resolve()
            continue
        completed = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
        output = completed.stdout + completed.stderr
        cycle.logs.setdefault(" ".join(words), []).append((completed.returncode, output))
        cycle.ran.append(words)
        if completed.returncode != 0 and " ".join(words) not in allowed_failures:
            raise AssertionError(f"{' '.join(words)} (in {cwd}): exit {completed.returncode}\n{output[-4000:]}")
    return cwd


def work(home: Path, student: str):
    """What a student does between fetch and submit, in their fetched mha/ folder."""
    folder = home / "mha"
    released = nbformat.read(str(folder / "mha.ipynb"), as_version=4)
    attack = ATTACKS.get(student)
    files = student_files()[student] if attack is None else attack.files
    notebook = fill_notebook(released, files, "mha")
    if attack is not None and attack.raw is not None:
        (folder / "mha.ipynb").write_bytes(attack.raw)
        return
    if attack is not None and attack.notebook is not None:
        notebook = attack.notebook(notebook)
    nbformat.write(notebook, str(folder / "mha.ipynb"))
    for name, text in (attack.beside if attack else {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


@pytest.fixture(scope="module")
def cycle(tmp_path_factory):
    """docs/nbgrader.md's cycle, every command of it, for the honest students and ATTACKS. The
    course's nbgrader_config.py gets shorter time limits than its defaults (the hanging cell
    would cost 300 s)."""
    root = tmp_path_factory.mktemp("cycle")
    students = [*student_files(), *ATTACKS]
    envs = environments(root, students)
    cycle = Cycle(root, root / "course", {s: Path(envs[s]["HOME"]) for s in students})
    blocks = doc_blocks()
    student_blocks = 0
    autograde_fails = {"nbgrader autograde mha"} if any(a.autograde_fails for a in ATTACKS.values()) else set()
    for role, where, commands in blocks:
        if role == "instructor":
            cwd = cycle.course if where == "course" else root
            run_block(cycle, envs["instructor"], cwd, commands, allowed_failures=autograde_fails)
            if (cycle.course / "nbgrader_config.py").is_file() and not (root / "configured").exists():
                with open(cycle.course / "nbgrader_config.py", "a") as config:
                    config.write("c.Execute.timeout = 30\nc.ConfinedExecute.budget = 240\n")
                (root / "configured").touch()
            continue
        for student in students:
            run_block(cycle, envs[student], cycle.homes[student], commands)
            if student_blocks == 0:  # after fetching: the work
                work(cycle.homes[student], student)
        student_blocks += 1
    return cycle


@pytest.fixture(scope="module")
def course(cycle):
    return cycle.course


def run_nbgrader(course, *args):
    """`python -m nbgrader ARGS` in `course` (nbgrader runs the `alembic` script of its
    environment: that environment's bin first on PATH)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(KIT),
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
        **unconfined(),
    }
    completed = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True, text=True, timeout=900
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return completed


def gradebook_rows(course, students=None) -> dict:
    """student -> {grade id: (auto score, manual score, needs manual grade)}: everything of the
    kit's check cells a grader can see in formgrader."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "mha-lab") as gradebook:
        rows = {}
        for student in students or [*student_files(), *ATTACKS]:
            notebook = gradebook.find_submission_notebook("mha", "mha", student)
            rows[student] = {
                g.name: (g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade) for g in notebook.grades
            }
            rows[student].update({f"comment:{c.name}": (c.auto_comment, c.manual_comment) for c in notebook.comments})
    return rows


def nbgrader_points(course, students=None):
    """student -> {step: points} from nbgrader's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "mha-lab") as gradebook:
        points = {}
        for student in students or student_files():
            notebook = gradebook.find_submission_notebook("mha", "mha", student)
            points[student] = {g.name.removeprefix("check_"): round(g.score, 4) for g in notebook.grades}
    return points


def cli_points(tmp_path, submission, public_only=False):
    out = tmp_path / ("public.json" if public_only else "result.json")
    with contextlib.redirect_stdout(io.StringIO()):
        assert (
            cli(
                [
                    "grade",
                    str(submission),
                    "--assignment",
                    "mha",
                    "--json",
                    str(out),
                    *(["--public-only"] if public_only else []),
                ]
            )
            == 0
        )
    return {s["id"]: round(s["score"], 4) for s in json.loads(out.read_text())["steps"]}


def write_package(root, files):
    """root/mha/ holding `files` (the skeleton's files where `files` is empty)."""
    package = root / "mha"
    package.mkdir(parents=True)
    source = files or {p.name: p.read_text() for p in (KIT / "assignments" / "mha").glob("*.py")}
    for name, text in source.items():
        (package / name).write_text(text)
    return root


def hidden_check_lines():
    """Distinctive source lines of every hidden check (what feedback must never show)."""
    lines = set()
    for path in (KIT / "autograder" / "assignments" / "mha" / "checks").glob("*.py"):
        text = path.read_text()
        if HIDDEN_MARKER in text:
            region = text.split(HIDDEN_MARKER, 1)[1].split(PROBES_MARKER, 1)[0]
            lines |= {
                line.strip()
                for line in region.splitlines()
                if len(line.strip()) > 24 and not line.strip().startswith(("#", '"""'))
            }
    assert lines, "no hidden check lines found: the test would prove nothing"
    return lines


def shipped_lines():
    """The lines of the grader the student's notebook carries (the student release's): no leak."""
    import zipfile

    from autograder.engine.course import config as grading_config
    from autograder.publish.student_release import grader_archive

    with zipfile.ZipFile(io.BytesIO(grader_archive(grading_config.load(assignment="mha")))) as archive:
        return {
            line.strip()
            for name in archive.namelist()
            if name.endswith(".py")
            for line in archive.read(name).decode().splitlines()
        }


def reference_lines():
    """The reference's own lines: those of its solution regions that no skeleton shows."""
    shown = "\n".join(p.read_text() for p in (KIT / "assignments" / "mha").glob("*.py"))
    return {
        line.strip()
        for source in reference_files().values()
        for region in solution_regions(source)
        for line in region.splitlines()
        if len(line.strip()) > 24 and line.strip() not in shown
    }


def hidden_only_check_ids():
    """Ids of hidden checks that no public check shares (feedback shows them as a count only)."""
    checks = [c for module in step_modules("mha").values() for c in module.CHECKS]
    return {c.id for c in checks if c.visibility == "hidden"} - {c.id for c in checks if c.visibility == "public"}


def page_text(course, student):
    return html.unescape(re.sub(r"<[^>]+>", "", (course / "feedback" / student / "mha" / "mha.html").read_text()))


def autograde_log(cycle, student) -> str:
    """What `nbgrader autograde` logged while it graded `student`'s notebook."""
    (_, log), *_ = cycle.logs["nbgrader autograde mha"]
    sections = re.split(r"(?=\[AutogradeApp \| INFO\] Sanitizing )", log)
    return "".join(part for part in sections if f"/submitted/{student}/" in part.split("\n", 1)[0])


def test_the_course_notebook_in_solutions_is_up_to_date(config):
    from autograder.publish.nbgrader_course import write_course_notebook

    assert write_course_notebook(config, dry_run=True) == [], "run `python -m autograder skeleton` and commit"


def test_a_stale_course_notebook_is_reported(config, tmp_path):
    from autograder.publish.nbgrader_course import write_course_notebook

    stale = tmp_path / "mha.ipynb"
    stale.write_text((SOLUTIONS / "mha.ipynb").read_text().replace("raise NotImplementedError", "pass  # "))
    assert write_course_notebook(config, target=stale, dry_run=True) == [stale]


def test_every_command_of_the_docs_ran(cycle):
    documented = [words for _, _, commands in doc_blocks() for words in commands if words[0] != "cd"]
    assert len(documented) >= 12, documented
    missing = [" ".join(words) for words in documented if words not in cycle.ran]
    assert not missing, f"docs/nbgrader.md commands the cycle did not run: {missing}"


def test_the_released_notebook_has_no_solution_and_no_hidden_switch(course):
    text = (course / "release" / "mha" / "mha.ipynb").read_text()
    assert "HIDDEN TESTS" not in text and "hidden = True" not in text and "NBGRADER_EXECUTION" not in text
    released = json.loads(text)
    sources = "\n".join(
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in released["cells"]
    )
    skeletons = {p.name: p.read_text() for p in (KIT / "assignments" / "mha").glob("*.py")}
    shown = "\n".join(skeletons.values())
    for name, source in reference_files().items():
        for region in solution_regions(source):
            for line in region.splitlines():
                code = line.strip()  # a line the skeleton itself shows (in a TODO comment) is no leak
                assert len(code) < 12 or code not in sources or code in shown, f"{name}: {code}"


@pytest.mark.xfail(
    strict=True,
    reason="the course notebook keeps both languages (solutions/), assignments/mha ships Korean only since "
    "the one-language skeletons: the released cells no longer hold the shipped files (open, issue 35)",
)
def test_the_released_notebook_cells_are_the_shipped_skeletons(course):
    """The released solution cells hold exactly the skeletons students get in assignments/mha."""
    released = json.loads((course / "release" / "mha" / "mha.ipynb").read_text())
    skeletons = {p.name: p.read_text() for p in (KIT / "assignments" / "mha").glob("*.py")}
    for name, source in notebook_files(released, "mha").items():
        assert source.strip() in skeletons[name], name


def test_autograde_finds_no_locked_cell_changed(cycle):
    """nbgrader compares each locked cell with the checksum its gradebook kept at
    generate_assignment, before it cut hidden-test regions: a check cell with such a region was
    reported changed for every student. (A student who edits a check cell is reported.)"""
    for student in student_files():
        log = autograde_log(cycle, student)
        assert "Autograding" in log, log[-2000:]
        assert "Attribute 'checksum'" not in log and "has changed" not in log, log[-2000:]
    assert "has changed" in autograde_log(cycle, "tampers")


def test_the_gradebook_holds_what_the_sandboxed_judge_gives_each_notebook(course, tmp_path):
    """The grade of record, for the honest students and each attack: per step, what `python -m
    autograder grade` gives the notebook the student submitted (the CLI reads the notebook
    itself). Fails on main 7d8dbad: rebinds 100.0 (the CLI: 85.0), switches 100.0 (97.81)."""
    honest = honest_scores(tmp_path, course)
    points = nbgrader_points(course, [*student_files(), *ATTACKS])
    for student in points:
        assert set(points[student]) == set(STEPS), student
        assert points[student] == honest[student], student
    total = {student: sum(steps.values()) for student, steps in points.items()}
    assert total["reference"] == pytest.approx(100) and total["skeleton"] == 0
    assert 0 < points["masking"]["masking"] < 15
    assert points["rebinds"]["attention"] == 0 and total["rebinds"] < 100  # its mistake, not the lambda
    assert points["switches"]["masking"] < 15  # the hidden check caught it, whatever the cell set
    assert total["prints"] == pytest.approx(100) and total["hangs"] == pytest.approx(100)
    assert points["tampers"] == points["masking"]  # the same mistake: its metadata and files changed nothing
    assert total["breaks"] == 0
    assert points["unflags"]["attention"] == 0 and total["unflags"] < 100


def test_a_check_cell_that_claimed_more_is_flagged_and_says_so(course, cycle):
    """The rebinding gave every check cell nbgrader's full marks in the kernel, and so did a
    package `autograder` beside the notebook: where that is more than the sandbox gives, the
    gradebook asks a human to look, and the feedback says why."""
    rows = gradebook_rows(course, ["rebinds", "tampers", "reference", "masking"])
    assert rows["rebinds"]["check_attention"][3] is True
    assert rows["tampers"]["check_masking"][3] is True  # its own `autograder` beside the notebook said 15
    assert not any(row[3] for name, row in rows["reference"].items() if name.startswith("check_"))
    assert not any(row[3] for name, row in rows["masking"].items() if name.startswith("check_"))
    page = page_text(course, "rebinds")
    assert "This cell's own result in your notebook was 15.00, but the same public checks give 0.00" in page
    synced = "\n".join(output for _, output in cycle.logs["python -m autograder nbgrader-sync ."])
    assert re.search(r"rebinds: 85\.00 in the gradebook.*check_attention said 15\.00", synced), synced[-3000:]


def test_exported_csv_totals_match_the_gradebook(course):
    import csv

    rows = {row["student_id"]: row for row in csv.DictReader((course / "grades.csv").open())}
    for student, steps in nbgrader_points(course, [*student_files(), *ATTACKS]).items():
        assert float(rows[student]["score"]) == pytest.approx(sum(steps.values()), abs=1e-3)
        assert float(rows[student]["max_score"]) == pytest.approx(100)


def test_check_cells_write_nothing_to_stderr(course):
    for student in student_files():
        graded = nbformat.read(str(course / "autograded" / student / "mha" / "mha.ipynb"), as_version=4)
        checks = [c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade")]
        assert len(checks) == len(STEPS)
        for cell in checks:
            assert not [o for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"], cell.source
            assert [o for o in cell.outputs if o.output_type == "execute_result"], cell.source


def test_feedback_shows_what_failed_but_no_hidden_check_source(course):
    hidden = hidden_check_lines() - shipped_lines()
    assert len(hidden) > 20
    for student in [*student_files(), *(a for a in ATTACKS if not ATTACKS[a].autograde_fails)]:
        page = page_text(course, student)
        assert "HIDDEN TESTS" not in page and "hidden = True" not in page
        shown = [line for line in hidden if line in page]
        assert shown == [], f"{student}: hidden check source in the feedback: {shown[:3]}"
        named = set(re.findall(r"x (\w+):", page)) & hidden_only_check_ids()
        assert not named, f"{student}: hidden checks named in the feedback: {named}"
        assert page.count("Grade (the course's sandboxed grader") >= len(STEPS) - 2, student
    masking = html.unescape((course / "feedback" / "masking" / "mha" / "mha.html").read_text())
    assert "blocked key" in masking  # the failing check says what is wrong


def test_no_feedback_page_shows_a_file_or_path_of_the_kit(course):
    """The student who printed every kit file they could find, and everyone else: no line of
    the reference or of a hidden check, no path of the kit, not the 400 KB grader line. Fails on
    main 7d8dbad: prints's page held solutions/mha/attention.py."""
    secret = (reference_lines() | hidden_check_lines()) - shipped_lines()
    assert len(secret) > 40
    released = (course / "release" / "mha" / "mha.ipynb").read_text()
    grader = re.search(r'GRADER = \\"([A-Za-z0-9+/=]+)\\"', released).group(1)
    assert len(grader) > 100_000
    for student in [*student_files(), *(a for a in ATTACKS if not ATTACKS[a].autograde_fails)]:
        raw = (course / "feedback" / student / "mha" / "mha.html").read_text()
        page = page_text(course, student)
        submitted = json.loads((course / "submitted" / student / "mha" / "mha.ipynb").read_text())
        own = "\n".join(
            "".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in submitted["cells"]
        )
        assert str(KIT) not in raw and str(KIT.resolve()) not in raw, student
        assert [line for line in secret if line in page and line not in own] == [], student
        assert grader[:60] in raw and grader[100:1000] not in raw, student  # the grader's line is cut
    assert "grader at" in page_text(course, "prints")
    if not LANDLOCK:  # the kernel unconfined: the filter had the kit's lines to cut, and cut them
        graded = (course / "autograded" / "prints" / "mha" / "mha.ipynb").read_text()
        assert [line for line in secret if line in graded], "the unconfined kernel printed no kit line"


@pytest.mark.skipif(not LANDLOCK, reason=NO_LANDLOCK)
def test_a_student_cell_reads_nothing_of_the_kit_at_autograde(course):
    """The confined kernel: the cell that looks for the kit everywhere finds it not importable
    and reads none of its files, nor the gradebook (the autograded notebook, before any filter)."""
    graded = nbformat.read(str(course / "autograded" / "prints" / "mha" / "mha.ipynb"), as_version=4)
    printed = "".join(o.get("text", "") for c in graded.cells if c.source == PRINT_KIT for o in c.outputs)
    assert "grader at" in printed and f"grader at {KIT}" not in printed, printed[-3000:]  # its own public one
    assert f"{KIT}/solutions/mha/attention.py refused: PermissionError" in printed, printed[-3000:]
    assert not re.search(r"^(solutions/|gradebook\.db|source/)\S* ->", printed, re.M), printed[-3000:]


def test_students_fetch_their_feedback(cycle):
    for student in [*student_files(), *ATTACKS]:
        pages = list((cycle.homes[student] / "mha" / "feedback").glob("*/mha.html"))
        assert bool(pages) != ATTACKS.get(student, Attack({})).autograde_fails, student


def test_nothing_the_students_ran_outlives_autograde(cycle, course):
    assert not list((cycle.root / "tmp").glob("mha-lab-kernel-*"))  # the kernels' scratch folders
    assert not list((course / "autograded" / "hangs").rglob("flood*"))  # it wrote in its scratch only
    log = autograde_log(cycle, "hangs")
    assert "CellTimeoutError" in log or "Timeout" in log or "timed out" in log.lower(), log[-3000:]


@pytest.mark.skipif(not kernel_gets_a_pid_namespace(), reason=NO_PID_NAMESPACE)
def test_no_process_a_student_started_outlives_autograde(cycle):
    assert ["sleep", SLEEPER] not in processes().values()


def test_a_broken_notebook_costs_only_its_student(cycle, course):
    log = autograde_log(cycle, "breaks")
    assert "breaks" in log
    synced = "\n".join(output for _, output in cycle.logs["python -m autograder nbgrader-sync ."])
    assert re.search(r"breaks: 0\.00 in the gradebook; notebook not a readable notebook", synced), synced[-3000:]


def test_manual_scores_and_comments_survive_every_later_sync(course, tmp_path):
    """What a grader sets in formgrader (written here as formgrader writes it, through the
    Gradebook API) is never overwritten; a second sync writes the same rows (idempotent) and
    leaves a resolved flag resolved; `nbgrader autograde --force` puts the judge's scores back,
    never the kernel's. Fails on main 7d8dbad: no sync (`nbgrader-sync` is not a command)."""
    from nbgrader.api import Gradebook

    course = Path(shutil.copytree(course, tmp_path / "course", symlinks=True))  # the others read the cycle's
    env = {**os.environ, "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])}
    sync = [sys.executable, "-m", "autograder", "nbgrader-sync", str(course)]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "mha-lab") as gradebook:
        grade = gradebook.find_grade("check_masking", "mha", "mha", "masking")
        grade.manual_score, grade.extra_credit = 14.0, 0.5
        comment = gradebook.find_comment("file_attention", "mha", "mha", "masking")
        comment.manual_comment = "see the fill value"
        gradebook.find_grade("check_attention", "mha", "mha", "rebinds").needs_manual_grade = False  # resolved
        gradebook.db.commit()
    before = gradebook_rows(course)
    completed = subprocess.run(sync, env=env, capture_output=True, text=True, timeout=1800)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "masking: " in completed.stderr and "manual scores kept: check_masking 14.00" in completed.stderr
    assert gradebook_rows(course) == before
    assert nbgrader_points(course, ["masking"])["masking"]["masking"] == 14.5
    run_nbgrader(course, "autograde", "mha", "--force", "--student", "rebinds")
    after = gradebook_rows(course, ["rebinds"])["rebinds"]
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in before["rebinds"].items()}
    assert after["check_attention"][3] is True  # re-autograded: the claim is seen, and flagged again


def classroom_points(submission):
    """{step: points} from `python -m autograder.routes.classroom STEP` per step: the per-push
    feedback, public checks only (the Classroom grade of record is the CLI's, docs/classroom.md)."""
    points = {}
    for step in STEPS:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            classroom.main(
                [
                    step,
                    "--path",
                    str(submission),
                    "--config",
                    str(KIT / "grading.yml"),
                    "--in-process",
                ]
            )
        line = next(text for text in out.getvalue().splitlines() if text.startswith("result="))
        result = json.loads(base64.b64decode(line.removeprefix("result=")))
        points[step] = round(sum(t["score"] for t in result["tests"]), 2)
    return points


def test_four_routes_give_the_same_step_scores(course, tmp_path):
    from test_release import run_gradescope

    nbgrader_scores = nbgrader_points(course)
    for student, files in student_files().items():
        package = write_package(tmp_path / student / "repo", files)
        routes = {
            "cli": cli_points(tmp_path / student, package),
            "nbgrader": nbgrader_scores[student],
            "classroom": classroom_points(package),
            "public": cli_points(tmp_path / student, package, public_only=True),
        }
        uploaded = {p.name: p.read_text() for p in (package / "mha").glob("*.py")}
        gradescope = run_gradescope(tmp_path / student, uploaded)
        routes["gradescope"] = {
            step: round(sum(t["score"] for t in gradescope["tests"] if t["name"].startswith(f"{step}: ")), 2)
            for step in STEPS
        }
        for step in STEPS:
            seen = {route: scores[step] for route, scores in routes.items() if route not in ("classroom", "public")}
            assert max(seen.values()) - min(seen.values()) <= 0.011, f"{student}, {step}: {seen}"
            # Classroom's per-push feedback: the public checks' score, in whole points (rounded half up)
            public = routes["public"][step]
            assert routes["classroom"][step] == math.floor(public + 0.5 + 1e-6), f"{student}, {step}: {routes}"


def test_where_the_judge_cannot_run_autograde_keeps_no_kernel_number(course, tmp_path, monkeypatch):
    """JudgedScores, nbgrader autograde's stage, with a judge that fails (no sandbox on the
    machine, say): the kit's check cells get no automatic score and a flag, and each says that
    the sync has not run; the kernel's numbers do not stay."""
    from nbgrader.api import Gradebook

    from autograder.engine.judge import runner
    from autograder.publish.nbgrader_gradebook import MARK
    from autograder.routes.nbgrader_gradebook import JudgedScores

    database = tmp_path / "gradebook.db"
    shutil.copy(course / "gradebook.db", database)
    notebook = nbformat.read(str(course / "autograded" / "rebinds" / "mha" / "mha.ipynb"), as_version=4)

    def broken(*args, **kwargs):
        raise RuntimeError("no sandbox here")

    monkeypatch.setattr(runner, "grade", broken)
    ids = {"notebook": "mha", "assignment": "mha", "student": "rebinds", "db_url": f"sqlite:///{database}"}
    JudgedScores().preprocess(notebook, {"nbgrader": ids})
    with Gradebook(ids["db_url"], "mha-lab") as gradebook:
        grades = gradebook.find_submission_notebook("mha", "mha", "rebinds").grades
        assert all(g.auto_score is None and g.needs_manual_grade for g in grades), [
            (g.name, g.auto_score) for g in grades
        ]
    checks = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade")]
    for cell in checks:
        said = [o for o in cell.outputs if o.get("metadata", {}).get(MARK) == "not-judged"]
        assert len(said) == 1 and "Not graded yet" in said[0]["data"]["text/plain"], cell.source


BROWSER_PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({ran: window.mhaLabXSS ?? null,
                                    shown: document.body.innerText.includes("window.mhaLabXSS=4")});
  document.body.appendChild(out);
}, 1000));
</script>"""


def in_a_browser(page: str, tmp_path) -> dict:
    """What BROWSER_PROBE finds once headless Chromium has loaded `page` (HTML): whether a
    student's script ran (the value it set) and whether their markdown shows as text."""
    from test_report import CHROMIUM, open_in_chromium

    assert CHROMIUM, "CI installs chromium (.ci/run)"
    tmp_path.mkdir(parents=True, exist_ok=True)
    return open_in_chromium(page, tmp_path, probe=BROWSER_PROBE)


def formgrader_page(notebook: Path) -> str:
    """The page formgrader's submission view serves for an autograded notebook (its exporter and
    template, nbgrader.server_extensions.formgrader)."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers

    exporter = HTMLExporter(template_name="formgrade", extra_template_basedirs=[handlers.template_path])
    resources = {"assignment_id": "mha", "notebook_id": "mha", "submission_id": "1", "index": 0, "total": 1,
                 "base_url": "", "student": "prints", "last_name": None, "first_name": None,
                 "notebook_path": "autograded/prints/mha/mha.ipynb"}  # fmt: skip
    page, _ = exporter.from_filename(str(notebook), resources=resources)
    return page


@pytest.mark.skipif(
    not shutil.which("chromium") and not Path("/usr/bin/chromium").exists() and not os.environ.get("MHA_LAB_CI"),
    reason="no chromium executable (Debian: apt-get install chromium); CI installs it",
)
def test_nothing_a_student_made_runs_in_the_graders_browser(course, tmp_path):
    """formgrader shows the autograded notebook to the instructor, logged in, where a script
    could set manual scores through formgrader's API (the judge keeps them): opened in
    Chromium, formgrader's page of the student whose cells display HTML and JavaScript and whose
    markdown holds a script, and their feedback page, run none of it and show the markdown as
    text. Fails without InertOutputs (nbgrader's own autograde keeps the outputs): formgrader's
    page gives {'ran': 3, ...}."""
    from autograder.routes.nbgrader_kernel import KEPT_DATA

    notebook = course / "autograded" / "prints" / "mha" / "mha.ipynb"
    graded = nbformat.read(str(notebook), as_version=4)
    kinds = {kind for c in graded.cells if c.cell_type == "code" for o in c.outputs for kind in o.get("data", {})}
    assert kinds <= set(KEPT_DATA), kinds
    displayed = next(c for c in graded.cells if c.source == SCRIPTS).outputs
    assert len(displayed) == 2 and all(o.output_type == "display_data" for o in displayed), displayed
    pages = {
        "formgrader": formgrader_page(notebook),
        "feedback": (course / "feedback" / "prints" / "mha" / "mha.html").read_text(),
    }
    for name, page in pages.items():
        assert in_a_browser(page, tmp_path / name) == {"ran": None, "shown": True}, name
