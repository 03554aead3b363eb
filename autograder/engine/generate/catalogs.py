"""The message catalogs' upkeep, for instructors and the kit's tests (needs Babel; students'
copies read the compiled `.mo` files with the standard library only, see messages.py).

* `po_files()`: every `.po` file of the catalogs messages.py reads;
* `problems()`: what is wrong in the `.po` files: an id missing from a language or the template,
  an empty or fuzzy translation, placeholders that differ from the English text;
* `stale_mo_files()`: the `.mo` files that do not hold what their `.po` says (run
  `pybabel compile`, see messages.py);
* `write_student_catalogs(out, keep)`: compiled catalogs for a student release, without the
  messages a student's run can never give (`keep` decides), so that their texts do not
  describe what the hidden checks look for;
* `extracted_ids()`: the ids the code passes literally (what `pybabel extract -F babel.cfg` with
  KEYWORDS lists), `unknown_ids()`: those its domain's template lacks, `unused_ids()`: template
  ids no code uses (stale).
"""

import ast
import string
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import read_mo, write_mo
from babel.messages.pofile import read_po

from autograder.engine.checks import messages


def po_files(catalogs: tuple = messages.CATALOGS) -> list:
    """Every <directory>/<lang>/LC_MESSAGES/<domain>.po, in CATALOGS order."""
    return [
        path for directory, domain in catalogs for path in sorted(Path(directory).glob(f"*/LC_MESSAGES/{domain}.po"))
    ]


def read(path: Path) -> Catalog:
    """A `.po` (or, by its suffix, `.mo`) file as a Babel catalog."""
    with open(path, "rb") as f:
        return read_mo(f) if Path(path).suffix == ".mo" else read_po(f)


def texts(catalog: Catalog) -> dict:
    """{msgid: msgstr} of a catalog, without its header; fuzzy entries count as untranslated
    (gettext does not compile them), so they are left out."""
    return {m.id: m.string for m in catalog if m.id and not m.fuzzy}


def placeholders(text: str) -> set:
    """The `{name:spec!conversion}` fields of a text, as (name, spec, conversion) triples."""
    return {
        (name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(text) if name is not None
    }


def problems(catalogs: tuple = messages.CATALOGS) -> list:
    """Sentences naming each defect of the catalogs (none: every id of a domain's template has a
    non-empty, non-fuzzy text in every language, with the English text's placeholders)."""
    found = []
    for directory, domain in catalogs:
        template = Path(directory) / f"{domain}.pot"
        ids = set(texts(read(template))) if template.is_file() else None
        languages = {}
        for lang in messages.LANGUAGES:
            po = Path(directory) / lang / "LC_MESSAGES" / f"{domain}.po"
            if not po.is_file():
                found.append(f"{po}: missing")
                continue
            catalog = read(po)
            if catalog.fuzzy:
                found.append(f"{po}: the header is marked fuzzy (pybabel compile would skip the file)")
            for message in catalog:
                if message.id and message.fuzzy:
                    found.append(f"{po}: {message.id}: marked fuzzy")
                elif message.id and not message.string:
                    found.append(f"{po}: {message.id}: no translation")
            languages[lang] = (po, {m.id: m.string for m in catalog if m.id})
        english = languages.get(messages.DEFAULT_LANGUAGE, (None, {}))[1]
        ids = set(english) if ids is None else ids
        for lang, (po, entries) in languages.items():
            for missing in sorted(ids - set(entries)):
                found.append(f"{po}: {missing}: missing")
            for extra in sorted(set(entries) - ids):
                found.append(f"{po}: {extra}: not in {template.name}")
            if lang == messages.DEFAULT_LANGUAGE:
                continue
            for message_id, text in entries.items():
                try:
                    differ = bool(text and english.get(message_id)) and placeholders(text) != placeholders(
                        english[message_id]
                    )
                except ValueError as error:  # a lone brace, an unclosed field
                    found.append(f"{po}: {message_id}: not a format string ({error})")
                    continue
                if differ:
                    found.append(
                        f"{po}: {message_id}: placeholders {sorted(placeholders(text), key=str)} differ "
                        f"from the English {sorted(placeholders(english[message_id]), key=str)}"
                    )
    return found


def stale_mo_files(catalogs: tuple = messages.CATALOGS) -> list:
    """The `.mo` files that are missing or differ from their `.po` file."""
    stale = []
    for po in po_files(catalogs):
        mo = po.with_suffix(".mo")
        if not mo.is_file() or texts(read(mo)) != {k: v for k, v in texts(read(po)).items() if v}:
            stale.append(mo)
    return stale


def write_student_catalogs(grader: Path, keep, catalogs: tuple = messages.CATALOGS) -> list:
    """Compile the catalogs into the student release's `grader` directory (the copy of
    autograder/), at the same places relative to it, keeping the ids for which `keep(id)` is
    true. Only `.mo` files: what `render` reads. Returns the files written."""
    written = []
    root = messages.GRADER
    for po in po_files(catalogs):
        source = read(po)
        kept = Catalog(locale=source.locale, domain=source.domain, charset="utf-8", fuzzy=False)
        kept.mime_headers = source.mime_headers
        for message in source:
            if message.id and keep(message.id):
                kept.add(message.id, message.string)
        out = Path(grader) / po.with_suffix(".mo").relative_to(root)
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "wb") as f:
            write_mo(f, kept)
        written.append(out)
    return written


