"""Text that came from student code, made safe to show: bounded in length, with no character
that a terminal, a CSV reader, a browser or a log viewer would act on.

    printable("\x1b[2J100.00 / 100\r", 300)   # '\\x1b[2J100.00 / 100\\r'

Control characters (C0 but newline and tab, DEL, C1), the Unicode bidirectional overrides and
isolates (which reorder what a reader sees: "Trojan source") and line/paragraph separators are
written out as escapes, so what the code printed is still legible but can no longer clear a
screen, move the cursor, forge a table or hide text.
"""

import re

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
ONE_LINE = re.compile(r"[\r\n\t]+")


def _escape(match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text, limit: int = None, one_line: bool = False) -> str:
    """`text` (any object: its str) with unsafe characters escaped, cut to `limit` characters
    (with a mark where it was cut); `one_line`: newlines and tabs become spaces too."""
    text = text if isinstance(text, str) else str(text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + " [...]"
    text = _UNSAFE.sub(_escape, text)
    if one_line:
        text = ONE_LINE.sub(" ", text)
    return text


def printable_values(value, limit: int = 300, depth: int = 0):
    """`value` with every string in it (in lists, tuples and dicts, keys too) made printable.
    Nesting is bounded by what the wire lets through; past 32 levels a value is left as it is."""
    if isinstance(value, str):
        return printable(value, limit)
    if depth > 32:
        return value
    if isinstance(value, dict):
        return {
            (printable(k, limit) if isinstance(k, str) else k): printable_values(v, limit, depth + 1)
            for k, v in value.items()
        }
    if type(value) in (list, tuple):
        return type(value)(printable_values(v, limit, depth + 1) for v in value)
    return value


# ---------------------------------------------------------------------------- spreadsheet cells

# What makes a spreadsheet read a cell as a formula (or start one): CSV injection.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")
QUOTE = "'"  # Excel's and LibreOffice's "this is text" mark
# A number written as text ("-5", "75.00", "+1e3"): a spreadsheet reads it as that number, nothing else.
PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def spreadsheet_cell(value):
    """`value` as a CSV cell a spreadsheet shows as what it is: a number as it is, text that a
    spreadsheet would read as a formula (it starts, or starts after spaces, with =, +, -, @, a
    tab, a carriage return or a newline, or their full-width forms) with a quote before it, unless
    it is a plain number ("-5", "75.00"). Text that starts with a quote gets one more, so that
    spreadsheet_text reads back every value."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = str(value)
    if PLAIN_NUMBER.fullmatch(text):
        return text
    if text[:1] == QUOTE or text[:1] in FORMULA_STARTS or text.lstrip(" ")[:1] in FORMULA_STARTS:
        return QUOTE + text
    return text


def spreadsheet_text(cell: str) -> str:
    """The text spreadsheet_cell wrote as `cell`."""
    return cell[1:] if cell[:1] == QUOTE else cell


def csv_table(rows, line_end: str = "\r\n") -> str:
    """The text of a CSV file of `rows` (lists of cells), every cell through spreadsheet_cell:
    the one place the kit writes CSV (tests/test_csv_cells.py holds every writer to it)."""
    import csv  # late: not at the start of a notebook's check cell
    import io

    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator=line_end)
    for row in rows:
        writer.writerow([spreadsheet_cell(cell) for cell in row])
    return buffer.getvalue()


def csv_records(lines) -> list:
    """The rows of a CSV file the kit wrote (csv_table), as dicts by the header's names, each
    cell read back with spreadsheet_text. `lines`: an open file or a list of lines."""
    import csv  # late: not at the start of a notebook's check cell

    return [spreadsheet_record(row) for row in csv.DictReader(lines)]


def spreadsheet_record(row: dict) -> dict:
    """A row of csv.DictReader over a CSV the kit wrote: each key and cell as it was given to
    csv_table (spreadsheet_text)."""
    return {
        spreadsheet_text(k) if isinstance(k, str) else k: spreadsheet_text(v) if isinstance(v, str) else v
        for k, v in row.items()
    }
