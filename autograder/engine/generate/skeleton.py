"""Make the student skeletons from the reference solutions.

In solutions/<package>/*.py every piece students write sits between two marker lines:

        ### BEGIN SOLUTION
        ...reference code...
        ### END SOLUTION

(the markers nbgrader uses). The skeleton keeps everything else and puts, in place of each
region, a line that raises NotImplementedError at the region's indentation. The TODO comment
above a region stays in both files and tells students what to write.

A region that is a ladder of shape changes (`ladder()`: at least LADDER_STEPS lines ending in a
shape comment, `# (B, H, L, d_k)`, then a `return`) keeps its lines, as nanoGPT's `forward`
reads: each assignment with its shape comment and `...` for its right-hand side, the headers of
its `if`s as comments, and its `return` a line that raises NotImplementedError.

A student file is in one language (`lang`, one of LANGUAGES): the reference's texts are written
in both, each docstring as a `[한국어]` section then an `[English]` one, each TODO comment as a
`# [한국어] ...` block then a `# [English] ...` one, and the skeleton keeps the chosen one
(`in_language()`; a docstring keeps its section only, so each section starts with its own
summary line and carries its own worked example).
"""

import ast
import io
import re
import textwrap
import tokenize
from pathlib import Path

BEGIN = re.compile(r"^(\s*)### BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*### END SOLUTION\s*$")
PLACEHOLDER = 'raise NotImplementedError("TODO")'
HEADINGS = {"ko": "[한국어]", "en": "[English]"}  # in the order the reference writes them
LANGUAGES = tuple(HEADINGS)
DEFAULT_LANGUAGE = "ko"  # the course is Korean (shared/seeds): what `skeleton` and `release` write
LADDER_STEPS = 3
SHAPE_COMMENT = re.compile(r"#\s*\(")
_TAGGED_COMMENT = re.compile(r"^(\s*#\s*)\[(한국어|English)\]\s?(.*)$")
_KIND = {"[한국어]": "ko", "[English]": "en"}


def skeleton_source(source, name="<source>", lang=None):
    """The source with each solution region replaced by a NotImplementedError line (a ladder
    region by its ladder, see `ladder()`); with `lang`, its texts in that language only."""
    out, indent, region = [], None, []
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        begin = BEGIN.match(line)
        if begin:
            if indent is not None:
                raise ValueError(f"{name}:{number}: BEGIN SOLUTION inside another region")
            indent, region = begin.group(1), []
        elif END.match(line):
            if indent is None:
                raise ValueError(f"{name}:{number}: END SOLUTION without BEGIN")
            rungs = ladder("".join(region))
            out.append(
                "".join(f"{indent}{rung}\n" if rung else "\n" for rung in rungs)
                if rungs
                else f"{indent}{PLACEHOLDER}\n"
            )
            indent = None
        elif indent is None:
            out.append(line)
        else:
            region.append(line)
    if indent is not None:
        raise ValueError(f"{name}: BEGIN SOLUTION without END")
    text = "".join(out)
    return text if lang is None else in_language(text, lang)


def solution_regions(source):
    """The code inside each solution region (what a release must never contain)."""
    regions, current = [], None
    for line in source.splitlines():
        if BEGIN.match(line):
            current = []
        elif END.match(line):
            regions.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return regions


