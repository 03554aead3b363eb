"""Where grading's CPU time goes: cProfile of the judge and of one worker's share, warm caches.

    python benchmarks/profile_grading.py [--submissions 10] [--top 25] [--planted-only]

Grades N submissions (as benchmarks/batch_grading.py makes them: half carry a planted mistake)
in-process, with every check (hidden ones, diagnosis, the simulated cuda step), after one warm-up
pass, under cProfile; prints the CPU per submission and the functions with the largest
cumulative and own time. In-process grading runs the judge's and the worker's halves in one
process, so this shows both; the sandbox's own costs (fork, confinement, wire) are printed by
benchmarks/batch_grading.py as the difference. Prints figures; asserts nothing.
"""

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))
sys.path.insert(0, str(KIT / "benchmarks"))


def main():
    import torch

    from batch_grading import make_submissions

    torch.set_num_threads(1)  # as in a worker; more threads spin on a busy machine and bill their CPU

    from autograder.engine.course import config as grading_config
    from autograder.engine.judge.runner import grade

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=10)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--sort", default="cumulative,tottime")
    parser.add_argument("--out", help="write the raw profile here (for snakeviz and the like)")
    parser.add_argument("--rounds", type=int, default=1, help="passes over the submissions once warm")
    parser.add_argument(
        "--no-profile",
        action="store_true",
        help="time only (to run under a sampling profiler: py-spy record -- python ...)",
    )
    args = parser.parse_args()
    config = grading_config.load()
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_submissions(Path(tmp), args.submissions)
        for path in paths:  # warm: inputs, expectations, the known mistakes' runs, the simulation
            grade(path, config, reference=KIT / "solutions", seed=7)
        profile = cProfile.Profile()
        cpu, wall = time.process_time(), time.perf_counter()
        if not args.no_profile:
            profile.enable()
        for _ in range(args.rounds):
            for path in paths:
                grade(path, config, reference=KIT / "solutions", seed=7)
        profile.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    count = len(paths) * args.rounds
    print(
        f"machine: {os.cpu_count()} cores; {count} gradings in-process, warm caches"
        + ("" if args.no_profile else ", under cProfile (which slows Python-heavy code)")
    )
    print(f"CPU per submission {cpu / count * 1000:.0f} ms, wall {wall / count * 1000:.0f} ms")
    if args.no_profile:
        return
    if args.out:
        profile.dump_stats(args.out)
    for key in args.sort.split(","):
        stream = io.StringIO()
        pstats.Stats(profile, stream=stream).sort_stats(key).print_stats(args.top)
        print(stream.getvalue())


if __name__ == "__main__":
    main()
