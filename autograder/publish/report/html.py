"""The class report as one self-contained HTML file (autograder/publish/report/data.py makes its data).

Rendered with Jinja2 from autograder/publish/report/templates/report.html.j2, autoescaped: student code,
messages and ids are text, never markup. Charts are inline SVG drawn by the template's own
macros (bars from the histograms), so the file opens offline: no script, no CDN, no image files.
The report's own words are keyed by id in REPORT_CATALOG, English and Korean, kept apart from
the student messages (autograder/engine/checks/messages.py) so they can move to a gettext catalog as a block.
Over 400 lines only by that catalog: the report's words in two languages, one table.
"""

import base64
import functools
import string
from pathlib import Path

from autograder.engine.checks import messages

TEMPLATES = Path(__file__).resolve().parent / "templates"

REPORT_CATALOG = {
    "en": {
        "title": "Class report: {assignment}",
        "generated": "{count} submissions from {dirs}",
        "nav.summary": "At a glance",
        "nav.misconceptions": "Misconceptions",
        "nav.steps": "Per step",
        "nav.hidden": "Public vs hidden",
        "nav.similarity": "Similarity",
        "nav.runtime": "Runtime",
        "nav.students": "Students",
        "summary.title": "The class at a glance",
        "summary.submissions": "Submissions",
        "summary.graded": "Graded",
        "summary.mean": "Mean",
        "summary.nothing": "Nothing to grade / not graded",
        "summary.covers": "Mean, median, full marks and the charts cover the {count} graded submissions; the {left} with nothing to grade or not graded are left out.",
        "summary.median": "Median",
        "summary.full_marks": "Full marks",
        "summary.histogram": "Total scores",
        "summary.not_graded": "{count} submissions have no score or nothing to grade:",
        "summary.all_graded": "Every submission was graded.",
        "summary.syntax_errors": "Code that does not parse in {count} submissions (each step that needs the file scores 0; no misconception names it):",
        "summary.tampering": "Kit files changed since the release in {count} repositories (the workflow, grading.yml, the grader or its tests: the score Classroom shows for them may be forged; the grades here come from your kit and read only their code):",
        "fb.tampering": "tampering: {what}",
        "fb.gradebook": "score {score} / {max}; grade of record {total} / {max}: {notes}",
        "col.changed": "what changed",
        "steps.details": "score histogram and checks",
        "col.syntax_error": "what does not parse",
        "reason.grader_failed": "the grader failed on it (no result; grade the batch again)",
        "reason.missing_package": "the assignment's package is not in the submission",
        "reason.nothing_implemented": "every step is still a TODO",
        "mis.title": "Misconceptions: what to re-teach",
        "mis.intro": "Each line is a known mistake the diagnosis recognised in failing steps, most frequent first.",
        "mis.none": "No failing step carried a diagnosis.",
        "mis.students": "students",
        "mis.step": "step",
        "mis.explanation": "explanation",
        "mis.count": "{count} of {total} students ({share:.0%})",
        "mis.teaching": "What the skeleton says ({file})",
        "mis.unexplained": "failures no cataloged mistake reproduces (see each student's evidence)",
        "steps.title": "Per step",
        "steps.mean": "mean {mean:.2f} / {max:g}, median {median:.2f}",
        "steps.check": "check",
        "steps.visibility": "visibility",
        "steps.pass_rate": "pass rate",
        "steps.passed": "passed",
        "steps.failed": "failed",
        "steps.not_run": "not run",
        "outcome.full": "full",
        "outcome.partial": "partial",
        "outcome.zero": "zero",
        "outcome.not_implemented": "not implemented",
        "outcome.not_checked": "not checked",
        "hidden.title": "Public vs hidden",
        "hidden.intro": "Students who pass every public check of a step but lose hidden ones: code fitted to the visible tests, or a case the public checks do not reach.",
        "hidden.none": "No student passed every public check of a step while failing a hidden one.",
        "hidden.failed": "hidden checks failed",
        "hidden.lost": "points lost",
        "sim.title": "Similarity",
        "sim.note": "Similarity is a lead, not a verdict: students solving the same small exercise from the same skeleton write alike code. Read the matching regions before drawing any conclusion.",
        "sim.method": "Compared: the code grading accepted and kept (never the submission folders), as one package whatever its files are called, in k-grams of {k} tokens, after normalising: names and string literals replaced, comments, docstrings and dead code stripped (unused functions and assignments, code after a return, branches on constants, no-op updates), independent statements put in one order. The skeleton's code is ignored; code that more than {common} submissions share weighs less, never nothing (copies identical in full score 100% however many share them). {compared} submissions compared; pairs at or above {threshold:.0%} shown, the most matching code first.",
        "sim.not_compared": "Not compared, or in part ({count}):",
        "code.code_empty": "grading took no file of theirs (links, pipes, devices and oversized files are refused; or no package)",
        "code.code_not_kept": "no code kept beside the result (graded by an older kit: grade again with --force)",
        "code.code_missing": "the code kept beside the result is missing (out/code/)",
        "code.code_mismatch": "the code kept beside the result is not what it was graded from (grade again with --force)",
        "code.code_unreadable": "the code kept beside the result cannot be read",
        "code.code_partial": "some files were too large to keep: the rest is compared",
        "reason.unreadable_result": "its result's JSON cannot be read (not JSON, too large, or not a result): grade it again with --force",
        "private": "For instructors only: this report shows hidden checks, their seeds, every student's feedback and code. Do not share it with students.",
        "sim.none": "No pair at or above the threshold.",
        "sim.pair": "{a} ↔ {b}: {sim_a:.0%} of {a}'s code is in {b}, {sim_b:.0%} of {b}'s in {a} ({tokens} tokens match)",
        "sim.more": "{count} more pairs above the threshold are not shown.",
        "sim.clusters": "Groups: students linked by pairs at or above the threshold, the largest first ({count} groups). A group whose members all copy one another has every pair inside it (four students: six pairs); many pairs inside one group are one lead, not many.",
        "sim.cluster": "{size} students, {pairs} pairs, up to {top:.0%}",
        "sim.listed": "The {shown} pairs with the most matching code:",
        "rt.title": "Runtime",
        "rt.slowest": "Slowest submissions",
        "rt.seconds": "seconds",
        "rt.total": "grading took {total:.1f} s in all, {mean:.2f} s per submission on average",
        "rt.no_times": "The results carry no grading times (graded before duration_s was recorded).",
        "rt.hangs": "Hangs (stopped for time)",
        "rt.crashes": "Crashes (the interpreter died)",
        "rt.none": "none",
        "students.title": "Students",
        "students.student": "student",
        "students.total": "total",
        "students.diagnoses": "diagnoses",
        "students.feedback": "feedback",
        "students.not_graded": "not graded",
        "students.back": "back to the list",
        "fb.score": "{score:g} / {max:g}",
        "fb.output": "What the code printed",
        "fb.seed": "hidden-check seed {seed}",
        "fb.sandbox": "sandbox: {layers}",
        "fb.all_passed": "every check passed",
        "fb.pictures": "Attention weights of a failing check: the student's next to the expected ones",
        "col.step": "step",
        "col.score": "score",
        "col.count": "count",
        "col.reason": "reason",
        "col.checks": "checks",
        "col.message": "message",
        "vis.public": "public",
        "vis.hidden": "hidden",
    },
    "ko": {
        "title": "학급 보고서: {assignment}",
        "generated": "제출물 {count}개 ({dirs})",
        "nav.summary": "한눈에 보기",
        "nav.misconceptions": "오개념",
        "nav.steps": "단계별",
        "nav.hidden": "공개 대 비공개",
        "nav.similarity": "유사도",
        "nav.runtime": "실행 시간",
        "nav.students": "학생",
        "summary.title": "학급 전체 한눈에 보기",
        "summary.submissions": "제출물",
        "summary.graded": "채점됨",
        "summary.mean": "평균",
        "summary.nothing": "채점할 내용 없음 / 채점 안 됨",
        "summary.covers": "평균, 중앙값, 만점 수와 그래프는 채점된 제출물 {count}개를 대상으로 하며, 채점할 내용이 없거나 채점되지 않은 {left}개는 제외했습니다.",
        "summary.median": "중앙값",
        "summary.full_marks": "만점",
        "summary.histogram": "총점 분포",
        "summary.not_graded": "점수가 없거나 채점할 내용이 없는 제출물 {count}개:",
        "summary.all_graded": "모든 제출물이 채점되었습니다.",
        "summary.syntax_errors": "문법 오류로 읽을 수 없는 코드가 있는 제출물 {count}개 (그 파일이 필요한 단계는 0점이고, 어떤 오개념으로도 잡히지 않습니다):",
        "summary.tampering": "배포 이후 키트 파일이 바뀐 저장소 {count}개 (워크플로, grading.yml, 채점기나 그 테스트: Classroom이 보여 주는 점수는 조작되었을 수 있습니다. 여기의 점수는 여러분의 키트로 학생 코드만 읽어 채점한 것입니다):",
        "fb.tampering": "변조: {what}",
        "fb.gradebook": "채점 점수 {score} / {max}; 최종 점수 {total} / {max}: {notes}",
        "col.changed": "바뀐 것",
        "steps.details": "점수 분포와 검사",
        "col.syntax_error": "읽을 수 없는 곳",
        "reason.grader_failed": "채점기가 실패했습니다 (결과 없음, 다시 채점하세요)",
        "reason.missing_package": "제출물에 과제 패키지가 없습니다",
        "reason.nothing_implemented": "모든 단계가 아직 TODO 상태입니다",
        "mis.title": "오개념: 다시 가르칠 내용",
        "mis.intro": "실패한 단계에서 진단이 알아낸 알려진 실수들입니다. 많은 학생이 한 실수부터 나열합니다.",
        "mis.none": "진단이 붙은 실패 단계가 없습니다.",
        "mis.students": "학생",
        "mis.step": "단계",
        "mis.explanation": "설명",
        "mis.count": "학생 {total}명 중 {count}명 ({share:.0%})",
        "mis.teaching": "스켈레톤의 설명 ({file})",
        "mis.unexplained": "목록의 어떤 실수로도 재현되지 않는 실패 (학생별 근거 참고)",
        "steps.title": "단계별 결과",
        "steps.mean": "평균 {mean:.2f} / {max:g}, 중앙값 {median:.2f}",
        "steps.check": "검사",
        "steps.visibility": "공개 여부",
        "steps.pass_rate": "통과율",
        "steps.passed": "통과",
        "steps.failed": "실패",
        "steps.not_run": "실행 안 됨",
        "outcome.full": "만점",
        "outcome.partial": "부분 점수",
        "outcome.zero": "0점",
        "outcome.not_implemented": "미구현",
        "outcome.not_checked": "검사 안 됨",
        "hidden.title": "공개 검사 대 비공개 검사",
        "hidden.intro": "한 단계의 공개 검사는 모두 통과했지만 비공개 검사에서 점수를 잃은 학생들입니다. 보이는 테스트에만 맞춘 코드이거나, 공개 검사가 다루지 않는 경우입니다.",
        "hidden.none": "공개 검사를 모두 통과하고 비공개 검사에서 실패한 학생이 없습니다.",
        "hidden.failed": "실패한 비공개 검사",
        "hidden.lost": "잃은 점수",
        "sim.title": "유사도",
        "sim.note": "유사도는 단서일 뿐 판정이 아닙니다. 같은 스켈레톤으로 같은 작은 과제를 푸는 학생들의 코드는 비슷해지기 마련입니다. 결론을 내리기 전에 일치하는 부분을 직접 읽어 보세요.",
        "sim.method": "비교 대상: 채점이 받아들여 보관한 코드(제출 폴더는 다시 읽지 않음)를 파일 이름과 상관없이 하나의 패키지로 보고, 정규화한 뒤 {k}토큰 k-gram으로 비교했습니다. 정규화: 이름과 문자열 리터럴을 바꾸고, 주석·독스트링·죽은 코드(쓰이지 않는 함수와 대입, return 뒤의 코드, 상수 조건 분기, 아무것도 바꾸지 않는 갱신)를 지우고, 서로 의존하지 않는 문장을 한 가지 순서로 맞춥니다. 스켈레톤의 코드는 무시하고, 제출물 {common}개 넘게 공유하는 코드는 가중치를 낮추되 0으로 만들지는 않습니다 (전체가 같은 복사본은 몇 명이 공유하든 100%). 제출물 {compared}개를 비교했으며 {threshold:.0%} 이상인 쌍을 일치하는 코드가 많은 순서로 보여 줍니다.",
        "sim.not_compared": "비교하지 않았거나 일부만 비교한 제출물 ({count}개):",
        "code.code_empty": "채점이 받아들인 파일이 없습니다 (링크, 파이프, 장치 파일, 너무 큰 파일은 거부됨; 또는 패키지 없음)",
        "code.code_not_kept": "결과 옆에 보관된 코드가 없습니다 (이전 버전으로 채점됨: --force로 다시 채점하세요)",
        "code.code_missing": "결과 옆에 보관된 코드 파일이 없습니다 (out/code/)",
        "code.code_mismatch": "결과 옆에 보관된 코드가 채점한 코드와 다릅니다 (--force로 다시 채점하세요)",
        "code.code_unreadable": "결과 옆에 보관된 코드를 읽을 수 없습니다",
        "code.code_partial": "너무 커서 보관하지 못한 파일이 있어 나머지만 비교했습니다",
        "reason.unreadable_result": "결과 JSON을 읽을 수 없습니다 (JSON이 아니거나, 너무 크거나, 결과가 아님): --force로 다시 채점하세요",
        "private": "강사 전용: 이 보고서에는 비공개 검사와 그 시드, 모든 학생의 피드백과 코드가 들어 있습니다. 학생에게 공유하지 마세요.",
        "sim.none": "기준 이상인 쌍이 없습니다.",
        "sim.pair": "{a} ↔ {b}: {a}의 코드 중 {sim_a:.0%}가 {b}에, {b}의 코드 중 {sim_b:.0%}가 {a}에 있습니다 (일치 토큰 {tokens}개)",
        "sim.more": "기준을 넘는 쌍 {count}개는 표시하지 않았습니다.",
        "sim.clusters": "묶음: 기준 이상인 쌍으로 서로 이어진 학생들입니다. 큰 묶음부터 보여 줍니다 (묶음 {count}개). 구성원이 모두 서로 베낀 묶음은 그 안의 모든 쌍을 가집니다 (학생 네 명: 쌍 여섯 개). 한 묶음 안의 여러 쌍은 여러 단서가 아니라 하나의 단서입니다.",
        "sim.cluster": "학생 {size}명, 쌍 {pairs}개, 최고 {top:.0%}",
        "sim.listed": "일치하는 코드가 가장 많은 쌍 {shown}개:",
        "rt.title": "실행 시간",
        "rt.slowest": "가장 오래 걸린 제출물",
        "rt.seconds": "초",
        "rt.total": "채점에 모두 {total:.1f}초, 제출물당 평균 {mean:.2f}초가 걸렸습니다",
        "rt.no_times": "결과에 채점 시간이 없습니다 (duration_s 기록 이전에 채점됨).",
        "rt.hangs": "멈춤 (시간 초과로 중단)",
        "rt.crashes": "충돌 (인터프리터 종료)",
        "rt.none": "없음",
        "students.title": "학생별 결과",
        "students.student": "학생",
        "students.total": "총점",
        "students.diagnoses": "진단",
        "students.feedback": "피드백",
        "students.not_graded": "채점 안 됨",
        "students.back": "목록으로 돌아가기",
        "fb.score": "{score:g} / {max:g}",
        "fb.output": "코드가 출력한 내용",
        "fb.seed": "비공개 검사 시드 {seed}",
        "fb.sandbox": "샌드박스: {layers}",
        "fb.all_passed": "모든 검사 통과",
        "fb.pictures": "실패한 검사의 어텐션 가중치: 학생의 결과(왼쪽)와 기대한 결과(오른쪽)",
        "col.step": "단계",
        "col.score": "점수",
        "col.count": "수",
        "col.reason": "사유",
        "col.checks": "검사",
        "col.message": "메시지",
        "vis.public": "공개",
        "vis.hidden": "비공개",
    },
}


