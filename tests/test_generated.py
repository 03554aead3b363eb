"""The generated files (catalog templates, compiled catalogs, fingerprints) are what their sources
make: else `python -m autograder generate` (engine/generate/generated.py). The slow test of
test_diagnosis_catalog.py regenerates the fingerprints themselves; here their sources' digest counts."""

import shutil

from autograder.engine.checks import messages
from autograder.engine.generate import generated


def test_no_generated_file_is_out_of_date():
    assert generated.stale(thorough=False) == [], "run `python -m autograder generate`"


def test_a_message_added_to_the_english_catalog_makes_the_template_out_of_date(tmp_path):
    directory, domain = messages.CATALOGS[0]
    copied = shutil.copytree(directory, tmp_path / "locale")
    before = generated.template_text(copied, domain)
    assert before == (copied / f"{domain}.pot").read_text(encoding="utf-8")
    english = copied / "en" / "LC_MESSAGES" / f"{domain}.po"
    english.write_text(english.read_text(encoding="utf-8") + '\nmsgid "new.id"\nmsgstr "a new\\n"\n"text"\n')
    after = generated.template_text(copied, domain)
    assert after != before and after.endswith('msgid "new.id"\nmsgstr ""\n')
