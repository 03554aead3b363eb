"""Korean and English: the gettext catalogs, the choice of language, and real runs in Korean.

The catalog checks (autograder/engine/generate/catalogs.py) run on the kit's catalogs, where they must find
nothing, and on copies with one planted defect each, where they must name it.
"""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import pytest
from babel.messages.pofile import read_po, write_po

from autograder.engine.checks import messages
from autograder.engine.course import assignment as assignments
from autograder.engine.course import config as grading_config
from autograder.engine.generate import catalogs
from autograder.engine.generate.skeleton import LANGUAGES, write_skeletons
from autograder.engine.judge.results import CheckResult, GradeResult, StepResult
from autograder.engine.judge.table import display_width, table
from conftest import ASSIGNMENTS, KIT, SOLUTIONS

LOCALE_VARIABLES = ("MHA_LAB_LANG", "LC_ALL", "LC_MESSAGES", "LANG")
PYBABEL = Path(sys.executable).parent / "pybabel"


@pytest.fixture
def no_language(monkeypatch):
    """No language in the environment: neither MHA_LAB_LANG nor a locale."""
    for name in LOCALE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def copy_catalogs(root):
    """A copy of the kit's catalogs under `root`, as a CATALOGS-like tuple (assignment, engine)."""
    copied = []
    for directory, domain in messages.CATALOGS:
        target = root / Path(directory).relative_to(messages.GRADER)
        shutil.copytree(directory, target)
        copied.append((target, domain))
    return tuple(copied)


def po(copied, domain, lang):
    """The .po file of `domain` in `lang` (the assignment domain: the mha assignment's)."""
    directory = next(d for d, name in copied if name == domain and (domain != "assignment" or "mha" in Path(d).parts))
    return directory / lang / "LC_MESSAGES" / f"{domain}.po"


def edit(path, change):
    """Rewrite a .po file after `change(catalog)`."""
    with open(path, "rb") as f:
        catalog = read_po(f)
    change(catalog)
    with open(path, "wb") as f:
        write_po(f, catalog, width=0)


def compile_catalogs(copied):
    """The documented compile commands (messages.py, docs/development.md), on a copy."""
    for directory, domain in copied:
        subprocess.run([str(PYBABEL), "compile", "-d", str(directory), "-D", domain], check=True, capture_output=True)


# --- the catalogs ---------------------------------------------------------------------------


def test_the_catalogs_are_complete_translated_and_consistent():
    assert catalogs.problems() == []


def test_every_message_has_english_and_korean_with_the_same_placeholders():
    english, korean = messages.catalog("en"), messages.catalog("ko")
    assert len(english) > 150 and set(korean) == set(english)
    for message_id, text in english.items():
        assert korean[message_id] and korean[message_id] != text, f"{message_id}: not translated"
        assert catalogs.placeholders(korean[message_id]) == catalogs.placeholders(text), message_id
    # the assignment's own messages live in its domain, the engine's in the engine's
    mha = catalogs.texts(catalogs.read(assignments.folder("mha") / "locale" / "en" / "LC_MESSAGES" / "assignment.po"))
    engine = catalogs.texts(catalogs.read(po(messages.CATALOGS, "autograder", "en")))
    assert "diagnosis.scale_by_d_model" in mha and "mask_changes_kept_keys" in mha
    assert "raised" in engine and "diagnosis.no_known_mistake" in engine and "table.total" in engine
    every = [
        catalogs.texts(catalogs.read(directory / "en" / "LC_MESSAGES" / f"{domain}.po"))
        for directory, domain in messages.CATALOGS
    ]
    ids = [i for texts in every for i in texts]
    assert sorted({i for i in ids if ids.count(i) > 1}) == [], "an id in two catalogs: one would hide the other"


def test_korean_uses_the_course_terms():
    korean = messages.catalog("ko")
    for message_id, term in [
        ("diagnosis.scale_by_d_model", "어텐션"),
        ("diagnosis.mask_after_softmax", "마스킹"),
        ("diagnosis.mask_after_softmax", "소프트맥스"),
        ("diagnosis.mha_split_without_transpose", "헤드를 분할"),
        ("diagnosis.pad_left", "패딩"),
        ("diagnosis.scale_after_softmax", "스케일링"),
    ]:
        assert term in korean[message_id], message_id


# A particle written for either ending of the word before it: 이(가), 을(를), (으)로 ... Korean
# reads naturally only when the sentence is built so that no particle follows a placeholder.
TWO_WAY_PARTICLE = re.compile(r"\((이|가|을|를|은|는|과|와|으|으로|로|이나|나|이라|라|아|야|이랑|랑)\)")


