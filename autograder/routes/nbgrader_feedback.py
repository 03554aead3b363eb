"""The stage of `nbgrader generate_feedback` that keeps the kit out of a student's feedback page.

The kernel that ran the notebook could read nothing of the kit (autograder/sandbox/kernel.py):
this is the second line, for what a kernel could still show (an unconfined kernel the instructor
allowed, a path in a message). In each cell of the feedback, before it becomes HTML:

* every output that shows a line of the kit's instructor files (the reference, every check, the
  known mistakes, grading.yml) that the student was not given (a line of no cell of their
  notebook, nor of the grader their notebook carries) is replaced by a sentence that says so;
* the kit's folder is written `<kit>` wherever an output names it;
* a source line longer than LONG_LINE is cut (the setup cell's grader: a line of 400 KB).
"""

import base64
import binascii
import functools
import io
import re
import zipfile

from nbgrader.preprocessors import NbGraderPreprocessor

from autograder import KIT
from autograder.engine.checks import messages

SHORTEST = 20  # characters: a shorter line (`return x`, `import torch`) tells nothing
LONG_LINE = 2000  # characters of one source line shown at most
SECRET_FILES = ("solutions/**/*.py", "autograder/assignments/**/*.py", "grading.yml")
GRADER_LINE = re.compile(r'^GRADER = "([A-Za-z0-9+/=]+)"', re.M)  # publish/nbgrader_course.py INSTALLER


def lines_of(text: str) -> set:
    return {line.strip() for line in text.splitlines() if len(line.strip()) >= SHORTEST}


@functools.cache
def instructor_lines() -> frozenset:
    """The lines of the kit's instructor files (SECRET_FILES)."""
    found = set()
    for pattern in SECRET_FILES:
        for path in KIT.glob(pattern):
            if path.is_file():
                found |= lines_of(path.read_text(encoding="utf-8", errors="replace"))
    return frozenset(found)


def given_lines(nb) -> set:
    """What the student has: every cell's source, and every file of the grader the setup cell carries."""
    given = set()
    for cell in nb.cells:
        source = cell.get("source", "")
        given |= lines_of(source)
        for match in GRADER_LINE.finditer(source):
            given |= archive_lines(match.group(1))
    return given


def archive_lines(encoded: str) -> set:
    try:
        archive = zipfile.ZipFile(io.BytesIO(base64.b64decode(encoded)))
    except (binascii.Error, zipfile.BadZipFile, ValueError):
        return set()
    found = set()
    for name in archive.namelist():
        if name.endswith((".py", ".yml", ".yaml", ".po", ".md", ".txt")):
            found |= lines_of(archive.read(name).decode("utf-8", errors="replace"))
    return found


def output_texts(output) -> list:
    """The texts an output shows: a stream's, an error's, each textual representation of a result."""
    texts = [output.get("text", ""), output.get("evalue", ""), "\n".join(output.get("traceback", []))]
    for kind, value in output.get("data", {}).items():
        if kind.startswith("text/") or kind.endswith(("json", "javascript")):
            texts.append(value if isinstance(value, str) else "".join(value) if isinstance(value, list) else str(value))
    return [text for text in texts if text]


def without_kit(output, secret: set, kit: str):
    """`output` with the kit's folder written `<kit>`, or a sentence in its place where it shows a
    line of `secret`."""
    if any(line in text for text in output_texts(output) for line in secret):
        return {"output_type": "stream", "name": "stdout", "text": messages.render("feedback_output_removed") + "\n"}
    texts = output_texts(output)
    if not any(kit in text for text in texts):
        return output
    for key in ("text", "evalue"):
        if isinstance(output.get(key), str):
            output[key] = output[key].replace(kit, "<kit>")
    if "traceback" in output:
        output["traceback"] = [line.replace(kit, "<kit>") for line in output["traceback"]]
    for kind, value in output.get("data", {}).items():
        if isinstance(value, str):
            output["data"][kind] = value.replace(kit, "<kit>")
    return output


def cut_long_lines(source: str) -> str:
    return "\n".join(
        line if len(line) <= LONG_LINE else line[:80] + f"…  # {len(line):,} characters, not shown"
        for line in source.split("\n")
    )


class WithoutKit(NbGraderPreprocessor):
    """A stage of generate_feedback (publish/nbgrader_course.py FEEDBACK): see the module."""

    def preprocess(self, nb, resources):
        from nbformat import from_dict  # late: comes with nbgrader

        secret = set(instructor_lines()) - given_lines(nb)
        kit = str(KIT)
        for cell in nb.cells:
            cell.source = cut_long_lines(cell.get("source", ""))
            if cell.cell_type == "code":
                cell.outputs = [from_dict(without_kit(output, secret, kit)) for output in cell.outputs]
        return nb, resources