def _comments(source):
    """{line number: the comment that ends it} of a piece of Python source."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string
    return found


def _simple_target(target):
    if isinstance(target, ast.Tuple):
        return all(_simple_target(element) for element in target.elts)
    return isinstance(target, ast.Name) or (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name))


def ladder(region):
    """The skeleton lines of a solution region that is a ladder of shape changes (without the
    region's indentation; "" for a blank line), or None where it is not one.

    A ladder: only assignments to names or attributes, `if`s and `return`s, a `return` last, and
    at least LADDER_STEPS of its lines end in a shape comment. Each assignment keeps its targets
    and its comment, with `...` for its value (one per name a tuple unpacks: the lines still run
    up to the `return`); each `if` header becomes a comment, as its lines run unconditionally
    now; each `return` becomes the NotImplementedError line, its comment kept after `# return`."""
    code = textwrap.dedent(region)
    try:
        statements = ast.parse(code).body
    except SyntaxError:
        return None
    lines = code.splitlines()
    comments = _comments(code)
    if not statements or not isinstance(statements[-1], ast.Return):
        return None
    if sum(bool(SHAPE_COMMENT.match(comment)) for comment in comments.values()) < LADDER_STEPS:
        return None
    rungs, last = [], None

    def comment_of(node):
        found = [comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments]
        return found[-1] if found else ""

    def walk(body):
        nonlocal last
        for node in body:
            if last is not None and node.lineno > last + 1 and not lines[last].strip():
                rungs.append("")
            last = getattr(node, "end_lineno", node.lineno)
            comment = comment_of(node)
            if isinstance(node, ast.Assign) and all(_simple_target(t) for t in node.targets):
                width = len(node.targets[-1].elts) if isinstance(node.targets[-1], ast.Tuple) else 1
                targets = " = ".join(ast.get_source_segment(code, target) for target in node.targets)
                rungs.append(f"{targets} = {', '.join(['...'] * width)}" + (f"  {comment}" if comment else ""))
            elif isinstance(node, ast.Return):
                said = comment.lstrip("#").strip()
                rungs.append(f"{PLACEHOLDER}  # return" + (f" {said}" if said else ""))
            elif isinstance(node, ast.If):
                rungs.append(f"# {lines[node.lineno - 1].strip()}")
                last = node.lineno
                walk(node.body)
                if node.orelse:
                    if not (
                        isinstance(node.orelse[0], ast.If)
                        and lines[node.orelse[0].lineno - 1].lstrip().startswith("elif ")
                    ):
                        rungs.append("# else:")  # an `elif` says its own header
                    walk(node.orelse)
            else:
                raise _NotALadder
        return rungs

    try:
        return walk(statements)
    except _NotALadder:
        return None


class _NotALadder(Exception):
    pass


def _docstring_lines(source):
    """(first, last) line numbers, 1-based, of every docstring in `source`."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                spans.append((first.lineno, first.end_lineno))
    return sorted(spans)


def section(text, lang):
    """The `lang` section of a text written as `[한국어] ... [English] ...` (what comes before the
    first heading is the bilingual title, left out), or the text itself where it has no sections."""
    headings = list(HEADINGS.values())
    if not all(heading in text for heading in headings):
        return text
    start = text.index(HEADINGS[lang]) + len(HEADINGS[lang])
    later = [text.index(h) for h in headings if text.index(h) > text.index(HEADINGS[lang])]
    return text[start : min(later)] if later else text[start:]


def _docstring_in_language(lines, lang):
    """The lines of one docstring (its quotes included) in one language."""
    text = "".join(lines)
    quote = re.match(r'\s*[rRuU]?("""|\'\'\')', text)
    if quote is None or not all(heading in text for heading in HEADINGS.values()):
        return lines
    opening = text[: quote.end()]
    closing = text.rstrip().rsplit(quote.group(1), 1)
    inner = text[quote.end() : len(closing[0])]
    indent = re.match(r"\s*", opening).group(0)
    kept = section(inner, lang).strip()
    multi_line = "\n" in kept
    return [opening + kept + (f"\n{indent}" if multi_line else "") + quote.group(1) + "\n"]


def in_language(source, lang):
    """`source` with each bilingual docstring and TODO comment in language `lang` only."""
    if lang not in HEADINGS:
        raise ValueError(f"unknown language {lang!r}: one of {', '.join(LANGUAGES)}")
    lines = source.splitlines(keepends=True)
    spans = {first: last for first, last in _docstring_lines(source)}
    out, number, block = [], 1, None  # block: (the comment's prefix, its language) of a tagged comment
    while number <= len(lines):
        line = lines[number - 1]
        if number in spans:
            out += _docstring_in_language(lines[number - 1 : spans[number]], lang)
            number, block = spans[number] + 1, None
            continue
        tagged = _TAGGED_COMMENT.match(line)
        continued = block is not None and re.match(rf"{re.escape(block[0])}\s+\S", line)
        if tagged:
            block = (tagged.group(1), _KIND[f"[{tagged.group(2)}]"])
            if block[1] == lang:
                out.append(f"{tagged.group(1)}{tagged.group(3)}\n")
        elif continued:
            if block[1] == lang:
                out.append(f"{block[0]}{line.strip()[1:].strip()}\n")
        else:
            block = None
            out.append(line)
        number += 1
    return "".join(out)


def write_skeletons(solutions, assignments, dry_run=False, lang=DEFAULT_LANGUAGE):
    """Regenerate assignments/*.py from solutions/*.py, their texts in language `lang` (None
    keeps both); return the paths that changed (or would)."""
    changed = []
    for source_path in sorted(Path(solutions).glob("*.py")):
        target = Path(assignments) / source_path.name
        text = skeleton_source(source_path.read_text(encoding="utf-8"), str(source_path), lang=lang)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            changed.append(target)
            if not dry_run:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
    return changed
