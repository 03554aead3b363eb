"""The student release's files: assignments/ (skeletons), the parts of autograder/ that the public
checks need with every hidden check cut out, grading.yml, a student README (student_readme.py),
requirements.txt and a pyproject.toml that lets `pytest assignments/` find the grader; and the zip of its grader that
a student notebook carries. release.py adds the notebooks (which carry this grader: built on
this module, so it imports no notebook code) and makes the Gradescope zip.
"""

import io
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from autograder import KIT
from autograder.engine.course import config as grading_config
from autograder.engine.course.assignment import folder as assignment_folder
from autograder.engine.course.torch_pin import CPU_INDEX, GRADING_TORCH
from autograder.engine.generate import answers_build, stored_checks
from autograder.engine.generate.catalogs import write_student_catalogs
from autograder.engine.generate.skeleton import write_skeletons
from autograder.engine.judge.result_files import WriteError
from autograder.engine.mistakes.diagnosis import public_message_ids
from autograder.engine.operations.kit_files import keep, release_manifest
from autograder.publish.classroom_workflow import workflow
from autograder.publish.student_readme import student_readme

HIDDEN_MARKER = "# ### BEGIN HIDDEN CHECKS"
PROBES_MARKER = "# ### PROBES"
# What a student's run needs of the grader: the engine (not operations/ nor generate/: a batch and
# its shards, making skeletons, catalogs and fingerprints are the instructor's), the in-process routes and
# what they show of publish/ (the public view, pictures, the check cell, the workflow's steps), each
# assignment's public checks, fingerprints and messages, and the sandbox (the Classroom workflow
# grades in it, so that the student's code never runs in the process that writes the grade).
# Not the known mistakes (a second reference), not the instructor's commands: routes/cli/grade.py ships for
# `python -m autograder grade` and says that the others are the instructor's (cli.student_kit).
STUDENT_PARTS = [
    "__init__.py",
    "__main__.py",
    "engine/__init__.py",
    "engine/checks",
    "engine/course",
    "engine/scan",
    "engine/mistakes",
    "engine/judge",
    "harness",
    "sandbox",
    "publish/__init__.py",
    "publish/public_view.py",
    "publish/plots.py",
    "publish/check_cell.py",
    "publish/classroom_workflow.py",
    "publish/classroom_result.py",
    "routes/__init__.py",
    "routes/pytest_plugin.py",
    "routes/nbgrader_cell.py",
    "routes/classroom",
    "routes/cli/__init__.py",
    "routes/cli/grade.py",
    "assignments/__init__.py",
]
ASSIGNMENT_PARTS = ["__init__.py", "fingerprints.json", "stages.json", "warmup.py"]  # and its compiled catalogs
REQUIREMENTS = [
    f"torch=={GRADING_TORCH}",  # the grading's own: the same numerics, errors and warnings
    "numpy",
    "pytest>=8",
    "pytest-timeout>=2.2",
    "PyYAML>=6",
    "jsonschema>=4",
    "pyseccomp>=0.1.2; platform_system == 'Linux'",
]


def requirements_text():
    """The student's requirements.txt: the grading's torch (GRADING_TORCH) from PyTorch's CPU
    index (PyPI's Linux torch bundles CUDA, several GB). The CPU index is an extra one, so that
    the rest still comes from PyPI; its `+cpu` builds outrank PyPI's of the same version. A CUDA
    build of the same version installed before is kept (2.13.0+cu128 is 2.13.0)."""
    return (
        f"# torch {GRADING_TORCH}, as the grading uses, in its CPU build (no GPU needed). For a CUDA build, install\n"
        f"# torch=={GRADING_TORCH} first from the index pytorch.org/get-started names for your CUDA\n"
        "# (e.g. --index-url https://download.pytorch.org/whl/cu128).\n"
        f"--extra-index-url {CPU_INDEX}\n" + "\n".join(REQUIREMENTS) + "\n"
    )


def strip_hidden(source, hidden_classes=()):
    """A checks module without its hidden checks: every class in `hidden_classes` (the ones
    that declare visibility "hidden", found by loading the module) and, where the module marks
    it, the region from the hidden marker up to the probes (helpers only hidden checks use)."""
    import ast

    if HIDDEN_MARKER in source:
        head, rest = source.split(HIDDEN_MARKER, 1)
        probes = rest[rest.index(PROBES_MARKER) :] if PROBES_MARKER in rest else ""
        source = head.rstrip() + ("\n\n\n" + probes if probes else "\n")
    lines = source.splitlines(keepends=True)
    cut = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name in hidden_classes:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            cut.update(range(start - 1, node.end_lineno))
    return "".join(line for number, line in enumerate(lines) if number not in cut)


