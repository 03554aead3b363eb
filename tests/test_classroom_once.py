"""The Classroom route grades once per push: the first step command grades every step and keeps
what each step command prints and reports, keyed by the graded files' content; the others read
it. What is kept cannot be forged: it lives outside the student's repository, in a folder only
the grader writes, and anything stale, malformed or not quite right is ignored."""

import base64
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from autograder.engine.course import config as grading_config
from autograder.publish import classroom_workflow
from autograder.publish.release import release
from autograder.routes.classroom import push_cache as classroom_cache
from conftest import KIT, SOLUTIONS


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv("RUNNER_TEMP", raising=False)
    monkeypatch.setenv("MHA_LAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "classroom"


def kept_steps(assignment, status="pass"):
    """What the first step command keeps, as a forger would write it: every step passed."""
    steps = {}
    for step in classroom_workflow.graded_steps(assignment):
        test = {"name": f"{step.id}: x", "status": status, "message": None, "line_no": 0, "score": int(step.points)}
        result = {
            "version": 1,
            "status": status,
            "max_score": classroom_workflow.reporter_number(step.points),
            "tests": [test],
        }
        steps[step.id] = {"log": f"{step.id} log\n", "result": result}
    return steps


def test_a_kept_grading_is_read_back_only_when_whole_and_of_this_key(cache_home, config):
    steps = kept_steps(config)
    classroom_cache.write_cache("k1", steps)
    assert classroom_cache.read_cache("k1", config) == steps
    assert (cache_home.stat().st_mode & 0o777) == 0o700
    assert classroom_cache.read_cache("k2", config) is None  # other files (stale): not looked at
    path = cache_home / "k1.json"
    data = json.loads(path.read_text())

    def forged(change):
        copy = json.loads(json.dumps(data))
        change(copy)
        path.write_text(json.dumps(copy))
        os.chmod(path, 0o600)
        return classroom_cache.read_cache("k1", config)

    assert forged(lambda d: d.update(key="k2")) is None  # a file renamed to another key
    assert forged(lambda d: d["steps"]["padding"]["result"].update(max_score=1000)) is None  # inflated points
    assert forged(lambda d: d["steps"].pop("cuda")) is None  # steps missing
    assert forged(lambda d: d["steps"]["padding"]["result"].update(status="great")) is None
    assert forged(lambda d: d["steps"]["padding"].update(log=None)) is None
    path.write_text("{not json")
    assert classroom_cache.read_cache("k1", config) is None
    assert forged(lambda d: None) == steps


def test_a_kept_grading_others_could_write_is_ignored(cache_home, config, tmp_path):
    classroom_cache.write_cache("k1", kept_steps(config))
    path = cache_home / "k1.json"
    os.chmod(path, 0o666)  # writable by anyone: anyone could have put it there
    assert classroom_cache.read_cache("k1", config) is None
    os.chmod(path, 0o600)
    os.chmod(cache_home, 0o777)
    assert classroom_cache.read_cache("k1", config) is None
    os.chmod(cache_home, 0o700)
    elsewhere = tmp_path / "forged.json"
    shutil.move(path, elsewhere)
    path.symlink_to(elsewhere)  # a link to a file someone else controls
    assert classroom_cache.read_cache("k1", config) is None
    path.unlink()
    shutil.move(elsewhere, path)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)  # another user's file
        assert classroom_cache.read_cache("k1", config) is None


def test_the_key_follows_the_graded_files_and_grading_yml(tmp_path, config):
    root = tmp_path / "repo"
    shutil.copytree(SOLUTIONS / "mha", root / "mha")
    yml = KIT / "grading.yml"
    first = classroom_cache.cache_key(yml, config, root)
    assert classroom_cache.cache_key(yml, config, root) == first
    (root / "mha" / "padding.py").write_text((root / "mha" / "padding.py").read_text() + "\n# changed\n")
    assert classroom_cache.cache_key(yml, config, root) != first
    other = tmp_path / "grading.yml"
    other.write_text(yml.read_text().replace("points: 10", "points: 11", 1))
    assert classroom_cache.cache_key(other, config, root) != classroom_cache.cache_key(yml, config, root)


def test_two_assignments_get_workflows_of_their_own_names_and_triggers(tmp_path):
    root = release(tmp_path / "repo")
    documents = {path.name: yaml.safe_load(path.read_text()) for path in (root / ".github" / "workflows").glob("*.yml")}
    assert sorted(documents) == ["classroom-kv_cache.yml", "classroom-mha.yml"]
    assert len({document["name"] for document in documents.values()}) == 2
    for name, document in documents.items():
        assignment = name.removeprefix("classroom-").removesuffix(".yml")
        on = document.get("on", document.get(True))  # PyYAML reads a bare `on` as True
        assert on["push"]["paths"] == [f"assignments/{assignment}/**", f".github/workflows/{name}"]
        commands = [
            s["with"]["command"]
            for s in document["jobs"]["autograding"]["steps"]
            if "with" in s and "command" in s["with"]
        ]
        assert commands and all(f"--assignment {assignment} " in c for c in commands)
        # the first step command grades them all: each may need the whole assignment's time
        timeouts = {
            s["with"]["timeout"] for s in document["jobs"]["autograding"]["steps"] if "timeout" in s.get("with", {})
        }
        assert len(timeouts) == 1


