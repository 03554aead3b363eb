"""Make the student skeletons from the reference solutions.

In solutions/mha/*.py every piece students write sits between two marker lines:

        ### BEGIN SOLUTION
        ...reference code...
        ### END SOLUTION

(the markers nbgrader uses). The skeleton keeps everything else and puts, in place of each
region, a line that raises NotImplementedError at the region's indentation. The TODO comment
above a region stays in both files and tells students what to write.
"""

import re
from pathlib import Path

BEGIN = re.compile(r"^(\s*)### BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*### END SOLUTION\s*$")
PLACEHOLDER = 'raise NotImplementedError("TODO")'


def skeleton_source(source, name="<source>"):
    """The source with each solution region replaced by a NotImplementedError line."""
    out, indent = [], None
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        begin = BEGIN.match(line)
        if begin:
            if indent is not None:
                raise ValueError(f"{name}:{number}: BEGIN SOLUTION inside another region")
            indent = begin.group(1)
            out.append(f"{indent}{PLACEHOLDER}\n")
        elif END.match(line):
            if indent is None:
                raise ValueError(f"{name}:{number}: END SOLUTION without BEGIN")
            indent = None
        elif indent is None:
            out.append(line)
    if indent is not None:
        raise ValueError(f"{name}: BEGIN SOLUTION without END")
    return "".join(out)


def solution_regions(source):
    """The code inside each solution region (what a release must never contain)."""
    regions, current = [], None
    for line in source.splitlines():
        if BEGIN.match(line):
            current = []
        elif END.match(line):
            regions.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return regions


def write_skeletons(solutions, assignments, dry_run=False):
    """Regenerate assignments/*.py from solutions/*.py; return the paths that changed (or would)."""
    changed = []
    for source_path in sorted(Path(solutions).glob("*.py")):
        target = Path(assignments) / source_path.name
        text = skeleton_source(source_path.read_text(encoding="utf-8"), str(source_path))
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            changed.append(target)
            if not dry_run:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
    return changed
