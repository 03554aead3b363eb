"""What the class report's summary says before any detail: code that does not parse is listed
there, each student once and each error once (it names no misconception, so it was nowhere)."""

import re

import pytest

from autograder.publish.report import data as report
from autograder.publish.report.html import render
from test_report import check, entry, good, needs, result, step

SAID = "mha/heads.py has a syntax error on line 3: '(' was never closed"


def broken():
    """heads.py does not parse: both steps that need it fail every check with the same message."""
    failing = [check("basic", False, message_id="syntax_error", message=SAID)]
    return result([step("split_heads", failing), step("multi_head_attention", list(failing))])


def test_syntax_errors_are_in_the_summary_once_per_student():
    summary = report.summary([entry("ann", good()), entry("bo", broken()), entry("cy", broken())])
    assert summary["syntax_errors"] == [{"id": "bo", "what": [SAID]}, {"id": "cy", "what": [SAID]}]
    assert report.summary([entry("ann", good())])["syntax_errors"] == []


@needs("jinja2")
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_html_summary_lists_them_before_the_details(lang):
    data = report.build([entry("ann", good()), entry("bo", broken())])
    html = render(data, lang)
    summary = html[: html.index('<section id="misconceptions">')]
    assert SAID.replace("'", "&#39;") in summary and 'href="#' in summary


STEPS = ("padding", "embedding", "qkv_projection", "split_heads", "attention", "masking", "output", "module")


def a_student(i: int) -> dict:
    """A result as a class has them: eight steps of five checks, some failing with a message."""
    steps = []
    for n, sid in enumerate(STEPS):
        checks = [
            check(
                f"check_{k}",
                (i + n + k) % 4 != 0,
                "public" if k < 3 else "hidden",
                message_id="values",
                message=f"values out of tolerance at index ({k}, {n}): expected 0.{i}{k}, got 1.{n}{k}",
            )
            for k in range(5)
        ]
        steps.append(step(sid, checks, ["scale_by_d_model"] if (i + n) % 5 == 0 else ()))
    return result(steps)


def a_class(size: int) -> list:
    """`size` students: every tenth with a syntax error."""
    return [entry(f"s{i:03d}", broken() if i % 10 == 0 else a_student(i)) for i in range(size)]


def shown_before_unfolding(html: str) -> str:
    """The page as it reads before anything is unfolded: each <details> only its <summary>."""
    folded = re.compile(r"<details\b[^>]*>\s*(<summary>.*?</summary>)(?:(?!<details\b).)*?</details>", re.S)
    previous = None
    while previous != html:  # innermost first
        previous, html = html, folded.sub(r"\1", html)
    return re.sub(r"<(style|svg)\b.*?</\1>", "", html, flags=re.S)


@needs("jinja2")
def test_the_report_stays_readable_for_a_large_class():
    """The report of 10 students was 18,600 px tall: every student's whole feedback open. Per
    student, what reads before unfolding is one row of the table and one line of its section,
    so 200 students add little more than 200 table rows (measured as text, from 20 to 200)."""
    small, large = (shown_before_unfolding(render(report.build(a_class(size)), "en")) for size in (20, 200))
    per_student = (len(large) - len(small)) / 180
    full = render(report.build(a_class(200)), "en")
    assert per_student < len(full) / 200 / 3, (per_student, len(full) / 200)  # most of it folded away
    assert per_student < 1500, per_student  # about a row of the table, a line of its section, its links
