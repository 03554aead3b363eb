"""The kit's generated files, made by one command: `python -m autograder generate` (`--check`
only reports what is out of date). A developer writes the sources; this writes the rest:

* each catalog's template `<domain>.pot`: the ids of its English `.po` (the English catalog is
  where an id is declared, with its comments; the Korean one must have the same ids);
* the compiled `.mo` files, from the `.po` files (messages.py reads only these);
* each assignment's fingerprints.json, from its checks and mistakes (fingerprint_build.py);
* each assignment's examples.wire, the expectations its release's smallest-example search may
  ask for (examples_build.py): made again only where the digest of its sources changed (it runs
  the search for every known mistake, about a minute);
* each assignment's stages.json, the reference's stages on its localisation probes and the known
  mistakes' findings there (stage_build.py);

and the command adds the skeletons and notebooks of `python -m autograder skeleton`.

So a new check is its class (checks/<step>.py, and observers/<step>.py if it observes something
new) and its texts in the assignment's en and ko `.po` files, all in autograder/assignments/<id>/;
everything else follows from this command. Needs Babel (the instructor extra).
"""

import io
import json
import re
from pathlib import Path

from babel.messages.mofile import write_mo

from autograder import KIT
from autograder.engine.checks import messages
from autograder.engine.checks.folders import folder
from autograder.engine.course import config as grading_config
from autograder.engine.generate import catalogs

_HEADER_END = re.compile(r'^msgid ""\nmsgstr ""\n(?:".*"\n)*\n', re.MULTILINE)


def template_text(directory: Path, domain: str) -> str:
    """The `.pot` a catalog's English `.po` implies: the template's own header, then the English
    entries (with their comments) with empty texts."""
    directory = Path(directory)
    english = (directory / messages.DEFAULT_LANGUAGE / "LC_MESSAGES" / f"{domain}.po").read_text(encoding="utf-8")
    template = directory / f"{domain}.pot"
    header_source = template.read_text(encoding="utf-8") if template.is_file() else english
    header = header_source[: _HEADER_END.search(header_source).end()]
    body, in_text = [], False
    for line in english[_HEADER_END.search(english).end() :].splitlines():
        if line.startswith("msgstr "):
            body.append('msgstr ""')
            in_text = True
        elif in_text and line.startswith('"'):
            continue  # the rest of a multi-line English text
        else:
            body.append(line)
            in_text = False
    return header + "\n".join(body).strip("\n") + "\n"


def compiled(po: Path) -> bytes:
    """The `.mo` bytes of a `.po` file, as `pybabel compile` writes them."""
    buffer = io.BytesIO()
    write_mo(buffer, catalogs.read(po))
    return buffer.getvalue()


def _fingerprints(config, thorough):
    """(path, fresh data or None, stale?) of an assignment's fingerprints. Not thorough: compare
    the digest of their sources only (fast); thorough: regenerate and compare."""
    from autograder.engine.generate.fingerprint_build import generate  # late: keeps torch out until it runs
    from autograder.engine.mistakes import fingerprints  # late: keeps torch out until it runs

    path = fingerprints.path_of(config.id)
    if not thorough:
        return path, None, fingerprints.load(config.id).get("sources") != fingerprints.sources_digest(config.id)
    fresh = json.loads(json.dumps(generate(config)))  # as it reads back from the file
    return path, fresh, not fingerprints.same(fingerprints.load(config.id), fresh)


def _stages(config, thorough):
    """(path, fresh data or None, stale?) of an assignment's stored stages, as _fingerprints."""
    from autograder.engine.generate.stage_build import generate  # late: keeps torch out until it runs
    from autograder.engine.mistakes import store  # late: keeps torch out until it runs

    path = store.path_of(config.id)
    stored = store.load(config.id)
    if not thorough:
        wanted = store.sources_digest(config.id) if stored or _has_pipeline(config) else None
        return path, None, stored.get("sources") != wanted
    fresh = json.loads(json.dumps(generate(config)))  # as it reads back from the file
    return path, fresh, not store.same(stored, fresh)


def _has_pipeline(config) -> bool:
    return (folder(config.id) / "mistakes" / "stages.py").is_file()


def stale(thorough: bool = True) -> list:
    """The generated files that differ from what their sources make, as paths relative to the kit.
    `thorough=False` judges the fingerprints by their sources' digest instead of regenerating them."""
    return [path.relative_to(KIT) for path in _run(write=False, thorough=thorough)]


def generate() -> list:
    """Write every generated file that is out of date; returns those written (relative to the kit)."""
    return [path.relative_to(KIT) for path in _run(write=True, thorough=True)]


def _run(write, thorough):

    changed = []
    for directory, domain in messages.CATALOGS:
        template = Path(directory) / f"{domain}.pot"
        text = template_text(directory, domain)
        if not template.is_file() or template.read_text(encoding="utf-8") != text:
            changed.append(template)
            if write:
                template.write_text(text, encoding="utf-8")
    for mo in catalogs.stale_mo_files():
        changed.append(mo)
        if write:
            mo.write_bytes(compiled(mo.with_suffix(".po")))
    for config in grading_config.load_all():
        path, fresh, out_of_date = _fingerprints(config, thorough)
        if out_of_date:
            changed.append(path)
            if write:
                from autograder.engine.mistakes import fingerprints  # late: keeps torch out until it runs

                fingerprints.write(fresh, path)
        from autograder.engine.generate import examples_build  # late: keeps torch out until it runs

        if not examples_build.fresh(config.id):  # after the fingerprints: they say what each mistake fails
            changed.append(examples_build.path_of(config.id))
            if write:
                examples_build.write(examples_build.generate(config), examples_build.path_of(config.id))
        path, fresh, out_of_date = _stages(config, thorough)
        if out_of_date:
            changed.append(path)
            if write:
                from autograder.engine.mistakes import store  # late: keeps torch out until it runs

                store.write(fresh, path)
    return changed
