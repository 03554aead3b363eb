"""pytest set-up for the public checks: grades the mha/ package next to this file and prints a
per-step score table at the end of `pytest assignments/`."""
from pathlib import Path

from autograder.pytest_plugin import PLUGIN_NAME, StudentPlugin, grading, mha  # noqa: F401 (fixtures)


def pytest_configure(config):
    config.pluginmanager.register(StudentPlugin(Path(__file__).parent), PLUGIN_NAME)
