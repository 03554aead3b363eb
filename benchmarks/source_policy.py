"""What the judge's source check costs: source_reader.findings per file, uncached (the judge keeps
them per submission: forbidden.SourceScan).

    python benchmarks/source_policy.py [--runs 5]

Rows: every file of the reference solutions (the usual case), and synthetic files of tiny
statements of 64 KiB and of the largest size read (source_policy.MAX_SOURCE_CHARS), with the
peak of Python allocations while reading each (tracemalloc). Prints figures; asserts nothing.
"""

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))

import torch  # noqa: E402,F401 - imported by the judge before any scan

from autograder.engine.scan import source_policy, source_reader  # noqa: E402


def timed(source: str, runs: int):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        source_reader.findings(source)
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    source_reader.findings(source)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    source_reader.findings("import torch\n")  # the one-time look at the installation
    solutions = [p.read_text() for p in sorted((KIT / "solutions").rglob("*.py"))]
    medians = [timed(s, args.runs)[0] for s in solutions]
    print(f"{len(solutions)} solution files: median {1000 * statistics.median(medians):.1f} ms per file")
    for size in (64 << 10, source_policy.MAX_SOURCE_CHARS):
        source = "x = 1\n" * (size // 6)
        median, peak = timed(source, max(1, args.runs // 2))
        print(f"{size >> 10} KiB of 'x = 1': {median:.2f} s, peak allocations {peak >> 20} MiB")


if __name__ == "__main__":
    main()
