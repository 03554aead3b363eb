"""What the cuda step costs a worker per submission: its checks' observers on the reference, on the
simulated CUDA device, warm (as a worker forked from a warmed-up server runs them).

    python benchmarks/cuda_step.py [--rounds 30] [--kit DIR]

`--kit` grades with another checkout's autograder (the kit before a change, say), so that two
versions can be timed in turn on the same machine: run it once per checkout, interleaved, and
compare medians. Prints the wall and CPU time per submission (median and quartiles over the
rounds) and per check; asserts nothing.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--kit", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    kit = Path(args.kit).resolve()
    sys.path.insert(0, str(kit))

    import torch

    torch.set_num_threads(1)  # as in a worker

    import autograder
    from autograder.engine.course import config as grading_config
    from autograder.engine.course.assignment import warm_up
    from autograder.engine.judge.in_process import observe
    from autograder.engine.judge.plan import cached_inputs, check_seed, warm_up_grader
    from autograder.engine.judge.verdict import load_reference
    from autograder.harness.fake_cuda import Simulation

    assert Path(autograder.__file__).resolve().is_relative_to(kit), autograder.__file__
    config = grading_config.load(kit / "grading.yml", assignment="mha")
    warm_up_grader([config])
    warm_up("mha", Simulation.shared())  # what the worker server runs before it forks
    reference = load_reference(kit / "solutions", "mha")
    step = next(s for s in config.steps if s.id == "cuda")
    checks = [c for c in config.step_modules()["cuda"].CHECKS if c.requires == "cuda"]
    inputs = {c.id: cached_inputs(c, check_seed(c, args.seed), "simulated") for c in checks}
    for check in checks:  # first runs: caches, imports
        got = observe(check, reference, inputs[check.id], step.timeout, step.forbidden)
        assert got.error is None, (check.id, got.error)
    walls, cpus, per_check = [], [], {c.id: [] for c in checks}
    for _ in range(args.rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        for check in checks:
            started = time.perf_counter()
            observe(check, reference, inputs[check.id], step.timeout, step.forbidden)
            per_check[check.id].append(time.perf_counter() - started)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)

    def quartiles(values):
        q = statistics.quantiles(values, n=4)
        return f"median {statistics.median(values) * 1000:.1f} ms (quartiles {q[0] * 1000:.1f}-{q[2] * 1000:.1f})"

    print(f"kit {kit}: cuda step, {len(checks)} checks on the reference, simulated device, {args.rounds} rounds")
    print(f"  wall per submission: {quartiles(walls)}")
    print(f"  CPU per submission:  {quartiles(cpus)}")
    for check_id, times in per_check.items():
        print(f"    {check_id:22s} {statistics.median(times) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