# The calls whose first argument is a message id (babel.cfg shows the pybabel command).
KEYWORDS = ("render", "template", "Fail", "ContractError", "SubmissionError")
EXTRACTION_CONFIG = messages.GRADER.parent / "babel.cfg"
# Ids built at run time from grading.yml's ids: `<prefix><assignment>...`, or `concept.<step>[.<check>]`.
BUILT_FROM_GRADING_YML = ("assignment_title.", "step_title.", "concept.")
# Ids built at run time from an assignment's stored stages (engine/mistakes/localise.py): its stages,
# operations, probes and their calls, the parts of its masks; tests/test_localise.py holds them to
# the store both ways (each one the store names is there, each one there is named).
BUILT_FROM_STAGES = ("stage.", "skip.", "part.", "scenario.", "other.", "call.")


def extracted_ids(directory: Path = messages.GRADER) -> dict:
    """{message id: ["<file>:<line>", ...]}: what Babel extracts under `directory` with babel.cfg
    and KEYWORDS, i.e. every id the code passes literally as the first argument of such a call."""
    with open(EXTRACTION_CONFIG, encoding="utf-8") as f:
        method_map, options_map = parse_mapping_cfg(f, str(EXTRACTION_CONFIG))
    found = {}
    for filename, line, message_id, _, _ in extract_from_dir(
        str(directory), method_map, options_map, keywords=dict.fromkeys(KEYWORDS)
    ):
        found.setdefault(message_id, []).append(f"{filename}:{line}")
    return found


def _template_ids(directory, domain) -> set:
    template = Path(directory) / f"{domain}.pot"
    return set(texts(read(template))) if template.is_file() else set()


def unknown_ids(directory: Path = messages.GRADER, catalogs: tuple = messages.CATALOGS) -> list:
    """Sentences naming each id extracted under `directory` (the kit's autograder/) that the
    templates it may use lack: the code of an assignment's folder may use the engine's template
    (the last of `catalogs`) and its own, any other code only the engine's. A probe's
    `Fail(<id>)` names its diagnosis: `diagnosis.<id>` counts too."""
    directory = Path(directory)
    engine = _template_ids(*catalogs[-1])
    own = {
        Path(locale).parent.relative_to(messages.GRADER): _template_ids(locale, domain)
        for locale, domain in catalogs[:-1]
    }
    found = []
    for message_id, places in sorted(extracted_ids(directory).items()):
        for place in places:
            relative = (directory / place.rsplit(":", 1)[0]).relative_to(directory)
            allowed = engine | next((ids for folder, ids in own.items() if relative.is_relative_to(folder)), set())
            if message_id not in allowed and f"diagnosis.{message_id}" not in allowed:
                found.append(f"{place}: {message_id}: in no template it may use")
    return found


def code_strings(directory: Path = messages.GRADER) -> set:
    """Every string literal of the Python code under `directory`."""
    return {
        node.value
        for path in Path(directory).rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def unused_ids(directory: Path = messages.GRADER, catalogs: tuple = messages.CATALOGS) -> list:
    """Sentences naming each template id that no code under `directory` uses: not a string literal
    of the code (extracted, or kept in data), nor `diagnosis.<x>` for a literal x (a mistake's or
    a probe's id). Ids built from grading.yml's ids (BUILT_FROM_GRADING_YML) are left to their
    own checks (tests/test_i18n.py)."""
    strings = code_strings(directory)
    return [
        f"{Path(locale) / domain}.pot: {message_id}: no code uses it"
        for locale, domain in catalogs
        for message_id in sorted(_template_ids(locale, domain))
        if message_id not in strings
        and message_id.removeprefix("diagnosis.") not in strings
        and not message_id.startswith(BUILT_FROM_GRADING_YML + BUILT_FROM_STAGES)
    ]
