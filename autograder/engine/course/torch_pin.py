from autograder.engine.checks import messages

"""The torch the official grading runs on, and what a student with another one is told.

The release's requirements.txt, the Classroom workflows, the Gradescope setup and the student
notebook install this version; `pytest assignments/` and the notebooks say so when the torch in
use is another (its numerics, its errors and its warnings may differ from the grading's). A CUDA
or CPU build of the same version (2.13.0+cu128, 2.13.0+cpu) is the same version.
"""

GRADING_TORCH = "2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # PyTorch's CPU-only wheels: no CUDA packages


def installed_torch() -> str | None:
    """The installed torch's version, read without importing it; None where there is none."""
    import importlib.metadata

    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def torch_note(version: str | None = None) -> str | None:
    """The message for a torch other than GRADING_TORCH (`version`, default: the installed one),
    in the chosen language; None where it is the same (or there is none)."""

    version = installed_torch() if version is None else version
    if version is None or version.split("+", 1)[0] == GRADING_TORCH:
        return None
    return messages.render(
        "torch_version_differs",
        have=version,
        want=GRADING_TORCH,
        command=f"pip install torch=={GRADING_TORCH} --extra-index-url {CPU_INDEX}",
    )
