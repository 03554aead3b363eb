"""The course secret: hidden inputs that only the instructor can know (issue 30).

Each course's kit makes a secret once (`release`, `gradescope`, `secret`); every hidden check's
inputs are drawn from its keyed hash of the assignment id. Held here: the inputs repeat between
runs of one course and differ between courses; the secret is made private, whole, once, even by
two commands at once; nothing students get, and no log, holds it or a seed drawn from it;
grading.yml's `defaults.seed` is never shipped; `doctor`, `release` and `grade` say when there
is no secret; shards that drew from different seeds are not merged.
"""

import base64
import io
import json
import multiprocessing
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
import yaml

from autograder.engine.course import config as grading_config
from autograder.engine.course import secret
from autograder.engine.judge.plan import check_inputs, check_seed, seed_source
from autograder.publish.student_release import without_seed
from autograder.routes import cli
from conftest import KIT, SOLUTIONS


@pytest.fixture
def course(tmp_path, monkeypatch):
    """use(name) -> a course folder of that name, made the current one (no secret in it yet)."""

    def use(name="course"):
        folder = tmp_path / name
        monkeypatch.setenv(secret.DIR_ENV, str(folder))
        monkeypatch.delenv(secret.SECRET_ENV, raising=False)
        return folder

    return use


def hidden_inputs() -> dict:
    """{(assignment, step, check): inputs} of every hidden check, drawn from the seed a grading
    that is given none uses (seed_source)."""
    drawn = {}
    for config in grading_config.load_all():
        seed, _ = seed_source(config)
        for step_id, module in config.step_modules().items():
            for check in module.CHECKS:
                if check.visibility == "hidden":
                    drawn[(config.id, step_id, check.id)] = check_inputs(check, check_seed(check, seed))
    return drawn


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and torch.equal(a, b)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def seed_dependent() -> set:
    """The hidden checks whose inputs change with the grading seed at all (some draw fixed ones)."""
    drawn = {}
    for config in grading_config.load_all():
        for step_id, module in config.step_modules().items():
            for check in module.CHECKS:
                if check.visibility == "hidden":
                    one, two = (check_inputs(check, check_seed(check, s)) for s in (11, 12))
                    drawn[(config.id, step_id, check.id)] = not same(one, two)
    return {key for key, varies in drawn.items() if varies}


def test_hidden_inputs_repeat_within_a_course_and_differ_between_courses(course):
    varying = seed_dependent()
    assert len(varying) >= 10
    course("one")
    secret.ensure_secret()
    first, again = hidden_inputs(), hidden_inputs()
    assert all(source == "secret" for source in (seed_source(c)[1] for c in grading_config.load_all()))
    course("two")
    secret.ensure_secret()
    other = hidden_inputs()
    assert all(same(first[key], again[key]) for key in first)  # one course: every run the same
    assert all(not same(first[key], other[key]) for key in varying)  # another course: other inputs
    # the secret's seeds, one per assignment: neither tells the other
    seeds = {c.id: seed_source(c)[0] for c in grading_config.load_all()}
    assert len(set(seeds.values())) == len(seeds)


def test_without_a_secret_the_inputs_are_public_and_grade_says_so(course, capsys, monkeypatch):
    from autograder.engine.judge import runner
    from autograder.engine.judge.results import GradeResult

    graded = []  # what grade() was asked: the command line's decisions are under test, not grading
    monkeypatch.setattr(runner, "grade", lambda *a, **k: graded.append(k) or GradeResult("mha", "x", []))
    course("none")
    assert seed_source(grading_config.load(assignment="mha"))[1] == "public"
    assert cli.main(["grade", str(SOLUTIONS), "--assignment", "mha", "--in-process"]) == 0
    assert "this course has no secret" in capsys.readouterr().err and graded[-1]["reference"] is not None
    course("made")
    secret.ensure_secret()
    assert cli.main(["grade", str(SOLUTIONS), "--assignment", "mha", "--in-process"]) == 0
    assert "no secret" not in capsys.readouterr().err
    course("none again")
    assert cli.main(["grade", str(SOLUTIONS), "--assignment", "mha", "--in-process", "--public-only"]) == 0
    assert "no secret" not in capsys.readouterr().err  # no hidden check, nothing to say
    assert cli.main(["grade", str(SOLUTIONS), "--assignment", "mha", "--in-process", "--seed", "5"]) == 0
    assert "no secret" not in capsys.readouterr().err  # a seed of the instructor's choosing


