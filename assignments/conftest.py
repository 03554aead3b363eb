"""pytest set-up for the public checks: grades the mha/ package next to this file and prints a
per-step score table at the end of `pytest assignments/` (add --cuda to check the cuda step on a
simulated GPU when there is no real one)."""
from pathlib import Path

from autograder.pytest_plugin import (PLUGIN_NAME, StudentPlugin, grading, mha, pytest_addoption,  # noqa: F401
                                      pytest_collection_modifyitems)


def pytest_configure(config):
    plugin = StudentPlugin(Path(__file__).parent, simulate_cuda=config.getoption("cuda"))
    config.pluginmanager.register(plugin, PLUGIN_NAME)
