"""`python -m autograder grade ...` as an instructor runs it, with two test knobs.

    python tests/attacks/driver.py SPEC_JSON     # {"argv": [...], "no_static_scan": bool, "memory_bytes": int|None}

* no_static_scan: the judge's source scan for forbidden calls and tampering is turned off, so
  that hostile code is not refused before it runs and the sandbox alone must hold against it
  (a scan is a second line, and a scan can be evaded).
* memory_bytes: the workers' memory budget (the command line keeps the default), small so that a
  test of the memory limit does not have to take gigabytes from a shared machine.
"""

import functools
import json
import os
import sys

KIT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> int:
    spec = json.loads(sys.argv[1])
    sys.path.insert(0, KIT)
    if spec.get("no_static_scan"):
        from autograder.engine import runner

        if not hasattr(runner, "forbidden_in_source"):
            sys.exit(
                "driver: autograder.engine.runner.forbidden_in_source is gone: update tests/attacks/driver.py "
                "so that it turns off the judge's source scan"
            )
        runner.forbidden_in_source = lambda *args, **kwargs: None
    if spec.get("memory_bytes"):
        from autograder.engine import batch

        batch.grade_batch = functools.partial(batch.grade_batch, memory_bytes=spec["memory_bytes"])
    from autograder.routes.cli import main as grade_main

    return grade_main(spec["argv"])


if __name__ == "__main__":
    sys.exit(main())