def _ensure(folder, queue):
    os.environ[secret.DIR_ENV] = folder
    queue.put(secret.ensure_secret()[0].hex())


def test_the_secret_is_made_private_whole_and_once_even_by_two_commands_at_once(course):
    folder = course("raced")
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    makers = [context.Process(target=_ensure, args=(str(folder), queue)) for _ in range(8)]
    for maker in makers:
        maker.start()
    made = {queue.get(timeout=60) for _ in makers}
    for maker in makers:
        maker.join()
    assert len(made) == 1  # all eight use the one that was linked into place first
    path = folder / secret.FILE_NAME
    assert path.read_text() == made.pop() + "\n" and len(path.read_text().strip()) == 2 * secret.SECRET_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert sorted(p.name for p in folder.iterdir()) == [".gitignore", secret.FILE_NAME]  # no temporary left
    assert secret.exposure() == ""
    assert secret.ensure_secret() == (secret.read_secret(), False)  # never made twice
    path.chmod(0o644)
    assert "others may read it" in secret.exposure()


@pytest.mark.parametrize("place", ["file writable by others", "folder writable by others", "another user's"])
def test_a_secret_another_user_could_have_written_is_refused(course, place, monkeypatch):
    # Red team, as a second user: on main 1607c35 a course-secret file that another user had
    # planted (or could replace: its folder open to them) was read as the course's, so that user
    # knew every hidden input. It is refused, with where and why; nothing of it is said.
    folder = course(place)
    made = secret.ensure_secret()[0]
    path = folder / secret.FILE_NAME
    if place == "file writable by others":
        path.chmod(0o666)
    elif place == "folder writable by others":
        folder.chmod(0o777)
    else:  # read by a user of another uid (not root), the file is another user's
        if os.geteuid() == 0:
            os.chown(path, 47013, 47013)
        monkeypatch.setattr(secret.os, "geteuid", lambda: 47014)
    with pytest.raises(secret.SecretError) as raised:
        secret.read_secret()
    assert str(path) in str(raised.value) and "could have written" in str(raised.value)
    assert made.hex() not in str(raised.value)
    monkeypatch.undo()
    monkeypatch.setenv(secret.DIR_ENV, str(folder))
    folder.chmod(0o1777)  # sticky: no one else can replace our file in it
    path.chmod(0o600)
    assert secret.read_secret() == made


def test_the_kits_git_ignores_the_course_folder():
    if not (KIT / ".git").exists():
        pytest.skip("the kit is not a git checkout here")
    for name in (".mha-lab/course-secret", ".mha-lab/releases/x.json"):
        assert subprocess.run(["git", "check-ignore", "-q", name], cwd=KIT).returncode == 0, name


def test_a_bad_secret_stops_grading_with_its_name_and_the_environment_wins(course, monkeypatch, capsys):
    folder = course("bad")
    folder.mkdir()
    (folder / secret.FILE_NAME).write_text("1234\n")
    with pytest.raises(secret.SecretError, match="course-secret: not a course secret"):
        secret.read_secret()
    assert cli.main(["grade", str(SOLUTIONS), "--assignment", "mha", "--in-process"]) == 2
    assert "course-secret: not a course secret" in capsys.readouterr().err
    monkeypatch.setenv(secret.SECRET_ENV, "ab" * 32)
    assert secret.read_secret() == bytes.fromhex("ab" * 32) and "environment" in secret.source()
    config = grading_config.load(assignment="mha")
    assert seed_source(config) == (secret.hidden_seed(bytes.fromhex("ab" * 32), "mha"), "secret")


def traces(value: bytes) -> list:
    """How a secret or a seed could be written out: as bytes, hex (either case), decimal."""
    return [value, value.hex().encode(), value.hex().upper().encode()]


def shipped_files(root: Path):
    """(name, bytes) of every file under `root`, and of every file inside the grader zip a
    notebook carries (base64 in its setup cell)."""
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        yield str(path.relative_to(root)), data
        if path.suffix == ".ipynb":
            for blob in re.findall(rb'GRADER = \\"([A-Za-z0-9+/=]+)\\"', data):
                with zipfile.ZipFile(io.BytesIO(base64.b64decode(blob))) as archive:
                    for name in archive.namelist():
                        yield f"{path.name}!{name}", archive.read(name)


