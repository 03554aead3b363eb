"""The process every worker is forked from (multiprocessing's forkserver).

Its start costs seconds (it imports torch and warms up, autograder/worker_preload.py), so the
command line starts it first thing, before this process imports torch itself: the two imports
then run side by side. This module imports nothing heavy, so that it can.
"""
import multiprocessing
from multiprocessing import forkserver

_context = []


def context():
    """The forkserver context; its server preloads torch, the checks and a warm fake device."""
    if not _context:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["autograder.worker_preload"])
        _context.append(ctx)
    return _context[0]


def start():
    """Start the server now, without waiting for it (the first worker's fork waits)."""
    context()
    forkserver.ensure_running()
