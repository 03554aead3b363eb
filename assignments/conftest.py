"""pytest set-up for the public checks: grades the packages next to this file (mha/, ...) and
prints a per-step score table at the end of `pytest assignments/` (add --cuda to check the cuda
step on a simulated GPU when there is no real one, --lang ko for Korean)."""
from pathlib import Path

from autograder.routes.pytest_plugin import (PLUGIN_NAME, StudentPlugin, lab, pytest_addoption,  # noqa: F401
                                             pytest_collection_modifyitems, pytest_report_collectionfinish)


def pytest_configure(config):
    plugin = StudentPlugin(Path(__file__).parent, simulate_cuda=config.getoption("cuda"),
                           lang=config.getoption("lang"))
    config.pluginmanager.register(plugin, PLUGIN_NAME)