def release_files(out, classroom="command", assignment=None, also=None, keep_manifest=True, lang=None):
    """Write the student release into directory `out` (which must not exist yet): every
    assignment of grading.yml (or only `assignment`), with a GitHub Classroom workflow per
    assignment in `classroom` mode ("command" or "fractional"; see routes/classroom/).
    `also(directory, graded)`, where given, writes more into it (release.py: the notebooks).
    Built aside and renamed at the end: a failed release leaves nothing that blocks the next.
    With `keep_manifest`, the manifest of its kit files goes into the instructor's course folder
    (operations/kit_files.py: grading a repository made from it says what changed there).
    With `lang`, the skeletons are made again from solutions/ with their texts in that language."""

    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} already exists")
    graded = grading_config.load_all()  # a bad grading.yml stops here: nothing written
    if assignment is not None:
        graded = [grading_config.choose(graded, assignment, grading_config.default_path())]
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    partial.chmod(0o755)  # mkdtemp's 0700 would carry over to the release
    try:
        write_release(partial, graded, classroom, lang)
        if also is not None:
            also(partial, graded)
        (partial / "README.md").write_text(student_readme(graded, (partial / "notebooks").is_dir()))
        manifest = release_manifest(partial, [f"assignments/{config.package}" for config in graded])
        partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if keep_manifest:  # the instructor's, never the release's (operations/kit_files.py)
        try:
            keep(manifest)
        except (OSError, WriteError) as error:
            print(
                f"warning: the release's manifest could not be kept ({error}): grading its repositories "
                "will not say whether their kit files changed",
                file=sys.stderr,
            )
    return out


def write_release(out, graded, classroom, lang=None):
    """The student release's files, its notebooks aside, into the existing empty directory
    `out`, for the Assignments `graded`; with `lang`, skeletons in that language only."""

    workflows = out / ".github" / "workflows"
    workflows.mkdir(parents=True)
    for config in graded:
        name = "classroom.yml" if len(graded) == 1 else f"classroom-{config.id}.yml"
        (workflows / name).write_text(workflow(config, classroom, name))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    (out / "assignments").mkdir()
    for path in (KIT / "assignments").iterdir():
        if path.is_file():
            shutil.copyfile(path, out / "assignments" / path.name)
    grader = out / "autograder"
    for part in STUDENT_PARTS:
        source, target = KIT / "autograder" / part, grader / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=ignore)
        else:
            shutil.copyfile(source, target)
    for config in graded:
        if lang is None:
            shutil.copytree(KIT / "assignments" / config.package, out / "assignments" / config.package, ignore=ignore)
        else:
            write_skeletons(KIT / "solutions" / config.package, out / "assignments" / config.package, lang=lang)
        here, there = assignment_folder(config.id), grader / "assignments" / config.id
        there.mkdir(parents=True)
        for part in ASSIGNMENT_PARTS:
            if (here / part).is_dir():
                shutil.copytree(here / part, there / part, ignore=ignore)
            elif (here / part).is_file():
                shutil.copyfile(here / part, there / part)
        answers_build.write(config, there)  # what the release stores instead of computing it
        (there / "observers").mkdir()
        for path in sorted((here / "observers").glob("*.py")):  # without the observers only hidden checks use
            (there / "observers" / path.name).write_text(path.read_text().split(HIDDEN_MARKER, 1)[0].rstrip() + "\n")
        (there / "checks").mkdir()
        modules = config.step_modules()
        shutil.copyfile(here / "checks" / "__init__.py", there / "checks" / "__init__.py")
        sources = {  # helpers of public checks (checks/_shared.py), then each step's public checks
            path.stem: path.read_text()
            for path in sorted((here / "checks").glob("_*.py"))
            if path.name != "__init__.py"
        }
        for step_id, module in modules.items():
            hidden = {type(check).__name__ for check in module.CHECKS if check.visibility == "hidden"}
            sources[step_id] = strip_hidden((here / "checks" / f"{step_id}.py").read_text(), hidden)
        for name, source in stored_checks.rewrite(sources).items():  # oracles out, their answers stored
            (there / "checks" / f"{name}.py").write_text(source)
    keep = set().union(*(public_message_ids(config) for config in graded))
    write_student_catalogs(grader, lambda message_id: student_message(message_id, keep))
    _write_config(out / "grading.yml", graded)
    (out / "requirements.txt").write_text(requirements_text())
    # pytest's cache stays on (--lf, --sw, -x then --lf work): it holds only test ids, and a
    # student's ids are the public checks'; .gitignore keeps it out of the student's repository.
    (out / "pyproject.toml").write_text(pytest_settings())
    (out / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n")
    return out


# pytest plugins that load themselves wherever their library is installed (Jupyter brings anyio,
# many environments hypothesis) and that no public check uses: each costs every run of
# `pytest assignments/` its import and hooks (hypothesis: about 0.3 s, its summary included).
# pytest-timeout, the one plugin the checks use (their time limits), stays.
UNUSED_PLUGINS = ("anyio", "hypothesispytest", "platformdirs")


def pytest_settings() -> str:
    """The kit's pyproject.toml: its grader importable from the kit's root, and no plugin loaded
    that the checks do not use (`-p no:NAME` is a no-op where NAME is not installed)."""
    blocked = " ".join(f"-p no:{name}" for name in UNUSED_PLUGINS)
    return f'[tool.pytest.ini_options]\npythonpath = ["."]\naddopts = "{blocked}"\n'


def _write_config(target, graded):
    """grading.yml, or only the entries of the assignments released when not all of them are;
    never its `defaults.seed` (without_seed)."""

    text = without_extensions(without_seed(grading_config.default_path().read_text()))
    if len(graded) == len(grading_config.load_all()):
        target.write_text(text)
        return
    import yaml

    data = yaml.safe_load(text)
    if "assignments" in data:
        data["assignments"] = [a for a in data["assignments"] if a["id"] in {c.id for c in graded}]
    target.write_text(
        "# The assignments of this release, from the instructor's grading.yml.\n"
        + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    )


def without_extensions(text: str) -> str:
    """grading.yml's `text` without any `late.extensions`: who was given more time, and why, is
    no other student's business (the deadline and the schedule ship: they are the course's rules).
    Written anew (comments lost) only where there is one to cut."""
    import yaml

    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        return text
    entries = [data, *(data.get("assignments") or [])]
    cut = False
    for entry in entries:
        late = entry.get("late") if isinstance(entry, dict) else None
        if isinstance(late, dict) and "extensions" in late:
            late.pop("extensions")
            cut = True
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True) if cut else text


