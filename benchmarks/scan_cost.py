"""What the judge's source scan costs per submission, by size: linear, and within the budget.

    python benchmarks/scan_cost.py [--sizes 16,64,256] [--files 1,8,64]

For each shape of dead code (code no check runs: many small functions, long arithmetic
chains, strings built from literals, big literal tables, nested blocks), a submission is made of
the reference package plus `files` extra modules of `size` KiB each, every one imported by a step
file (so every step's scan reaches it). The plan stage's scan runs for every step of the mha
assignment, as runner.grade_package runs it (one forbidden.SourceScan per submission): the CPU
time it takes, per KiB of source, and how many files were parsed. Staging's limit is 16 MiB of
source (submission.py), each file at most source_policy.MAX_SOURCE_CHARS (256 KiB), so the last
row of a shape, 62 files of 256 KiB (with the reference, just under 16 MiB), is about the most
a submission can make the judge read. Prints
figures (peak RSS: this process's so far, the trees of a file are not kept); asserts nothing.
"""

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))

import torch  # noqa: E402,F401 - imported by the judge before any scan

from autograder.engine.course import config as grading_config  # noqa: E402
from autograder.engine.judge.plan import every_forbidden, forbidden_in_source, source_evidence  # noqa: E402
from autograder.engine.scan import source_policy  # noqa: E402
from autograder.engine.scan.forbidden import SourceScan  # noqa: E402

SHAPES = {
    "functions": lambda i: f"def f_{i}(x):\n    y = x * 2 + 1\n    return torch.relu(y) + {i}\n\n\n",
    "chains": lambda i: f"x_{i} = " + " + ".join(str(n) for n in range(60)) + "\n",
    "strings": lambda i: f"s_{i} = " + " + ".join(f"'p{n}'" for n in range(40)) + "\n",
    "tables": lambda i: f"t_{i} = [" + ", ".join(f"{n}.5" for n in range(80)) + "]\n",
    "nested": lambda i: (
        f"def g_{i}(x):\n"
        + "".join("    " * d + f"    if x > {d}:\n" for d in range(12))
        + "    " * 12
        + "    return x\n\n\n"
    ),
}


def dead_module(shape, size):
    """`size` bytes (about) of dead code of one shape, under the policy's limit."""
    make, parts, total, i = SHAPES[shape], ["import torch\n\n\n"], 0, 0
    while total < size:
        parts.append(make(i))
        total += len(parts[-1])
        i += 1
    text = "".join(parts)
    while len(text) > source_policy.MAX_SOURCE_CHARS - 64:  # room for its number (submission)
        text = text[: text.rindex("\n", 0, len(text) - 1) + 1]
    return text


def submission(root, shape, files, size):
    path = root / f"{shape}-{files}-{size}"
    shutil.copytree(KIT / "solutions" / "mha", path / "mha")
    text = dead_module(shape, size << 10)
    imports = ""
    for n in range(files):  # each of its own text (the judge reads files of the same text once)
        (path / "mha" / f"dead_{n}.py").write_text(f"# {n:08d}\n" + text)
        imports += f"from . import dead_{n}  # noqa\n"
    for step_file in ("padding.py", "attention.py", "heads.py", "mha.py"):
        target = path / "mha" / step_file
        target.write_text(target.read_text() + "\n" + imports)
    return path, files * (len(text) + 11)


def scan_cpu(path, config):
    """(CPU seconds of the plan stage's scan over every step, files parsed)."""
    modules = config.step_modules()
    started = time.process_time()
    scan = SourceScan(path / config.package, forbidden=every_forbidden(config))
    for step in config.steps:
        forbidden_in_source(modules[step.id], step, scan)
        source_evidence(modules[step.id], step, scan)
    return time.process_time() - started, scan.parses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16,64,256", help="KiB per dead file")
    parser.add_argument("--files", default="1,8,62", help="dead files per submission")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args()
    config = grading_config.load(assignment="mha")
    print(f"budget per submission: {config.budget:g} s; staging's limit: 16 MiB of source\n")
    print(
        f"{'shape':<10} {'files':>5} {'KiB each':>8} {'MiB':>6} {'parsed':>6} {'CPU s':>7} {'ms/KiB':>7} {'peak RSS':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes.split(","):
            for files in map(int, args.files.split(",")):
                for size in map(int, args.sizes.split(",")):
                    path, nbytes = submission(Path(tmp), shape, files, size)
                    seconds, parsed = scan_cpu(path, config)
                    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10  # MiB, so far
                    print(
                        f"{shape:<10} {files:>5} {size:>8} {nbytes / 2**20:>6.2f} {parsed:>6} {seconds:>7.2f} "
                        f"{1000 * seconds / (nbytes / 1024):>7.3f} {peak:>6} MiB"
                    )
                    shutil.rmtree(path)


if __name__ == "__main__":
    main()
