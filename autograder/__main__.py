"""`python -m autograder ...`: the command line (autograder/routes/cli/)."""

import logging
import os
import sys

from autograder.routes.cli import main


def exit_now(code) -> None:
    """Leave without the interpreter's teardown: with torch loaded it takes 0.4 s to over 1 s
    after the last result. Everything a command writes is closed by then; what is left is
    flushed here, and a worker server this command started is stopped and waited for, so that
    its workers' scratch is gone when the command returns."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    if "autograder.sandbox.fork_server" in sys.modules:  # only where one may have started
        sys.modules["autograder.sandbox.fork_server"].WorkerServer.stop_all()
    os._exit(code if isinstance(code, int) else 1)


if __name__ == "__main__":
    try:
        status = main()
    except SystemExit as stop:  # argparse and the commands' own exits
        status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if stop.code is not None and not isinstance(stop.code, int):  # sys.exit("why"), as Python does it
            print(stop.code, file=sys.stderr)
    exit_now(0 if status is None else status)