def translator(lang: str):
    """t(key, **params): the report's text in `lang`, English where a key is missing."""
    catalog = REPORT_CATALOG.get(lang, REPORT_CATALOG["en"])

    def t(key: str, **params) -> str:
        template = catalog.get(key) or REPORT_CATALOG["en"][key]
        return template.format(**params) if params else template

    return t


def render(data: dict, lang: str = "en", sources: list = ()) -> str:
    """The report's HTML: `data` from data.build, `sources` the out directories (named in it)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=select_autoescape(["j2", "html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["anchor"] = anchor
    env.filters["num"] = num
    env.filters["embed"] = embed
    env.filters["breakable"] = breakable
    assignment = next((s["result"]["assignment"] for s in data["students"] if s["result"]), "")
    # Titles come from grading.yml (English); an assignment's catalogs may translate them, by id.
    assignment_id = (data.get("assignment") or {}).get("id")
    if assignment_id:
        assignment = relocalise(assignment, f"assignment_title.{assignment_id}", lang, whole=True)
    return env.get_template("report.html.j2").render(
        data=data,
        t=translator(lang),
        lang=lang,
        assignment=assignment,
        sources=[str(s) for s in sources],
        tick_every=tick_every,
        said=lambda text, message_id: relocalise(text, message_id, lang),
        step_title=lambda step_id, title: (
            relocalise(title, f"step_title.{assignment_id}.{step_id}", lang, whole=True) if assignment_id else title
        ),
    )


def localised(data: dict, lang: str) -> dict:
    """A copy of the report's data whose texts for people are in `lang`, as the HTML shows them:
    the misconceptions' messages, the hangs' and crashes' messages, the assignment's and the steps'
    titles (report.json under `report --lang ko`). Ids, numbers and students' results stay as they are."""
    import copy

    out = copy.deepcopy(data)
    for row in out.get("misconceptions", []):
        row["message"] = relocalise(row.get("message", ""), f"diagnosis.{row['id']}", lang)
    runtime = out.get("runtime") or {}
    for key in ("hangs", "crashes"):
        for row in runtime.get(key, []) or []:
            if row.get("message_id"):
                row["message"] = relocalise(row.get("message", ""), row["message_id"], lang)
    assignment_id = (out.get("assignment") or {}).get("id")
    if assignment_id:
        out["assignment"]["title"] = relocalise(
            out["assignment"]["title"], f"assignment_title.{assignment_id}", lang, whole=True
        )
        for step in out.get("steps", []):
            step["title"] = relocalise(
                step.get("title", ""), f"step_title.{assignment_id}.{step['id']}", lang, whole=True
            )
    out["lang"] = lang
    return out