def without_seed(text: str) -> str:
    """grading.yml's `text` without `defaults.seed`: the hidden checks' inputs are drawn from it
    where it is set, so it is the instructor's alone (course/secret.py). Its lines are cut out,
    the rest left as written (comments, line numbers); a flow-style `defaults: {...}` is
    written anew without it, and so is one whose seed comes from elsewhere in YAML's terms (a
    merge key `<<: *anchor`): what is checked is the text as the grader reads it."""
    import yaml

    def seeded(text):
        data = yaml.safe_load(text)
        return isinstance(data, dict) and isinstance(data.get("defaults"), dict) and "seed" in data["defaults"]

    def rewritten(text):  # every alias and merge resolved, the seed left out
        data = yaml.safe_load(text)
        data["defaults"].pop("seed")
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)

    root = yaml.compose(text)
    if not isinstance(root, yaml.MappingNode):
        return text
    defaults = next((value for key, value in root.value if key.value == "defaults"), None)
    if not isinstance(defaults, yaml.MappingNode):
        return text
    found = next(((key, value) for key, value in defaults.value if key.value == "seed"), None)
    if found is None or defaults.flow_style:
        return rewritten(text) if seeded(text) else text
    key, value = found
    lines = text.splitlines(keepends=True)
    last = value.end_mark.line if value.end_mark.column else value.end_mark.line - 1
    kept = "".join(lines[: key.start_mark.line] + lines[last + 1 :])
    return rewritten(kept) if seeded(kept) else kept


def student_message(message_id: str, keep: set) -> bool:
    """Whether a student release ships this message: every one but the diagnoses outside `keep`
    (public_message_ids), and where the skeleton teaches them (`concept.cause.<diagnosis>`)."""
    for prefix in ("diagnosis.", "concept.cause."):
        if message_id.startswith(prefix):
            return message_id.removeprefix(prefix) in keep
    return True


def grader_archive(config) -> bytes:
    """A zip of what the student release of `config` holds of the grader: autograder/ and
    grading.yml."""
    with tempfile.TemporaryDirectory() as temporary:
        out = release_files(Path(temporary) / "release", assignment=config.id, keep_manifest=False)
        return release_archive(out)


def release_archive(release_dir) -> bytes:
    """A zip of `release_dir`'s grader: grading.yml and autograder/ (no bytecode)."""
    release_dir = Path(release_dir)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(release_dir / "grading.yml", "grading.yml")
        for path in sorted((release_dir / "autograder").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, str(path.relative_to(release_dir)))
    return buffer.getvalue()