def two_way_particles(korean: dict) -> list:
    return sorted(f"{message_id}: {text}" for message_id, text in korean.items() if TWO_WAY_PARTICLE.search(text))


def test_korean_needs_no_two_way_particle():
    assert two_way_particles(messages.catalog("ko")) == []
    planted = {
        **messages.catalog("ko"),
        "near_miss": "{owner}에는 `{name}`이(가) 없습니다",
        "import_error": "{file}을(를) import하는 중에 오류",
        "refused_file": "{file}(으)로 이동",
    }
    assert [line.split(":")[0] for line in two_way_particles(planted)] == ["import_error", "near_miss", "refused_file"]


PLANTED = [  # (language, domain, id, how the entry is spoiled, what problems() must say)
    (
        "ko",
        "assignment",
        "diagnosis.rows_not_normalised",
        lambda m: setattr(m, "string", m.string.replace("{high:.3g}", "")),
        "placeholders",
    ),
    (
        "ko",
        "autograder",
        "timeout",
        lambda m: setattr(m, "string", m.string.replace("{seconds:g}", "{seconds}")),
        "placeholders",
    ),
    (
        "ko",
        "autograder",
        "raised",
        lambda m: setattr(m, "string", m.string.replace("{type}", "{kind}")),
        "placeholders",
    ),
    ("ko", "autograder", "raised", lambda m: setattr(m, "string", ""), "no translation"),
    ("en", "assignment", "diagnosis.no_scale", lambda m: setattr(m, "string", ""), "no translation"),
    ("ko", "autograder", "shape", lambda m: m.flags.add("fuzzy"), "marked fuzzy"),
    ("ko", "autograder", "values", lambda m: setattr(m, "string", m.string + " {"), "not a format string"),
]


@pytest.mark.parametrize("lang, domain, message_id, spoil, said", PLANTED)
def test_a_planted_catalog_defect_is_named(tmp_path, lang, domain, message_id, spoil, said):
    copied = copy_catalogs(tmp_path)
    edit(po(copied, domain, lang), lambda catalog: spoil(catalog[message_id]))
    found = catalogs.problems(copied)
    assert len(found) == 1 and f"{message_id}: {said}" in found[0], found


def test_a_deleted_translation_is_named(tmp_path):
    copied = copy_catalogs(tmp_path)
    edit(po(copied, "autograder", "ko"), lambda catalog: catalog.delete("table.total"))
    assert [p.split(": ", 1)[1] for p in catalogs.problems(copied)] == ["table.total: missing"]


def test_the_mo_files_are_compiled_from_the_po_files(tmp_path):
    assert catalogs.stale_mo_files() == [], "run pybabel compile (see autograder/engine/checks/messages.py)"
    copied = copy_catalogs(tmp_path)
    korean = po(copied, "assignment", "ko")
    edit(korean, lambda catalog: setattr(catalog["diagnosis.no_softmax"], "string", "소프트맥스가 없습니다"))
    assert catalogs.stale_mo_files(copied) == [korean.with_suffix(".mo")]
    compile_catalogs(copied)
    assert catalogs.stale_mo_files(copied) == []
    assert messages.translations("ko", copied).gettext("diagnosis.no_softmax") == "소프트맥스가 없습니다"
    korean.with_suffix(".mo").unlink()
    assert catalogs.stale_mo_files(copied) == [korean.with_suffix(".mo")]


# --- extraction: the ids the code uses and the templates ---------------------------------------


def test_every_id_the_code_passes_is_in_a_template_it_may_use():
    extracted = catalogs.extracted_ids()
    assert len(extracted) > 50 and "table.total" in extracted and "raised" in extracted
    assert catalogs.unknown_ids() == []


def test_the_documented_pybabel_command_extracts_the_same_ids(tmp_path):
    """babel.cfg's command (its -k options are catalogs.KEYWORDS) run as documented."""
    config = (KIT / "babel.cfg").read_text(encoding="utf-8")
    assert re.findall(r"-k (\w+)", config) == list(catalogs.KEYWORDS)
    subprocess.run(
        [
            str(PYBABEL),
            "extract",
            "-F",
            "babel.cfg",
            "--no-default-keywords",
            *(f"-k{keyword}" for keyword in catalogs.KEYWORDS),
            "-o",
            str(tmp_path / "ids.pot"),
            "autograder",
        ],
        cwd=KIT,
        check=True,
        capture_output=True,
    )
    assert set(catalogs.texts(catalogs.read(tmp_path / "ids.pot"))) == set(catalogs.extracted_ids())