def tick_every(bins: int) -> int:
    """Label every how-many-th bin edge of a histogram: evenly spaced (a divisor of `bins`), at
    most 6 intervals (10 bins over 0..100: 0, 20, ..., 100)."""
    return next((every for every in range(1, bins + 1) if bins % every == 0 and bins // every <= 6), 1)


def num(value) -> str:
    """A score or count as the report shows it: at most 2 decimals, no trailing zeros."""
    return "–" if value is None else f"{round(float(value), 2):g}"


def embed(path: str) -> str:
    """A PNG as a data: URL, so the report stays one file that opens anywhere."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def breakable(text: str):
    """An id that may wrap after its underscores (a narrow table column), escaped."""
    from markupsafe import Markup, escape

    return Markup(str(escape(text)).replace("_", "_<wbr>"))


def relocalise(text: str, message_id: str, lang: str, whole: bool = False) -> str:
    """`text`, a message rendered from `message_id` in whichever language grading spoke, in
    `lang`: its parameters are read back from the text with the template it was rendered from
    (English or Korean, the first that matches it) and put into `lang`'s template of the same id;
    a parameter that is itself a rendered message (an evidence, a tolerance) is put into `lang`
    the same way. `text` as it is where the id is unknown or the text matches no template (a
    result written with other catalogs). `whole`: `text` is the id's English text, put whole
    into `lang` (a title of grading.yml)."""
    if whole:  # only where the catalog's English is `text` (grading.yml's title may have been edited)
        try:
            return messages.template(message_id, lang) if messages.template(message_id, "en") == text else text
        except KeyError:
            return text
    found = _relocalised(text, message_id, lang, 2)
    return text if found is None else found


def _relocalised(text: str, message_id: str, lang: str, depth: int):
    """relocalise's work: None where `text` is no rendering of `message_id`."""
    try:
        target = messages.template(message_id, lang)
    except KeyError:
        return None
    for source_lang in dict.fromkeys((lang, *messages.LANGUAGES)):
        fields, pattern = _reader(messages.template(message_id, source_lang))
        found = pattern.fullmatch(text)
        if found is None:
            continue
        params = {name: _nested(found.group(key), lang, depth - 1) for key, name in fields.items()}
        try:
            return _unformatted(target).format(**params)
        except (KeyError, IndexError, ValueError):
            return None
    return None


@functools.cache  # the catalogs' templates: re's own cache of 512 thrashed over them
def _reader(template: str):
    return messages.reader(template)


@functools.lru_cache(maxsize=8192)
def _nested(value: str, lang: str, depth: int) -> str:
    """A parameter's value in `lang` where it is a rendered message of any id, else as it is."""
    if depth <= 0 or " " not in value:
        return value
    for message_id in _sentence_ids():
        found = _relocalised(value, message_id, lang, depth)
        if found is not None:
            return found
    return value


@functools.lru_cache(maxsize=1)
def _sentence_ids() -> tuple:
    """The ids whose English text has words of its own (at least 6 characters outside its
    placeholders, so that it cannot match any text), the most specific first."""

    def literal(template):
        return sum(len(part) for part, *_ in string.Formatter().parse(template))

    english = messages.catalog("en")
    return tuple(sorted((i for i, text in english.items() if literal(text) >= 6), key=lambda i: -literal(english[i])))


def _unformatted(template: str) -> str:
    """`template` without its format specs and conversions: the values read back are text."""
    out = []
    for literal, name, _, _ in string.Formatter().parse(template):
        out.append(literal.replace("{", "{{").replace("}", "}}"))
        if name is not None:
            out.append("{" + name + "}")
    return "".join(out)


def anchor(submission_id: str) -> str:
    """An HTML id for a student's section (ids are file-name-safe already: batch.submission_ids)."""
    return "s-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in submission_id)
