"""The student release's messages carry only the diagnoses its public checks can give."""

from autograder.engine.checks import messages
from autograder.engine.course import config as grading_config
from autograder.engine.generate.catalogs import write_student_catalogs
from autograder.engine.mistakes.diagnosis import public_message_ids
from autograder.engine.mistakes.fingerprints import load
from autograder.publish.student_release import student_message

ONLY_PADDING = """\
id: mha
assignment: Padding only
steps:
  - id: padding
    title: Padding
    points: 10
"""


def released_diagnoses(tmp_path, keep):
    """The diagnosis ids the release's compiled English catalogs hold, when `keep` is kept."""
    write_student_catalogs(tmp_path, lambda message_id: student_message(message_id, keep))
    released = tuple(
        (tmp_path / directory.relative_to(messages.GRADER), domain) for directory, domain in messages.CATALOGS
    )
    return {i.removeprefix("diagnosis.") for i in messages.catalog("en", released) if i.startswith("diagnosis.")}


def test_the_catalog_follows_the_steps_released(tmp_path):
    config = grading_config.parse(ONLY_PADDING)
    kept = released_diagnoses(tmp_path, public_message_ids(config))
    assert kept == public_message_ids(config)
    masking = set(load("mha")["steps"]["masking"]["order"]) - set(load("mha")["steps"]["padding"]["order"])
    assert masking and not kept & masking  # another step's mistakes: not in a padding-only release


def test_a_mistake_seen_only_by_hidden_checks_is_not_described(config):
    every = {i.removeprefix("diagnosis.") for i in messages.catalog("en") if i.startswith("diagnosis.")}
    kept = public_message_ids(config)
    assert kept < every and "causal_ignores_device" in every - kept
