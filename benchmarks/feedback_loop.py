"""How long a student waits: `pytest assignments/` on a complete solution vs `import torch`.

    python benchmarks/feedback_loop.py [--runs 5]

Both are timed as fresh processes with this interpreter, interleaved, and the medians printed
side by side. Target: the pytest run within 0.5 s of the import (issue 17). The --cuda row adds the cuda
step on the simulated device (its fake-tensor machinery imports torch._dynamo). The last row is a
run with one failing step (softmax over the queries): its verdict and the search for the smallest
failing input (engine/judge/shrink.py, issue 23) come on top. Prints figures; asserts nothing.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent


def wall_time(command, cwd):
    start = time.perf_counter()
    # PYTHONPATH: this kit's grader, not whichever one the interpreter has installed (an editable
    # install of another checkout would be measured instead)
    env = {**os.environ, "PYTHONPATH": str(KIT)}
    completed = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    return elapsed, completed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "complete"
        (root / "assignments").mkdir(parents=True)
        for name in ("conftest.py", "test_checks.py"):
            shutil.copy(KIT / "assignments" / name, root / "assignments" / name)
        shutil.copytree(KIT / "solutions" / "mha", root / "assignments" / "mha")
        shutil.copy(KIT / "grading.yml", root / "grading.yml")
        failing = Path(tmp) / "failing"
        shutil.copytree(root, failing)
        attention = failing / "assignments" / "mha" / "attention.py"
        attention.write_text(attention.read_text().replace("softmax(scores, dim=-1)", "softmax(scores, dim=-2)"))
        commands = {
            "python -c 'import torch'": [sys.executable, "-c", "import torch"],
            "pytest assignments/ (complete solution)": [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "assignments",
            ],
            "pytest assignments/ --cuda (simulated GPU)": [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "assignments",
                "--cuda",
            ],
        }
        failing_run = "pytest assignments/ (one failing step)"
        commands[failing_run] = commands["pytest assignments/ (complete solution)"]
        times = {name: [] for name in commands}
        wall_time(commands["python -c 'import torch'"], root)  # warm the file cache
        for _ in range(args.runs):
            for name, command in commands.items():
                elapsed, completed = wall_time(command, failing if name == failing_run else root)
                if completed.returncode != (1 if name == failing_run else 0):
                    print(completed.stdout[-2000:], completed.stderr[-2000:])
                    raise SystemExit(f"{name} failed")
                times[name].append(elapsed)
    print(f"{'command':45s} {'median s':>9s} {'min s':>7s} {'max s':>7s}   ({args.runs} runs each)")
    for name, values in times.items():
        print(f"{name:45s} {statistics.median(values):9.2f} {min(values):7.2f} {max(values):7.2f}")
    names = list(times)
    gap = statistics.median(times[names[1]]) - statistics.median(times[names[0]])
    print(f"{'difference (target: <= 0.50 s)':45s} {gap:9.2f}")


if __name__ == "__main__":
    main()
