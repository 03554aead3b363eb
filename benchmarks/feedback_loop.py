"""How long a student waits: `pytest assignments/` in the student release, on the complete
solution, against `python -c "import torch"`, on the same machine in the same run.

    python benchmarks/feedback_loop.py [--baseline REF] [--runs 5] [--cuda] [--failing]

Each tree (this one and, with --baseline, a detached git worktree of REF) writes its own student
release (publish/student_release.py: the kit a student gets, its grader and its pytest set-up),
with the complete solution copied over the skeletons. The commands then run as fresh processes
with this interpreter, as a student types them (no -p flags: whatever pytest plugins the
environment holds load), interleaved round by round (import torch, then each tree's pytest, the
order turned round every other round) so that a noisy machine slows all alike, with bytecode
written as a student's Python does. Medians of wall and CPU seconds (user + system) are printed
side by side, and the student loop: pytest minus import torch (target: <= 0.30 s, issue 34).
--cuda adds the cuda step on the simulated device (torch's fake-tensor machinery); --failing a
run with one failing step (softmax over the queries: its diagnosis and smallest failing input come
on top). Prints figures; asserts nothing.
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
PYTEST = [sys.executable, "-m", "pytest", "-q", "assignments"]
RELEASE = (
    "import sys\n"
    "from autograder.publish.student_release import release_files\n"
    "release_files(sys.argv[1], keep_manifest=False)\n"
)


def environment(tree: Path) -> dict:
    # PYTHONPATH: the tree's grader, not whichever one the interpreter has installed. A student's
    # Python writes bytecode; a machine set not to (this one) would bill every run for compiling.
    env = {**os.environ, "PYTHONPATH": str(tree), "MHA_LAB_LANG": "en"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(command: list, cwd: Path, env: dict, expect: int = 0) -> tuple:
    """(wall seconds, CPU seconds of the process and its children) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode != expect:
        print(completed.stdout[-2000:], completed.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"{cwd}: {' '.join(command[1:])} exited {completed.returncode}, not {expect}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def baseline_tree(ref: str) -> Path:
    """A detached worktree of `ref` under the temporary folder, made once and kept."""
    commit = subprocess.run(
        ["git", "-C", str(KIT), "rev-parse", "--short", ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = Path(tempfile.gettempdir()) / f"mha-lab-baseline-{commit}"
    if not (tree / "autograder").is_dir():
        subprocess.run(["git", "-C", str(KIT), "worktree", "add", "--detach", str(tree), commit], check=True)
    return tree


def student_kit(tree: Path, out: Path) -> Path:
    """`tree`'s student release in `out`, each assignment's complete solution over its skeleton."""
    env = {**environment(tree), "MHA_LAB_COURSE_DIR": str(out.parent / "course")}
    subprocess.run([sys.executable, "-c", RELEASE, str(out)], cwd=tree, env=env, check=True)
    for package in (out / "assignments").iterdir():
        if package.is_dir() and (tree / "solutions" / package.name).is_dir():
            shutil.rmtree(package)
            shutil.copytree(tree / "solutions" / package.name, package)
    return out


def failing_kit(kit: Path, out: Path) -> Path:
    shutil.copytree(kit, out)
    attention = out / "assignments" / "mha" / "attention.py"
    attention.write_text(attention.read_text().replace("softmax(scores, dim=-1)", "softmax(scores, dim=-2)"))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a git revision to compare with, e.g. main")
    parser.add_argument("--runs", type=int, default=5, help="rounds (one run of each command per round)")
    parser.add_argument("--cuda", action="store_true", help="also the cuda step on the simulated device")
    parser.add_argument("--failing", action="store_true", help="also a run with one failing step")
    args = parser.parse_args()
    trees = {"this": KIT}
    if args.baseline:
        trees = {"baseline": baseline_tree(args.baseline), "this": KIT}
        print(f"baseline {args.baseline} ({trees['baseline']}) vs this tree ({KIT})")
    print(f"machine: {len(os.sched_getaffinity(0))} usable cores, load average {os.getloadavg()[0]:.1f} at start")
    with tempfile.TemporaryDirectory() as tmp:
        commands = {"import torch": ([sys.executable, "-c", "import torch"], Path(tmp), environment(KIT), 0)}
        for name, tree in trees.items():
            kit = student_kit(tree, Path(tmp) / name / "kit")
            env = environment(kit)
            commands[f"{name}: pytest assignments/"] = (PYTEST, kit, env, 0)
            if args.cuda:
                commands[f"{name}: ... --cuda"] = (PYTEST + ["--cuda"], kit, env, 0)
            if args.failing:
                failing = failing_kit(kit, Path(tmp) / name / "failing")
                commands[f"{name}: ... one failing step"] = (PYTEST, failing, env, 1)
        for command, cwd, env, expect in commands.values():  # bytecode written, the file cache warm
            timed(command, cwd, env, expect)
        walls, cpus = {name: [] for name in commands}, {name: [] for name in commands}
        for round_ in range(args.runs):
            for name in list(commands) if round_ % 2 == 0 else list(commands)[::-1]:
                wall, cpu = timed(*commands[name])
                walls[name].append(wall)
                cpus[name].append(cpu)
    median = statistics.median
    print(f"\n{'command':36s} {'wall s':>7s} {'min':>6s} {'max':>6s} {'CPU s':>7s}   (medians of {args.runs} runs)")
    for name in commands:
        print(
            f"{name:36s} {median(walls[name]):7.2f} {min(walls[name]):6.2f} {max(walls[name]):6.2f} {median(cpus[name]):7.2f}"
        )
    print("\nthe student loop, pytest minus import torch (target <= 0.30 s); per round, then the median:")
    for name in trees:
        label = f"{name}: pytest assignments/"
        gaps = [p - t for p, t in zip(walls[label], walls["import torch"], strict=True)]
        cpu_gaps = [p - t for p, t in zip(cpus[label], cpus["import torch"], strict=True)]
        rounds = " ".join(f"{gap:+.2f}" for gap in gaps)
        print(f"  {name:9s} wall {rounds}  median {median(gaps):+.2f} s; CPU median {median(cpu_gaps):+.2f} s")


if __name__ == "__main__":
    main()
