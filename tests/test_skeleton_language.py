"""A student file is in one language: the skeleton generator keeps the chosen section of every
bilingual docstring (`[한국어]` then `[English]`) and the chosen block of every TODO comment, and
changes no code (engine/generate/skeleton.py, `skeleton --lang` and `release --lang`)."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine.generate.skeleton import LANGUAGES, in_language, skeleton_source
from conftest import code_only

HANGUL = re.compile("[\uac00-\ud7a3]")
KOREAN_WORDS = st.lists(
    st.sampled_from(["패딩", "마스크", "어텐션", "헤드", "가중치", "소프트맥스"]), min_size=1, max_size=6
)
ENGLISH_WORDS = st.lists(
    st.sampled_from(["padding", "mask", "attention", "head", "weights", "softmax"]), min_size=1, max_size=6
)


def paragraph(words: list, width: int = 3) -> str:
    return "\n".join(" ".join(words[i : i + width]) for i in range(0, len(words), width))


@st.composite
def bilingual_files(draw):
    ko, en = draw(KOREAN_WORDS), draw(ENGLISH_WORDS)
    ko_todo, en_todo = draw(KOREAN_WORDS), draw(ENGLISH_WORDS)
    indent = "    "
    module = f'"""제목 / Title\n\n[한국어]\n{paragraph(ko)}\n\n    >>> 1 + 1  # 둘\n    2\n\n[English]\n{paragraph(en)}\n\n    >>> 1 + 1  # two\n    2\n"""\n'
    function = f'def f(x):\n{indent}"""[한국어] {" ".join(ko)} [English] {" ".join(en)}."""\n'
    comment = f"{indent}# TODO (step)\n{indent}#   [한국어] {ko_todo[0]}\n"
    comment += "".join(f"{indent}#            {word}\n" for word in ko_todo[1:])
    comment += f"{indent}#   [English] {en_todo[0]}\n" + "".join(f"{indent}#             {w}\n" for w in en_todo[1:])
    body = f"{indent}### BEGIN SOLUTION\n{indent}return 2 * x  # 두 배 / twice\n{indent}### END SOLUTION\n"
    return module + "import math\n\n\n" + function + comment + body, (ko, en, ko_todo, en_todo)


@settings(max_examples=80, deadline=None)
@given(bilingual_files())
def test_each_language_keeps_its_own_text_and_all_the_code(case):
    source, (ko, en, ko_todo, en_todo) = case
    skeleton = skeleton_source(source)
    korean, english = skeleton_source(source, lang="ko"), skeleton_source(source, lang="en")
    assert not HANGUL.search(english)
    for word in en + en_todo:
        assert word in english and word not in korean
    for word in ko + ko_todo:
        assert word in korean
    assert "[한국어]" not in korean + english and "[English]" not in korean + english and "제목" not in korean
    assert ">>> 1 + 1  # 둘" in korean and ">>> 1 + 1  # two" in english
    assert code_only(korean) == code_only(english) == code_only(skeleton)
    assert "# TODO (step)" in korean and "# TODO (step)" in english


def test_a_todo_block_reads_as_one_comment():
    source = (
        "def f():\n    # TODO (s)\n    #   [한국어] 첫 줄\n    #            둘째 줄\n"
        "    #   [English] first line\n    #             second line\n    x = 1\n"
    )
    assert in_language(source, "en") == "def f():\n    # TODO (s)\n    #   first line\n    #   second line\n    x = 1\n"
    assert in_language(source, "ko") == "def f():\n    # TODO (s)\n    #   첫 줄\n    #   둘째 줄\n    x = 1\n"


def test_a_module_docstring_keeps_its_section_with_the_closing_quotes_below():
    source = '"""T / t\n\n[한국어]\n요약.\n\n본문.\n[English]\nSummary.\n\nBody.\n"""\nx = 1\n'
    assert in_language(source, "en") == '"""Summary.\n\nBody.\n"""\nx = 1\n'
    assert in_language(source, "ko") == '"""요약.\n\n본문.\n"""\nx = 1\n'


@pytest.mark.parametrize("lang", ["fr", "", "KO"])
def test_an_unknown_language_is_refused(lang):
    assert lang not in LANGUAGES
    with pytest.raises(ValueError, match="unknown language"):
        in_language("x = 1\n", lang)
