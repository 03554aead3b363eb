"""MHA Lab autograder: per-step checks for the multi-head attention exercises.

Modules, in the order data flows through them:
    config      grading.yml -> GradingConfig (validated, errors name key and line)
    checks/     one module per step: that step's checks (public, then hidden)
    check       the Check base class and the judging helpers every check uses
    submission  loads a submitted `mha` package file by file, lazily
    runner      observe (runs student code) and judge (never does), then scores
    results     per-step results -> table, JSON, CSV
    messages    every student-facing sentence, keyed by id
"""
__version__ = "0.1.0"


def cache_base():
    """Where the kit keeps what it builds once per machine (the simulated CUDA device's helper);
    torch-free, so that the worker server's start can name it before anything heavy loads."""
    import os
    from pathlib import Path

    return Path(os.environ.get("MHA_LAB_CACHE") or Path.home() / ".cache" / "mha-lab")