def test_an_id_missing_from_its_template_is_named(tmp_path):
    planted = {
        "engine/planted.py": 'messages.render("table.total")\nmessages.render("mask_changes_kept_keys")\n',
        "assignments/mha/checks/planted.py": 'Fail("mask_changes_kept_keys", {})\nFail("scale_by_d_model", {})\n'
        'Fail("no_such_message", {})\n',
        "assignments/kv_cache/checks/planted.py": 'raise ContractError("mask_changes_kept_keys")\n',
    }
    for name, source in planted.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    # the engine may not use an assignment's id, nor one assignment another's; a probe names its diagnosis
    assert sorted(catalogs.unknown_ids(tmp_path)) == [
        "assignments/kv_cache/checks/planted.py:1: mask_changes_kept_keys: in no template it may use",
        "assignments/mha/checks/planted.py:3: no_such_message: in no template it may use",
        "engine/planted.py:2: mask_changes_kept_keys: in no template it may use",
    ]


def test_no_template_id_is_stale():
    assert catalogs.unused_ids() == []
    known = {(a.id, s.id) for a in grading_config.load_all() for s in a.steps}
    for message_id in messages.catalog("en"):
        kind, _, rest = message_id.partition(".")
        if kind == "assignment_title":
            assert rest in {assignment for assignment, _ in known}, message_id
        elif kind == "step_title":
            assert tuple(rest.split(".", 1)) in known, message_id


def test_a_stale_template_id_is_named(tmp_path):
    copied = copy_catalogs(tmp_path)
    template = next(Path(d) / f"{domain}.pot" for d, domain in copied if domain == "autograder")
    edit(template, lambda catalog: catalog.add("a_message_no_code_gives"))
    edit(template, lambda catalog: catalog.add("diagnosis.a_mistake_nobody_made"))
    assert [p.split(": ", 1)[1] for p in catalogs.unused_ids(catalogs=copied)] == [
        "a_message_no_code_gives: no code uses it",
        "diagnosis.a_mistake_nobody_made: no code uses it",
    ]