# ----------------------------------------------------------------------------- for real, slow


def student_repository(tmp_path, classroom_mode="command"):
    root = release(tmp_path / "release", classroom=classroom_mode, assignment="mha")
    repo = tmp_path / "repo"
    shutil.copytree(root, repo)
    shutil.rmtree(repo / "assignments" / "mha")
    shutil.copytree(SOLUTIONS / "mha", repo / "assignments" / "mha")
    return repo


def run_step(repo, step, cache, *extra):
    """Run one step command in the student's repository; (exit code, result, torch imported?)."""
    script = (
        "import sys\n"
        "from autograder.routes.classroom import main\n"
        "code = main(sys.argv[1:])\n"
        "print('TORCH', 'torch' in sys.modules)\n"
        "sys.exit(code)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RUNNER_TEMP")}
    env["MHA_LAB_CACHE"] = str(cache)
    output = cache.parent / f"{step}.output"
    output.unlink(missing_ok=True)
    completed = subprocess.run(
        [sys.executable, "-c", script, step, "--assignment", "mha", "--output", str(output), *extra],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    line = next(text for text in output.read_text().splitlines() if text.startswith("result="))
    result = json.loads(base64.b64decode(line.removeprefix("result=")))
    return completed.returncode, result, "TORCH True" in completed.stdout


@pytest.mark.slow
@pytest.mark.skipif(
    not classroom_cache.cache_trusted_here(), reason="neither root nor Landlock here: every step grades"
)
def test_the_first_step_grades_and_the_others_read_its_grading(tmp_path):
    repo = student_repository(tmp_path)
    cache = tmp_path / "cache"
    code, first, torch_loaded = run_step(repo, "padding", cache)
    assert code == 0 and first["status"] == "pass" and torch_loaded
    assert len(list((cache / "classroom").glob("*.json"))) == 1
    code, attention, torch_loaded = run_step(repo, "attention", cache)
    assert code == 0 and attention["status"] == "pass" and attention["max_score"] == 15
    assert not torch_loaded  # read, not graded
    # a changed file: the kept grading is stale, the step grades again
    target = repo / "assignments" / "mha" / "attention.py"
    target.write_text(target.read_text().replace("math.sqrt(d_k)", "d_k", 1))
    code, attention, torch_loaded = run_step(repo, "attention", cache)
    assert torch_loaded and attention["status"] == "fail"
    assert len(list((cache / "classroom").glob("*.json"))) == 2


@pytest.mark.slow
@pytest.mark.skipif(
    not classroom_cache.cache_trusted_here(), reason="neither root nor Landlock here: every step grades"
)
def test_a_forged_grading_in_the_repository_or_from_student_code_earns_nothing(tmp_path):
    """The skeleton (0 points) with two forgeries: a 'cache' committed into the repository at
    every place a student might guess, and code that, while graded, writes a forged grading for
    the right key where the grader keeps its own. Neither is read: the skeleton scores 0."""
    repo = student_repository(tmp_path)
    shutil.rmtree(repo / "assignments" / "mha")
    shutil.copytree(KIT / "assignments" / "mha", repo / "assignments" / "mha")
    cache = tmp_path / "cache"
    config = grading_config.load(repo / "grading.yml", assignment="mha")
    forged = {"format": classroom_cache.CACHE_FORMAT, "key": "", "steps": kept_steps(config)}
    for place in (repo / ".cache" / "mha-lab" / "classroom", repo / "assignments" / "mha", repo):
        place.mkdir(parents=True, exist_ok=True)
        (place / "forged.json").write_text(json.dumps(forged))
    padding = repo / "assignments" / "mha" / "padding.py"
    attack = (
        "\nimport json as _j, os as _o\n"
        "_d = _o.path.join(_o.environ.get('MHA_LAB_CACHE', '/nonexistent'), 'classroom')\n"
        "try:\n"
        "    _o.makedirs(_d, exist_ok=True)\n"
        "    open(_o.path.join(_d, 'written-by-student-code'), 'w').write('x')\n"
        "except OSError:\n"
        "    pass\n"
    )
    padding.write_text(padding.read_text() + attack)
    code, result, _ = run_step(repo, "padding", cache, "--pass-fail")
    assert code == 1 and sum(test["score"] for test in result["tests"]) == 0
    assert not (cache / "classroom" / "written-by-student-code").exists()
    [kept_file] = (cache / "classroom").glob("*.json")  # the grader's own, for these files
    kept = json.loads(kept_file.read_text())
    assert all(sum(t["score"] for t in step["result"]["tests"]) == 0 for step in kept["steps"].values())
    code, result, torch_loaded = run_step(repo, "attention", cache, "--pass-fail")
    assert code == 1 and sum(test["score"] for test in result["tests"]) == 0 and not torch_loaded