def test_nothing_students_get_holds_the_secret_or_a_seed_drawn_from_it(course, tmp_path):
    folder = course("released")
    out = tmp_path / "release"
    completed = subprocess.run(
        [sys.executable, "-m", "autograder", "release", str(out)], capture_output=True, text=True, timeout=600
    )
    assert completed.returncode == 0, completed.stderr
    assert "made this course's secret" in completed.stderr and str(folder) in completed.stderr
    value = secret.read_secret()
    seeds = [secret.hidden_seed(value, c.id) for c in grading_config.load_all()]
    needles = traces(value) + [str(seed).encode() for seed in seeds] + [f"{seed:x}".encode() for seed in seeds]
    files = dict(shipped_files(out))
    assert any("!autograder/" in name for name in files)  # the notebooks' graders were opened
    for name, data in files.items():
        assert not any(needle in data for needle in needles), name
    assert not any(needle.decode(errors="ignore") in completed.stdout + completed.stderr for needle in needles)
    assert not (out / ".mha-lab").exists()


def test_a_batch_log_and_its_rerun_command_hold_no_seed(course, tmp_path):
    course("batch")
    value, _ = secret.ensure_secret()
    seed = secret.hidden_seed(value, "mha")
    out = tmp_path / "grades"
    completed = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(SOLUTIONS), "--assignment", "mha"]
        + ["--out", str(out), "--in-process", "--public-only"],  # the seed is recorded all the same
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    manifest = json.loads((out / "batch" / "manifest.json").read_text())
    assert manifest["seed"] == seed  # the instructor's record: a resume takes it
    assert str(seed) not in " ".join(manifest["command"]) + completed.stdout + completed.stderr
    assert json.loads((out / "solutions.json").read_text())["seed"] == seed
    # Red team, as a second user of the machine: on main 1607c35 the out folder was made with the
    # umask's mode (0755 here) and its files 0644: anyone read the seed (and every grade and code).
    assert stat.S_IMODE(out.stat().st_mode) == 0o700


def test_shards_that_drew_from_different_seeds_are_not_merged(tmp_path):
    from autograder.engine.operations.shard import Manifest, ShardError, merge, write_manifest

    for k, seed in ((1, 1234567), (2, 7654321)):
        write_manifest(tmp_path / f"p{k}", Manifest("mha", (k, 2), seed, ["a", "b"], [], [], str(tmp_path)))
    with pytest.raises(ShardError, match="different seeds") as raised:
        merge([tmp_path / "p1", tmp_path / "p2"], tmp_path / "merged")
    assert "1234567" not in str(raised.value) and "7654321" not in str(raised.value)