def test_the_catalogs_are_package_data():
    tomllib = pytest.importorskip("tomllib")
    globs = tomllib.loads((KIT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["autograder"]
    shipped = {path for pattern in globs for path in (KIT / "autograder").glob(pattern)}
    files = {
        path
        for directory, _ in messages.CATALOGS
        for path in Path(directory).rglob("*")
        if path.suffix in (".po", ".mo", ".pot")
    }
    assert len(files) == 5 * len(messages.CATALOGS) and files <= shipped  # a template, 2 .po, 2 .mo each


# --- where each check's concept is taught ---------------------------------------------------

CONCEPT = re.compile(r'(?P<file>[\w/]+\.py), "(?P<quote>[^"]+)"( \(.*\))?')


def paragraphs(path: Path) -> list:
    """The paragraphs of a file's module docstring, each on one line (a bullet's `* ` left out; a
    section's `[English]` line ends the paragraph before it)."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    docstring = re.sub(r"(?m)^\[[^\]\n]+\]$", "", docstring)
    return [" ".join(block.split()).removeprefix("* ") for block in re.split(r"\n\s*\n", docstring) if block.strip()]


@cache
def skeletons_by_language() -> dict:
    """{language: a folder of the student files in that language} (`skeleton --lang`): a student
    reads the paragraph an anchor names in the file of their own language."""
    folder = Path(tempfile.mkdtemp(prefix="skeletons-"))
    for lang in LANGUAGES:
        for config in grading_config.load_all():
            write_skeletons(SOLUTIONS / config.package, folder / lang / config.package, lang=lang)
    return {lang: folder / lang for lang in LANGUAGES}


def concept_problems(english: dict, korean: dict, skeletons: dict = None) -> list:
    """What is wrong with the concept anchors of `english` and `korean` (catalogs as {id: text}):
    a check of an assignment in grading.yml with no `concept.<step>[.<check>]`, an anchor whose
    file is not the student's skeleton file (in the anchor's language: `skeletons`, default
    skeletons_by_language()) or whose quote opens no paragraph of its docstring, an
    anchor naming a step or check that does not exist, or a hidden check (the release ships them);
    the same for the anchors of the causes, `concept.cause.<diagnosis>`, whose diagnosis must exist."""
    found, known = [], set()
    skeletons = skeletons or skeletons_by_language()

    def anchor_problems(name, package, ids):
        files = set()
        for lang, texts in (("en", english), ("ko", korean)):
            text = next((texts[i] for i in ids if texts.get(i)), None)
            match = CONCEPT.fullmatch(text or "")
            if not match:
                found.append(f"{name} ({lang}): no concept anchor: {text!r}")
                continue
            file, quote = match["file"], " ".join(match["quote"].split())
            files.add(file)
            skeleton = skeletons[lang] / file
            if not file.startswith(f"{package}/") or not skeleton.is_file():
                found.append(f"{name} ({lang}): {file} is not a skeleton file")
            elif not any(paragraph.startswith(quote) for paragraph in paragraphs(skeleton)):
                found.append(f"{name} ({lang}): no paragraph of {file} opens with {quote!r}")
        if len(files) > 1:
            found.append(f"{name}: English and Korean point to different files")

    packages = set()
    for assignment in grading_config.load_all():
        modules = assignment.step_modules()
        packages.add(assignment.package)
        for step in assignment.steps:
            known.add(f"concept.{step.id}")
            for check in modules[step.id].CHECKS:
                if check.visibility == "public":
                    known.add(f"concept.{step.id}.{check.id}")
                name = f"{assignment.id}/{step.id}/{check.id}"
                anchor_problems(name, assignment.package, [f"concept.{step.id}.{check.id}", f"concept.{step.id}"])
    for message_id in sorted({i for i in (*english, *korean) if i.startswith("concept.cause.")}):
        diagnosis = message_id.removeprefix("concept.cause.")
        if f"diagnosis.{diagnosis}" not in english:
            continue  # named below
        known.add(message_id)
        package = CONCEPT.fullmatch(english.get(message_id, "")) and english[message_id].split("/", 1)[0]
        anchor_problems(message_id, package if package in packages else "?", [message_id])
    for message_id in sorted({i for i in (*english, *korean) if i.startswith("concept.")} - known):
        found.append(f"{message_id}: no such step, public check or diagnosis")
    return found


def test_every_check_points_to_a_paragraph_of_the_students_skeleton():
    assert concept_problems(messages.catalog("en"), messages.catalog("ko")) == []


@pytest.mark.parametrize(
    "spoil, said",
    [
        (
            lambda en, ko: ko.update({"concept.attention.weights": 'mha/attention.py, "왜 d_model로 나눌까요?"'}),
            "no paragraph of mha/attention.py opens with",
        ),
        (
            lambda en, ko: en.update({"concept.attention.weights": 'mha/masking.py, "Divide by sqrt(d_k)"'}),
            "no paragraph of mha/masking.py opens with",
        ),
        (lambda en, ko: en.update({"concept.padding": 'solutions/padding.py, "Why"'}), "is not a skeleton file"),
        (lambda en, ko: [d.pop("concept.embedding") for d in (en, ko)], "no concept anchor"),
        (
            lambda en, ko: en.update({"concept.attention.random_sizes": en["concept.attention"]}),
            "no such step, public check or diagnosis",
        ),
        (
            lambda en, ko: en.update({"concept.cause.no_such_mistake": en["concept.attention"]}),
            "no such step, public check or diagnosis",
        ),
        (
            lambda en, ko: ko.update({"concept.cause.no_scale": 'mha/attention.py, "왜 d_model로 나눌까요?"'}),
            "no paragraph of mha/attention.py opens with",
        ),
    ],
)
def test_a_wrong_concept_anchor_is_named(spoil, said):
    english, korean = messages.catalog("en"), messages.catalog("ko")
    spoil(english, korean)
    found = concept_problems(english, korean)
    assert found and all(said in problem or "different files" in problem for problem in found), found


def test_a_failing_step_points_once_to_the_paragraph_that_teaches_its_cause(no_language, monkeypatch):
    """One pointer per step, chosen by the cause (feedback.pointer): a diagnosis's own paragraph
    (concept.cause.<id>), else the step's; with no diagnosis, the paragraph of the first check
    that shows the symptom. A softmax over the wrong dim no longer points to the scaling."""

    def result(diagnosis=None):
        checks = [
            CheckResult("weights", False, 0.0, 5.0, "public", "wrong weights"),
            CheckResult("output", False, 0.0, 5.0, "public", "wrong output"),
            CheckResult("three_dims", False, 0.0, 5.0, "public", "wrong 3-d output"),
            CheckResult("float32", True, 5.0, 5.0, "public"),
        ]
        diagnoses = [{"id": diagnosis, "message": messages.render(f"diagnosis.{diagnosis}")}] if diagnosis else []
        unknown = StepResult(
            "no_such_step",
            "A step no catalog knows",
            0.0,
            5.0,
            [CheckResult("values", False, 0.0, 5.0, "public", "wrong values")],
        )
        attention = StepResult("attention", "Attention", 5.0, 20.0, checks, diagnoses=diagnoses)
        return GradeResult("MHA", "submission", [attention, unknown])

    def arrows(diagnosis=None):
        return [line.strip() for line in table(result(diagnosis)).splitlines() if "→" in line]

    assert arrows() == ['→ see mha/attention.py, "Divide by sqrt(d_k)"']  # the first check's: weights
    assert arrows("softmax_wrong_dim") == ['→ see mha/attention.py, "For every query, compare it with every key"']
    assert arrows("no_scale") == ['→ see mha/attention.py, "Divide by sqrt(d_k)"']
    english = table(result("no_scale")).splitlines()
    cause = next(i for i, line in enumerate(english) if line.strip().startswith("x "))
    assert english[cause].strip() == "x " + messages.render("diagnosis.no_scale")  # the cause first
    monkeypatch.setenv("MHA_LAB_LANG", "ko")
    assert arrows("softmax_wrong_dim") == ['→ 설명: mha/attention.py, "쿼리마다 모든 키와 비교하고(내적)"']
    assert arrows("no_scale") == ['→ 설명: mha/attention.py, "sqrt(d_k)로 나누세요"']


# --- the choice of language -----------------------------------------------------------------


def test_the_language_comes_from_lang_then_mha_lab_lang_then_the_locale(no_language, monkeypatch):
    assert messages.language() == "en"
    monkeypatch.setenv("LANG", "ko_KR.UTF-8")
    assert messages.language() == "ko"
    monkeypatch.setenv("LC_MESSAGES", "en_US.UTF-8")
    assert messages.language() == "en"
    monkeypatch.setenv("LC_ALL", "ko_KR.UTF-8")
    assert messages.language() == "ko"
    monkeypatch.setenv("MHA_LAB_LANG", "en")
    assert messages.language() == "en"
    assert messages.language("ko") == "ko"
    monkeypatch.setenv("MHA_LAB_LANG", "ko")
    assert messages.language("en") == "en"


@pytest.mark.parametrize("value", ["fr", "C.UTF-8", "POSIX", "xx-YY"])
def test_an_unknown_language_is_english(no_language, monkeypatch, value):
    monkeypatch.setenv("MHA_LAB_LANG", value)
    assert messages.language() == "en"
    assert messages.render("step_not_implemented") == "not implemented yet"
    assert messages.render("step_not_implemented", lang=value) == "not implemented yet"


def test_render_speaks_the_chosen_language(no_language, monkeypatch):
    params = {"type": "ValueError", "message": "bad", "where": "heads.py, line 3"}
    assert messages.render("raised", **params) == "your code raised ValueError: bad (heads.py, line 3)"
    assert (
        messages.render("raised", lang="ko", **params)
        == "코드에서 ValueError 예외가 발생했습니다: bad (heads.py, line 3)"
    )
    monkeypatch.setenv("MHA_LAB_LANG", "ko")
    assert messages.render("raised", **params).startswith("코드에서 ValueError")
    assert messages.render("timeout", seconds=2.5, where="w").startswith("2.5초 후에")
    assert messages.render("raised", lang="en", **params).startswith("your code raised")
    monkeypatch.setenv("MHA_LAB_LANG", "fr")
    monkeypatch.setenv("LANG", "ko_KR.UTF-8")  # MHA_LAB_LANG decides, even when it is unknown
    assert messages.render("raised", **params).startswith("your code raised")
    with pytest.raises(KeyError):
        messages.render("no_such_message")
    with pytest.raises(KeyError):
        messages.render("no_such_message", lang="ko")


def test_speaking_sets_and_restores_mha_lab_lang(no_language):
    with messages.speaking("ko"):
        assert os.environ["MHA_LAB_LANG"] == "ko" and messages.render("table.total") == "합계"
        with messages.speaking(None):
            assert messages.language() == "ko"
    assert "MHA_LAB_LANG" not in os.environ and messages.render("table.total") == "total"


def test_the_assignment_catalog_comes_first_and_english_fills_a_missing_translation(tmp_path):
    copied = copy_catalogs(tmp_path)
    edit(po(copied, "autograder", "ko"), lambda catalog: catalog.delete("missing_file"))
    edit(
        po(copied, "assignment", "ko"), lambda catalog: catalog.add("raised", "과제 카탈로그: {type} {message} {where}")
    )
    compile_catalogs(copied)
    chain = messages.translations("ko", copied)
    assert chain.gettext("missing_file") == "{file} is missing"
    assert chain.gettext("raised") == "과제 카탈로그: {type} {message} {where}"
    assert chain.gettext("shape") == messages.catalog("ko")["shape"]
    with pytest.raises(KeyError):
        chain.gettext("no_such_message")


def test_the_grade_command_refuses_an_unknown_lang():
    completed = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", "--lang", "fr"], cwd=KIT, capture_output=True, text=True
    )
    assert completed.returncode == 2 and "--lang" in completed.stderr


# --- the score table and the routes ---------------------------------------------------------


def two_step_result():
    failing = StepResult(
        "attention",
        "Scaled dot-product attention",
        0.0,
        15.0,
        [
            CheckResult(
                "weights",
                False,
                0.0,
                7.5,
                "public",
                messages.render("shape", name="weights", expected=(2, 3), got=(3, 2)),
            ),
            CheckResult("output", True, 0.0, 7.5, "public"),
        ],
        diagnoses=[{"id": "no_scale", "message": messages.render("diagnosis.no_scale")}],
    )
    passing = StepResult("padding", "Pad a batch", 10.0, 10.0, [CheckResult("basic", True, 10.0, 10.0, "public")])
    skeleton = StepResult("embedding", "Embedding", 0.0, 5.0, [], status="not_implemented")
    return GradeResult("MHA", "submission", [passing, failing, skeleton])


def test_the_score_table_in_korean_and_in_english(no_language, monkeypatch):
    english = table(two_step_result())
    assert "  total       10.00 / 30.00" in english
    assert "x your attention weights are what you get without dividing the scores by sqrt(d_k)" in english
    assert "1 of 2 checks: weights: expected shape (2, 3), got (3, 2)" in english
    assert "not implemented yet" in english
    monkeypatch.setenv("MHA_LAB_LANG", "ko")
    korean = table(two_step_result())
    assert "검사 2개 중 1개: weights: 기대한 shape는 (2, 3)인데 (3, 2)입니다" in korean
    assert "x 어텐션 가중치가 점수를 sqrt(d_k)로 나누지 않았을 때의 값과 같습니다" in korean
    assert "아직 구현하지 않았습니다" in korean and "total" not in korean
    lines = korean.splitlines()
    total, padding = next(x for x in lines if "합계" in x), next(x for x in lines if "padding" in x)
    # the scores line up on screen: 합계 takes four columns
    assert display_width(total[: total.index("10.00")]) == display_width(padding[: padding.index("10.00")])


def test_gradescope_output_in_korean(no_language, monkeypatch):
    from autograder.publish.gradescope import gradescope_results

    english = gradescope_results(two_step_result(), 1.0)
    assert "x your attention weights are what you get without dividing" in english["tests"][1]["output"]
    monkeypatch.setenv("MHA_LAB_LANG", "ko")
    korean = gradescope_results(two_step_result(), 1.0)
    failed = next(t for t in korean["tests"] if t["status"] == "failed")
    assert "x 어텐션 가중치가 점수를 sqrt(d_k)로" in failed["output"] and "기대한 shape는" in failed["output"]


def test_the_notebook_check_speaks_its_lang_argument(tmp_path, capsys, no_language):
    from autograder.routes.nbgrader_cell import check_step

    shutil.copytree(ASSIGNMENTS / "mha", tmp_path / "mha")
    assert check_step("padding", directory=tmp_path, lang="ko") == 0.0
    out = capsys.readouterr().out
    assert "아직 구현하지 않았습니다" in out and "합계" in out
    assert "MHA_LAB_LANG" not in os.environ
    check_step("padding", directory=tmp_path)
    assert "not implemented yet" in capsys.readouterr().out


def test_the_notebook_check_points_a_failing_check_to_its_paragraph(tmp_path, capsys, no_language):
    from autograder.routes.nbgrader_cell import check_step

    attention = failing_copy(tmp_path).joinpath("assignments")
    assert check_step("attention", directory=attention, lang="ko") == 0.0
    assert '→ 설명: mha/attention.py, "sqrt(d_k)로 나누세요"' in capsys.readouterr().out
    check_step("attention", directory=attention, lang="en")
    assert '→ see mha/attention.py, "Divide by sqrt(d_k)"' in capsys.readouterr().out


# --- the student's own copies: the release README, the notebook, the pictures ------------------

HANGUL = re.compile("[가-힣]")


def test_the_student_readme_is_korean_then_english():
    from autograder.publish.student_readme import student_readme

    readme = student_readme(grading_config.load_all())
    korean, english = readme.split("\n## 한국어\n")[1].split("\n## English\n")
    assert HANGUL.search(korean) and "pytest assignments/ --lang ko" in korean and "→" in korean
    assert "| `mha/` | `masking` | " + messages.template("step_title.mha.masking", "ko") + " | 15 |" in korean
    assert "| `mha/` | `masking` | Padding and causal masks | 15 |" in english
    assert (
        "Fill in the TODOs" in english
        and "→" in english
        and not HANGUL.search(english.replace("메시지와 점수표를 한국어로", ""))
    )


def test_the_student_notebook_speaks_korean_and_english_and_names_lang_ko():
    from autograder.publish.student_notebook import student_notebook

    config = grading_config.load_all()[0]
    cells = {cell.get("id"): cell.source for cell in student_notebook(config).cells}
    introduction = cells["introduction"]
    assert introduction.index("[한국어]") < introduction.index("[English]") and 'lang="ko"' in introduction
    assert messages.template("assignment_title.mha", "ko") in introduction.splitlines()[0]
    assert 'lang="ko"' in cells["setup"] and "LANG = None" in cells["setup"] and HANGUL.search(cells["setup"])
    for step in config.steps:
        assert cells[f"step-{step.id}"] == (
            f"## 단계 / Step: {messages.template(f'step_title.mha.{step.id}', 'ko')} / "
            f"{step.title} ({step.points:g}점 / points)"
        )
        assert cells[f"check-{step.id}"].endswith("lang=LANG)")


def test_the_nbgrader_course_notebook_speaks_korean_and_english():
    """The instructor's nbgrader notebook is what students of that route read: its introduction and
    step headings are in both languages, and it says how to get Korean messages."""
    from autograder.publish.nbgrader_course import course_notebook

    for config in grading_config.load_all():
        cells = {cell.get("id"): cell.source for cell in course_notebook(config).cells}
        introduction = cells["introduction"]
        assert introduction.index("[한국어]") < introduction.index("[English]"), config.id
        assert "MHA_LAB_LANG=ko" in introduction
        assert messages.template(f"assignment_title.{config.id}", "ko") in introduction.splitlines()[0]
        for step in config.steps:
            heading = cells[f"step-{step.id}"]
            assert messages.template(f"step_title.{config.id}.{step.id}", "ko") in heading and step.title in heading


def test_the_pictures_speak_the_language(monkeypatch, no_language):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    import torch

    from autograder.assignments.mha.checks import masking
    from autograder.publish import plots

    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)
    weights = torch.full((1, 1, 2, 2), 0.5)
    check = masking.BlocksPadding()
    for lang in ("en", "ko"):
        with messages.speaking(lang):
            picture = check.picture(
                {"q": torch.zeros(1, 1, 2, 4), "k": torch.zeros(1, 1, 2, 4), "mask": torch.tensor([False, True])},
                {"weights": weights, "free": {"weights": weights}},  # the student's own, without the mask
                None,
            )
            plots.draw(picture, Path(os.devnull))
    english, korean = ([axis.get_title() for axis in figure.axes[:2]] + [figure.get_suptitle()] for figure in drawn)
    assert english == [
        "yours",
        "yours without the mask, over the kept keys",
        "masked attention weights (padding mask), batch 0, head 0",
    ]
    if plots.hangul_font() is None:  # no font with Hangul here: English rather than empty boxes
        pytest.skip("no font with Hangul on this machine")
    assert korean == [
        "여러분의 값",
        "마스크 없는 여러분의 가중치, 남은 키에 대해 다시 정규화",
        "마스킹된 어텐션 가중치 (패딩 마스크), 배치 0, 헤드 0",
    ]
    assert drawn[1].axes[0].get_xlabel() == "키" and drawn[1].axes[0].get_ylabel() == "쿼리"


def test_where_a_time_limit_ran_out_in_the_grader_speaks_the_language(no_language, monkeypatch):
    from autograder.engine.judge.in_process import Hangs
    from autograder.engine.judge.observation import Facts, read_report

    facts = Facts("mha", frozenset({"padding.py"}), "padding", 1.0)
    report = {"kind": "timeout", "where": None, "forbidden": []}
    assert read_report(report, facts).error.params["where"] == "called from the grader"
    monkeypatch.setenv("MHA_LAB_LANG", "ko")
    seen = read_report(report, facts)
    assert seen.error.params["where"] == "채점기에서 호출"
    # a time limit spent in the grader's own code is not the student's hang, in Korean too
    check = assignments.step_modules("mha")["padding"].CHECKS[0]
    hangs = Hangs()
    assert hangs.note(check, 1.0, seen) is None and hangs.skipped(check) is None
    theirs = read_report({"kind": "timeout", "where": ["padding.py", 3, "pad_batch"], "forbidden": []}, facts)
    assert hangs.note(check, 1.0, theirs) == ("padding.py", "pad_batch")


def failing_copy(tmp_path):
    """A student's copy of the kit whose attention divides by sqrt(d_model): one failing step,
    the others passing."""
    root = tmp_path / "kit"
    (root / "assignments").mkdir(parents=True)
    for name in ("conftest.py", "test_checks.py"):
        shutil.copy(ASSIGNMENTS / name, root / "assignments" / name)
    shutil.copytree(SOLUTIONS / "mha", root / "assignments" / "mha")
    attention = root / "assignments" / "mha" / "attention.py"
    source = attention.read_text()
    old = "d_k = q.size(-1)  #"
    assert source.count(old) == 1
    attention.write_text(source.replace(old, "d_k = q.size(-1) * q.size(1)  #"))
    shutil.copy(KIT / "grading.yml", root / "grading.yml")
    return root


def line_of(output, start):
    return next(line for line in output.splitlines() if line.strip().startswith(start))


@pytest.mark.slow
def test_pytest_assignments_in_korean(tmp_path):
    """`pytest assignments/ --lang ko`: --lang beats MHA_LAB_LANG; the section, the table, the
    failure messages and the diagnosis are Korean."""
    root = failing_copy(tmp_path)
    # PYTHONPATH: this kit's autograder, not another checkout's (an editable install may point there)
    env = {**os.environ, "MHA_LAB_LANG": "en", "PYTHONPATH": str(KIT)}
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "assignments", "-p", "no:cacheprovider", "--lang", "ko"],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    out = completed.stdout
    assert completed.returncode == 1, out[-3000:]
    assert "MHA Lab 점수 (공개 검사)" in out and "공개 검사 결과입니다" in out
    assert "10.00 / 10" in line_of(out, "padding ")
    assert "0.00 / 15" in line_of(out, "attention ")
    assert "값이 틀렸습니다 (가장 큰 오차" in out  # the failing checks' short messages (pytest's and the table's)
    assert "x 어텐션 가중치가 sqrt(d_k)(헤드 하나의 크기)가 아니라 sqrt(d_model)" in out
    assert '→ 설명: mha/attention.py, "sqrt(d_k)로 나누세요"' in out  # where the skeleton teaches it
    assert "80.00 / 100" in line_of(out, "합계") and "cuda 단계는 여기서 검사하지 않아" in line_of(out, "합계")
    cuda = line_of(out, "cuda ")
    assert cuda.count("검사하지 않음:") == 1 and "GPU가 없습니다" in cuda
    assert "values out of tolerance" not in out and "MHA Lab score" not in out


@pytest.mark.slow
def test_grade_json_in_korean(tmp_path):
    root = failing_copy(tmp_path)
    out = tmp_path / "result.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade",
            str(root / "assignments"),
            "--public-only",
            "--in-process",
            "--lang",
            "ko",
            "--json",
            str(out),
        ],
        cwd=KIT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "합계" in completed.stdout and '→ 설명: mha/attention.py, "sqrt(d_k)로 나누세요' in completed.stdout
    result = json.loads(out.read_text(encoding="utf-8"))
    steps = {step["id"]: step for step in result["steps"]}
    failed = [c for c in steps["attention"]["checks"] if c["passed"] is False]
    assert failed and all("허용 오차를 벗어났습니다" in c["message"] for c in failed)
    causes = [d for d in steps["attention"]["diagnoses"] if not d.get("symptom")]
    assert [d["message"] for d in causes] == [messages.render("diagnosis.scale_by_d_model", lang="ko")]
    assert steps["attention"]["diagnoses"][0] == causes[0]  # the cause first; what localisation saw in support
    assert steps["padding"]["score"] == 10 and all(c["message"] == "" for c in steps["padding"]["checks"])
    assert "mode_note" not in steps["cuda"] or "장치에서 채점했습니다" in steps["cuda"]["mode_note"]


def test_titles_from_grading_yml_are_translated_where_the_catalog_has_them(no_language):
    """The score table's heading speaks the student's language: an assignment's title comes from
    its catalog (assignment_title.<id>) where that catalog's English is grading.yml's title; a
    title the instructor has rewritten since stays as written, in every language."""
    for config in grading_config.load_all():
        message_id = f"assignment_title.{config.id}"
        korean = messages.title(message_id, config.title, lang="ko")
        assert korean != config.title and any("\uac00" <= ch <= "\ud7a3" for ch in korean), config.id
        assert messages.title(message_id, config.title, lang="en") == config.title
        assert messages.title(message_id, "A title of our own", lang="ko") == "A title of our own"
    from autograder.engine.judge.runner import grade

    mha = grading_config.load(assignment="mha")
    previous = messages.use_language("ko")
    try:
        heading = table(grade(SOLUTIONS, mha, steps=["padding"])).splitlines()[0]
    finally:
        messages.restore_language(previous)
    assert heading.startswith(messages.title("assignment_title.mha", mha.title, lang="ko")), heading
