"""The source policy against public code: how many public attention files it accepts, and what it
refuses in the others. The evidence source_policy.py cites comes from here.

    python benchmarks/policy_corpus.py /work/.mirror [--snippets] [--top 40]

Reads every .py file of each repository's HEAD under the given mirror folder (`git show`, nothing
copied into the kit) that imports torch and mentions attention, softmax or a cache; with
`--snippets`, only the attention classes and functions of each file (a name with attn, attention,
cache, kv or mha, and a softmax or a cache in it) with the imports they use: the code a student's
step resembles. Prints the files accepted and the refusals by kind; asserts nothing.
"""

import argparse
import ast
import collections
import re
import subprocess
import sys
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))

from autograder.engine.scan.source_reader import findings  # noqa: E402

ATTENTION = re.compile(r"softmax|attn|attention", re.I)
NAMES = re.compile(r"attn|attention|cache|kv|mha|selfatt", re.I)


def public_files(mirrors: Path):
    """(repository/path, source) of every attention file of every mirrored repository."""
    for repository in sorted(p for p in mirrors.iterdir() if (p / "repo").exists()):
        git = ["git", "-C", str(repository / "repo")]
        try:
            names = subprocess.run(
                [*git, "ls-tree", "-r", "--name-only", "HEAD"], capture_output=True, text=True, check=True
            )
        except subprocess.CalledProcessError:
            continue
        for name in names.stdout.splitlines():
            if not name.endswith(".py") or "test" in name.lower():
                continue
            data = subprocess.run([*git, "show", f"HEAD:{name}"], capture_output=True).stdout
            text = data.decode("utf-8", "replace")
            if len(data) < 200_000 and "import torch" in text and ATTENTION.search(text):
                yield f"{repository.name}/{name}", text


def snippet(source: str):
    """The attention classes and functions of a file, with the imports they use, or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    lines = source.splitlines()
    parts = []
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and NAMES.search(node.name):
            text = ast.get_source_segment(source, node) or ""
            if "softmax" in text or "cache" in node.name.lower() or "kv" in node.name.lower():
                start = min([d.lineno for d in node.decorator_list] + [node.lineno])
                parts.append("\n".join(lines[start - 1 : node.end_lineno]))
    if not parts:
        return None
    used = set(re.findall(r"[A-Za-z_]\w*", "\n".join(parts)))
    imports = [
        ast.get_source_segment(source, node)
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        and any((a.asname or a.name.split(".")[0]) in used for a in node.names)
    ]
    return "\n".join(imports) + "\n\n\n" + "\n\n\n".join(parts) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mirrors", type=Path)
    parser.add_argument("--snippets", action="store_true")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    refusals, examples, accepted, read = collections.Counter(), {}, 0, 0
    repositories = set()
    for name, source in public_files(args.mirrors):
        if args.snippets:
            source = snippet(source)
            if source is None:
                continue
        read += 1
        repositories.add(name.split("/")[0])
        found = findings(source)
        accepted += not found
        for kind in {(f.message_id, f.name) for f in found}:
            refusals[kind] += 1
            examples.setdefault(kind, f"{name}:{next(f.line for f in found if (f.message_id, f.name) == kind)}")
    print(
        f"{accepted} of {read} {'snippets' if args.snippets else 'files'} accepted ({len(repositories)} repositories)"
    )
    for (message_id, what), count in refusals.most_common(args.top):
        print(f"{count:4d}  {message_id:22s} {what[:50]:50s} e.g. {examples[(message_id, what)]}")


if __name__ == "__main__":
    main()