def with_seed_lines(text: str):
    """grading.yml `text` with `seed: 4242` put in its defaults at every place a key can go,
    block style and flow style: (the text, where)."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("defaults:"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() and not lines[i].startswith(" "))
    for at in range(start + 1, end + 1):
        if at == end or lines[at].startswith("  ") and not lines[at].startswith("   "):
            yield "".join(lines[:at] + ["  seed: 4242   # this term's\n"] + lines[at:]), f"line {at}"
    data = yaml.safe_load(text)
    yield yaml.safe_dump({**data, "defaults": {"seed": 4242, **data["defaults"]}}, default_flow_style=None), "flow"


def test_defaults_seed_is_cut_from_what_ships_and_nothing_else():
    text = grading_config.default_path().read_text()
    assert "defaults:" in text
    tried = 0
    for seeded, where in with_seed_lines(text):
        tried += 1
        assert yaml.safe_load(seeded)["defaults"]["seed"] == 4242, where
        cut = without_seed(seeded)
        assert "4242" not in cut, where
        assert yaml.safe_load(cut) == yaml.safe_load(text), where
        if where != "flow":
            assert cut == text, where  # comments and line numbers kept
    assert tried >= 3
    assert without_seed(text) == text


@pytest.mark.parametrize(
    "defaults",
    [
        "defaults:\n  <<: {seed: 4242}\n",  # a merge key: grading reads the seed, the text has no `seed:` line
        "defaults:\n  <<: [{timeout: 10}, {seed: 4242}]\n",
        "common: &common {seed: 4242}\ndefaults:\n  <<: *common\n",  # an anchor shared with another course
        "defaults:\n  seed: 4242\n  <<: {seed: 4242}\n",  # cut once, still there
    ],
)
def test_a_seed_reached_through_yaml_merges_is_cut_too(defaults):
    # Red team: on main 1607c35 a release shipped `<<: {seed: 4242}` as written, and the grader
    # read defaults.seed == 4242 from it.
    text = grading_config.default_path().read_text().replace("defaults:\n", defaults, 1)
    data = yaml.safe_load(text)
    assert data["defaults"]["seed"] == 4242
    cut = yaml.safe_load(without_seed(text))
    assert "seed" not in cut["defaults"]
    data.pop("common", None), cut.pop("common", None)
    data["defaults"].pop("seed")
    assert cut == data  # nothing else changed


def test_release_and_doctor_warn_of_defaults_seed(course, tmp_path, monkeypatch, capsys):
    from autograder.routes.cli import doctor

    course("seeded")
    seeded = tmp_path / "grading.yml"
    seeded.write_text(grading_config.default_path().read_text().replace("defaults:\n", "defaults:\n  seed: 4242\n", 1))
    monkeypatch.setattr(grading_config, "default_path", lambda: seeded)
    assert grading_config.load_all()[0].seed == 4242
    assert cli.main(["release", str(tmp_path / "out"), "--assignment", "mha"]) == 0
    err = capsys.readouterr().err
    assert "grading.yml sets defaults.seed" in err and "made this course's secret" in err
    assert "4242" not in (tmp_path / "out" / "grading.yml").read_text()
    said = []
    doctor.course_secret(lambda *parts: said.append(doctor.Line(*parts)))
    assert [(line.verdict, line.name) for line in said] == [("PASS", "course secret"), ("WARN", "hidden seed")]


def test_doctor_says_where_the_hidden_inputs_come_from(course):
    from autograder.routes.cli import doctor

    def lines():
        said = []
        doctor.course_secret(lambda *parts: said.append(doctor.Line(*parts)))
        return [(line.verdict, line.reason) for line in said]

    folder = course("doctor")
    assert lines()[0][0] == "WARN" and "the same in every course" in lines()[0][1]
    secret.ensure_secret()
    assert lines()[0][0] == "PASS" and str(folder) in lines()[0][1]
    (folder / secret.FILE_NAME).chmod(0o640)
    assert lines()[0][0] == "FAIL" and "not private" in lines()[0][1]
    (folder / secret.FILE_NAME).write_text("not hex\n")
    assert lines()[0][0] == "FAIL" and "not a course secret" in lines()[0][1]
    assert doctor.exit_code([doctor.Line("WARN", "x", "y")]) == 0


def test_the_gradescope_zip_is_the_instructors_alone(tmp_path):
    # Red team: on main 1607c35 autograder.zip, which carries the course secret, was written 0644
    # (any user of the machine read the secret from it), through a fixed `.autograder.zip.partial`
    # that a link planted beside it redirected.
    from autograder.publish.gradescope import gradescope_zip

    planted = tmp_path / "elsewhere"
    (tmp_path / ".autograder.zip.partial").symlink_to(planted)
    mask = os.umask(0o022)  # a usual one: files readable by all unless made otherwise
    try:
        out = gradescope_zip(tmp_path / "autograder.zip", assignment="mha")
    finally:
        os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600, oct(out.stat().st_mode)
    assert not planted.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".autograder.zip.partial", "autograder.zip"]
    with zipfile.ZipFile(out) as archive:
        assert archive.read(".mha-lab/course-secret").decode().strip() == secret.read_secret().hex()


@pytest.mark.slow  # a Gradescope run end to end: CI runs it (pytest -m "")
def test_gradescope_draws_the_courses_inputs_and_shows_no_seed(tmp_path):
    from test_release import gradescope_zip

    value = secret.read_secret()  # the tests' course: the zip was built with it
    seed = secret.hidden_seed(value, "mha")
    root = tmp_path / "autograder"
    with zipfile.ZipFile(gradescope_zip()) as archive:
        assert archive.read(".mha-lab/course-secret").decode().strip() == value.hex()
        assert archive.getinfo(".mha-lab/course-secret").external_attr >> 16 == 0o600
        archive.extractall(root / "source")
    shutil.copytree(SOLUTIONS / "mha", root / "submission" / "mha")
    env = {**os.environ, "MHA_LAB_GRADESCOPE_ROOT": str(root), "MHA_LAB_PYTHON": sys.executable}
    env.pop(secret.DIR_ENV)
    drawn = subprocess.run(
        [
            sys.executable,
            "-c",
            "from autograder.engine.course import config; from autograder.engine.judge.plan "
            "import seed_source; print(*seed_source(config.load(assignment='mha')))",
        ],
        cwd=root / "source",
        env={**env, "PYTHONPATH": str(root / "source")},
        capture_output=True,
        text=True,
    )
    assert drawn.stdout.split() == [str(seed), "secret"], drawn.stderr  # Gradescope draws what is drawn here
    (root / "source" / ".mha-lab").chmod(0o777)  # as an unzip under a umask of 0 may leave it
    completed = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True, timeout=600
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert stat.S_IMODE((root / "source" / ".mha-lab").stat().st_mode) == 0o700  # run_autograder closed it
    visible = (root / "results" / "results.json").read_text() + completed.stdout + completed.stderr
    assert "no secret" not in visible
    for needle in (str(seed), f"{seed:x}", value.hex()):
        assert needle not in visible


READ_THE_SECRET = """    import os
    found = os.environ.get("MHA_LAB_COURSE_SECRET", "") + os.environ.get("MHA_LAB_COURSE_DIR", "")
    for path in @PATHS@:
        try:
            found += open(path).read()
        except OSError:
            pass
    for pid in os.listdir("/proc"):  # the judge's environment, through /proc
        try:
            found += open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
        except OSError:
            pass
    return @SECRET@ in found or @FOLDER@ in found
