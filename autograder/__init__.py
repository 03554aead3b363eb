"""MHA Lab autograder: per-step checks for PyTorch attention exercises.

The packages, in the one direction imports flow (see ARCHITECTURE.md):

    routes/       how people reach the grader: the command line, pytest, notebooks, nbgrader,
                  GitHub Classroom, Gradescope, the class report
    engine/       one grading run: grading.yml -> Assignment, staging, observe (student code) ->
                  judge (never runs it) -> scores, diagnoses, results
    sandbox/      where student code runs: the worker server, confined workers, the wire format
    assignments/  one folder per assignment (its checks, known mistakes, messages), loaded by
                  the engine by name; the engine itself names no assignment
"""

from pathlib import Path

__version__ = "0.2.0"

KIT = Path(__file__).resolve().parent.parent  # the directory that holds autograder/ and grading.yml


def cache_base() -> Path:
    """Where the kit keeps what it builds once per machine (the simulated CUDA device's helper);
    torch-free, so that the worker server's start can name it before anything heavy loads."""
    import os

    return Path(os.environ.get("MHA_LAB_CACHE") or Path.home() / ".cache" / "mha-lab")
