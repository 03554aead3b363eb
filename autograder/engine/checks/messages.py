"""Every student-facing sentence, keyed by id, in gettext catalogs (English and Korean).

Checks never build sentences themselves: they return a message id and its parameters, and
`render` turns those into text in the chosen language. The texts live in gettext catalogs:
msgid = the message id (e.g. `raised`, `diagnosis.scale_by_d_model`), msgstr = the text with
Python `{name}` placeholders (a format spec such as `{seconds:g}` is allowed). Two domains:

* `autograder`: the engine's messages, autograder/locale/<lang>/LC_MESSAGES/autograder.po;
* `assignment`: each assignment's own messages (its mistakes, probes and checks),
  autograder/assignments/<id>/locale/<lang>/LC_MESSAGES/assignment.po.

The assignments' catalogs are looked up before the engine's, and a language's catalogs before the
English ones, so a missing translation shows in English rather than failing.

The language: `lang` given to `render` (the routes' `--lang ko|en`, which set MHA_LAB_LANG for
this process and the processes it starts), else the environment variable MHA_LAB_LANG, else the
locale (LC_ALL, LC_MESSAGES, LANG: `ko...` is Korean), else English. An unknown language is English.

Editing the texts (instructors, developers; with Babel): docs/development.md, "Messages in English and
Korean": `pybabel extract -F babel.cfg` with the keywords of catalogs.KEYWORDS lists the ids the
code passes literally (render, template, Fail, ContractError, SubmissionError); a new id goes into
its domain's `.pot` template, then `pybabel update --no-wrap -i autograder/locale/autograder.pot
-d autograder/locale -D autograder` (the same for the assignment), both texts are filled in, and
the `.mo` files that this module reads are compiled and committed with them:

    pybabel compile -d autograder/locale -D autograder
    pybabel compile -d autograder/assignments/<id>/locale -D assignment

Ids built at run time (`diagnosis.<id>`, `concept.<step>[.<check>]`, `step_title.<assignment>.<step>`,
`assignment_title.<assignment>`) are not extracted. tests/test_i18n.py fails when a `.mo` file is
older than its `.po`, an id lacks a translation or its placeholders differ between languages, an
extracted id is in no template its code may use, or a template id is used by no code.
"""

import contextlib
import functools
import gettext
import os
import re
import string
from pathlib import Path

from autograder.engine.checks import folders

GRADER = Path(__file__).resolve().parents[2]  # autograder/
LANGUAGES = ("en", "ko")
DEFAULT_LANGUAGE = "en"
LANGUAGE_VARIABLE = "MHA_LAB_LANG"
# (locale directory, gettext domain), looked up in this order: the assignments', then the engine's.
CATALOGS = (
    *((folders.folder(assignment_id) / "locale", "assignment") for assignment_id in folders.known()),
    (GRADER / "locale", "autograder"),
)


def language(lang: str | None = None) -> str:
    """The language to speak: `lang` if given, else MHA_LAB_LANG, else the locale; one of
    LANGUAGES (anything else is English)."""
    for value in (
        lang,
        os.environ.get(LANGUAGE_VARIABLE),
        os.environ.get("LC_ALL"),
        os.environ.get("LC_MESSAGES"),
        os.environ.get("LANG"),
    ):
        if value:
            code = value.replace("-", "_").split("_")[0].split(".")[0].lower()
            return code if code in LANGUAGES else DEFAULT_LANGUAGE
    return DEFAULT_LANGUAGE


class _Missing(gettext.NullTranslations):
    """The end of a fallback chain: an id no catalog has is an error (a KeyError, as a dict
    lookup gives), not the id printed as if it were text."""

    def gettext(self, message):
        raise KeyError(message)


@functools.cache
def translations(lang: str, catalogs: tuple = CATALOGS) -> gettext.NullTranslations:
    """The catalogs of `lang`, then the English ones, chained as gettext fallbacks (read once
    per language: a pure function of its arguments and the `.mo` files)."""
    chain = gettext.NullTranslations()
    for code in dict.fromkeys((lang, DEFAULT_LANGUAGE)):
        for directory, domain in catalogs:
            chain.add_fallback(gettext.translation(domain, str(directory), languages=[code], fallback=True))
    chain.add_fallback(_Missing())
    return chain


