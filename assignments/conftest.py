"""pytest set-up for the public checks: grades the packages next to this file (mha/, ...) and
prints a per-step score table at the end of `pytest assignments/` (add --cuda to check the cuda
step on a simulated GPU when there is no real one, --lang ko for Korean)."""
import gc
from pathlib import Path

# The grader loads torch: hundreds of thousands of objects kept for the whole run, with no garbage
# worth a cyclic collection among them. Left on, the collector makes full passes over them as they
# load (0.2 to 0.3 s, which `import torch` alone never spends); paused, then they are frozen out
# of its later passes (still freed by reference counting).
collecting = gc.isenabled()
gc.disable()
try:
    from autograder.routes.pytest_plugin import (PLUGIN_NAME, StudentPlugin, lab, pytest_addoption,  # noqa: F401
                                                 pytest_collection_modifyitems, pytest_report_collectionfinish)
finally:  # on again even where the grader fails to load (pytest says why and stops)
    if collecting:
        gc.enable()
gc.freeze()


def pytest_configure(config):
    plugin = StudentPlugin(Path(__file__).parent, simulate_cuda=config.getoption("cuda"),
                           lang=config.getoption("lang"))
    config.pluginmanager.register(plugin, PLUGIN_NAME)