"""


@pytest.mark.slow  # the sandbox attack harness: a batch in a subprocess
@pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux's")
def test_student_code_cannot_read_the_course_secret(tmp_path):
    """A submission looks for the secret where the grader has it (its file, the environment, the
    judge's environment through /proc): the padding step earns its points only if it found it."""
    from test_attacks import flag, grade, honest, hostile

    folder = tmp_path / "course"
    folder.mkdir(mode=0o700)
    value = "7e" * 32
    (folder / secret.FILE_NAME).write_text(value + "\n")
    (folder / secret.FILE_NAME).chmod(0o600)
    paths = [str(folder / secret.FILE_NAME), str(KIT / ".mha-lab" / secret.FILE_NAME)]
    attacker = hostile(
        tmp_path, "attacker", flag(READ_THE_SECRET), gated=True, PATHS=paths, SECRET=value, FOLDER=str(folder)
    )
    neighbour = honest(tmp_path)
    outcome = grade(tmp_path, [attacker, neighbour], env={secret.SECRET_ENV: value, secret.DIR_ENV: str(folder)})
    assert outcome.rc == 0, outcome.explain()
    assert outcome.step(attacker, "padding")["score"] == 0, "student code read the course secret"
    assert outcome.full_marks(neighbour)
    assert value not in json.dumps(outcome.results) + outcome.stdout + outcome.stderr


def test_the_secret_command_makes_one_once_and_never_prints_it(course, capsys):
    folder = course("by-command")
    assert cli.main(["secret"]) == 0
    out = capsys.readouterr().out
    value = secret.read_secret()
    assert "made this course's secret" in out and str(folder / secret.FILE_NAME) in out
    assert cli.main(["secret"]) == 0
    again = capsys.readouterr().out
    assert "is set" in again and "nothing changed" in again and secret.read_secret() == value
    assert value.hex() not in out + again


def test_a_release_where_no_secret_can_be_made_says_so_and_still_releases(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(secret.DIR_ENV, str(blocker / "course"))  # a folder inside a file: cannot be made
    monkeypatch.delenv(secret.SECRET_ENV, raising=False)
    assert cli.main(["release", str(tmp_path / "out"), "--assignment", "mha"]) == 0
    err = capsys.readouterr().err
    assert "no course secret could be made" in err and (tmp_path / "out" / "grading.yml").exists()


def test_a_course_folder_outside_the_kit_is_closed_to_workers_as_the_kit_is(course, monkeypatch):
    # Red team: on a platform where only permission bits hide the kit (kit_view), a course folder
    # kept outside it (MHA_LAB_COURSE_DIR) was not closed: a secret file an instructor wrote 0644
    # was readable by the workers. grade names it to close_kit with the reference and config.
    from autograder.engine.judge import runner
    from autograder.engine.judge.results import GradeResult
    from autograder.sandbox import fork_server, kit_view

    folder = course("outside")
    secret.ensure_secret()
    monkeypatch.setattr(kit_view, "SECRET_PATHS", set())
    monkeypatch.setattr(fork_server, "start", lambda *a, **k: None)
    monkeypatch.setattr(runner, "grade", lambda *a, **k: GradeResult("mha", "x", []))
    assert cli.main(["grade", str(SOLUTIONS), "--assignment", "mha", "--public-only"]) == 0
    assert str(folder) in kit_view.SECRET_PATHS