def template(message_id: str, lang: str | None = None) -> str:
    """The text of `message_id` with its placeholders unfilled (KeyError for an unknown id)."""
    return translations(language(lang)).gettext(message_id)


def template_or(message_id: str, default: str, lang: str | None = None) -> str:
    """The text of `message_id`, or `default` where no catalog has it (a title an assignment's
    catalog may translate: `assignment_title.<id>`, `step_title.<id>.<step>`)."""
    try:
        return template(message_id, lang)
    except KeyError:
        return default


def title(message_id: str, written: str, lang: str | None = None) -> str:
    """A title grading.yml `written` (an assignment's or a step's), in the chosen language where
    the assignment's catalog translates it: `message_id` (`assignment_title.<id>`,
    `step_title.<id>.<step>`) whose English text is that title. A title the instructor has changed
    since has no translation yet, and stays as written."""
    if template_or(message_id, None, "en") != written:
        return written
    return template_or(message_id, written, lang)


def render(message_id: str, lang: str | None = None, **params) -> str:
    """The sentence for `message_id` in the chosen language (see `language`), with `params`
    filled in."""
    return template(message_id, lang).format(**params)


def reader(template: str):
    """({group: placeholder name}, a regex matching every text `template` renders to): reads a
    rendered message's parameters back, as text (the class report's relocalising, a verdict's
    evidence where only the message was kept)."""
    fields, parts = {}, []
    for literal, name, _, _ in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if name is None:
            continue
        key = "p" + "".join(c if c.isalnum() else "_" for c in name)
        if key in fields:
            parts.append(f"(?P={key})")
        else:
            fields[key] = name
            parts.append(f"(?P<{key}>.*?)")
    return fields, re.compile("".join(parts), re.S)


def concept(step_id: str, check_id: str | None = None, lang: str | None = None) -> str | None:
    """Where the student's skeleton teaches what check `check_id` of step `step_id` tests, in the
    chosen language: the text of `concept.<step>.<check>`, else of `concept.<step>` (a file and the
    opening words of its paragraph: `<package>/<file>.py, "<opening words>"`), from the
    assignment's catalog; None when the assignment names none. Check-level ids are for public
    checks only: the student release ships every concept id."""
    for message_id in ((f"concept.{step_id}.{check_id}",) if check_id else ()) + (f"concept.{step_id}",):
        try:
            return template(message_id, lang)
        except KeyError:
            continue
    return None


def catalog(lang: str = DEFAULT_LANGUAGE, catalogs: tuple = CATALOGS) -> dict:
    """Every message of `lang` as {id: text}, an assignment's over the engine's (for tests and
    tools; `render` does not use it)."""
    merged = {}
    for directory, domain in reversed(catalogs):
        found = gettext.find(domain, str(directory), languages=[lang])
        if found:
            with open(found, "rb") as f:
                merged.update((k, v) for k, v in gettext.GNUTranslations(f)._catalog.items() if k)
    return merged


def use_language(lang: str | None) -> str | None:
    """Speak `lang` in this process and in the processes it starts (the `--lang` options): sets
    MHA_LAB_LANG, and returns its previous value (for `restore_language`). None changes nothing."""
    previous = os.environ.get(LANGUAGE_VARIABLE)
    if lang is not None:
        os.environ[LANGUAGE_VARIABLE] = lang
    return previous


def restore_language(previous: str | None) -> None:
    """Undo `use_language`: MHA_LAB_LANG back to `previous` (None: unset)."""
    if previous is None:
        os.environ.pop(LANGUAGE_VARIABLE, None)
    else:
        os.environ[LANGUAGE_VARIABLE] = previous


@contextlib.contextmanager
def speaking(lang: str | None):
    """`use_language(lang)` for the duration of a with block (the notebook's `check_step(lang=)`)."""
    if lang is None:
        yield
        return
    previous = use_language(lang)
    try:
        yield
    finally:
        restore_language(previous)
