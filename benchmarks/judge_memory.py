"""The judge's memory with hostile submissions: peak RSS of the grading process (the judge, this
process) for a batch of clean submissions, then for the same batch with hostile ones beside them.

    python benchmarks/judge_memory.py [--count 6] [--workers 2]

The hostile submissions return outputs far larger than their inputs (a broadcast view that is
gigabytes once made contiguous), raise exceptions with megabytes of text and print megabytes.
What the judge may keep per submission is bounded (engine/judge/remote.py: a byte budget per check and
per submission; strings cut), so the peak grows by little, whatever they do. Prints the figures;
asserts nothing.
"""

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(KIT))

HOSTILE = {
    "broadcast": (
        "    ### BEGIN SOLUTION\n",
        "    ### BEGIN SOLUTION\n    return q.expand(2048, *q.shape), k.expand(2048, *k.shape)\n",
    ),
    "long_error": ("    ### BEGIN SOLUTION\n", "    ### BEGIN SOLUTION\n    raise ValueError('x' * 8_000_000)\n"),
    "loud": ("    ### BEGIN SOLUTION\n", "    ### BEGIN SOLUTION\n    print('y' * 4_000_000)\n"),
}


def peak_mib() -> float:
    """This process's peak resident set (VmHWM), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make(root: Path, name: str, patch=None) -> Path:
    target = root / name
    shutil.copytree(KIT / "solutions" / "mha", target / "mha")
    if patch is not None:
        attention = target / "mha" / "attention.py"
        attention.write_text(attention.read_text().replace(*patch, 1))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=6, help="submissions of each kind")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    from autograder.engine.course import config as grading_config
    from autograder.engine.operations.batch import grade_batch

    config = grading_config.load(assignment="mha")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        clean = [make(root, f"clean{i}") for i in range(args.count)]
        hostile = [make(root, f"{kind}{i}", patch) for kind, patch in HOSTILE.items() for i in range(args.count)]
        started = time.monotonic()
        grade_batch(clean, config, root / "out-clean", workers=args.workers, seed=1)
        after_clean, clean_s = peak_mib(), time.monotonic() - started
        started = time.monotonic()
        results = grade_batch(clean + hostile, config, root / "out-hostile", workers=args.workers, seed=1, force=True)
        after_hostile, hostile_s = peak_mib(), time.monotonic() - started
    graded = sum(result is not None for result in results.values())
    print(f"judge peak after {len(clean)} clean submissions: {after_clean:.0f} MiB ({clean_s:.1f} s)")
    print(
        f"judge peak after {len(clean)} clean + {len(hostile)} hostile ({', '.join(HOSTILE)}): "
        f"{after_hostile:.0f} MiB ({hostile_s:.1f} s), {graded}/{len(results)} graded"
    )
    print(f"growth: {after_hostile - after_clean:+.0f} MiB")


if __name__ == "__main__":
    main()
