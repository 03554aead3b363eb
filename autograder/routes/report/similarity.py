"""Pairs of submissions whose code is unusually alike (the class report's similarity section).

    similar = find_similar(entries, skeleton_package)   # {"pairs": [...], "clusters": [...]}
    data = data.build(entries, similarity=similar)

Works on the result JSON dicts and the graded files the out directories keep, as data.py does.
"""

import copy
from collections import Counter
from pathlib import Path

from autograder.engine.scan.submission import package_root


def find_similar(
    entries: list,
    skeleton_package: Path,
    threshold: float = 0.6,
    limit: int = 50,
    common_share: float = 0.1,
    min_common: int = 3,
    min_overlap: int = 80,
) -> dict:
    """Pairs of submissions whose code is unusually alike, by copydetect (winnowed k-gram
    fingerprints of the tokenised code, names and literals normalised), file by file
    (attention.py against attention.py). Two kinds of text are no evidence and are removed
    before comparing: the skeleton's (copydetect's boilerplate), and passages that more than
    max(`min_common`, `common_share` of the class) submissions share (as MOSS does: the usual
    way to write a line, or the reference everyone was shown). A pair's similarity, per side:
    its remaining tokens found in the other, over all its files. Pairs where either side is at
    least `threshold` and at least `min_overlap` tokens match are kept, the most matched tokens
    first, at most `limit`, with the matching regions of each file as [(text, matched)] segments
    (_segments) for a side-by-side view."""
    import math

    import numpy as np
    from copydetect import CodeFingerprint, compare_files
    from copydetect.utils import get_document_fingerprints, get_token_coverage

    k, window = 25, 1  # copydetect's defaults: noise and guarantee thresholds of 25 tokens
    # As copydetect's own detector does: every k-gram of every skeleton file is boilerplate.
    skeleton = np.unique(
        np.array(
            [
                h
                for path in sorted(Path(skeleton_package).glob("*.py"))
                for h in CodeFingerprint(str(path), k, 1).hashes
            ],
            dtype=np.int64,
        )
    )
    # Lines the skeleton has as they are (its docstrings, comments, signatures): never highlighted.
    skeleton_lines = {
        path.name: {line.strip() for line in path.read_text(encoding="utf-8").splitlines()}
        for path in sorted(Path(skeleton_package).glob("*.py"))
    }

    def fingerprint(path, boilerplate):
        try:
            return CodeFingerprint(str(path), k, window, boilerplate=boilerplate, language="python")
        except (OSError, UnicodeDecodeError, ValueError):
            return None

    def without(fp, boilerplate):
        """`fp` with more boilerplate removed, from its tokenised code (tokenising is the cost)."""
        lean = copy.copy(fp)
        lean.hashes, lean.hash_idx = get_document_fingerprints(fp.filtered_code, k, window, boilerplate)
        lean.token_coverage = get_token_coverage(lean.hash_idx, k, len(fp.filtered_code))
        return lean

    prints = {}  # id -> {file name: fingerprint without the skeleton}
    for entry in entries:
        root = Path(entry["path"]) if entry["path"] else None
        if root is None or not root.is_dir():
            continue
        holder = package_root(root, Path(skeleton_package).name)  # where staging finds the package
        package = holder / Path(skeleton_package).name if holder is not None else root
        found = {
            path.name: fp
            for path in sorted(package.glob("*.py"))
            if (fp := fingerprint(path, skeleton)) is not None and fp.token_coverage
        }
        if found:
            prints[entry["id"]] = found
    ids = sorted(prints)
    limit_common = max(min_common, math.ceil(common_share * len(ids)))
    frequency = Counter((name, h) for sid in ids for name, fp in prints[sid].items() for h in fp.hashes)
    common = {}
    for (name, h), count in frequency.items():
        if count > limit_common:
            common.setdefault(name, []).append(h)
    # Candidate pairs: those sharing a passage that is neither skeleton nor common (an inverted
    # index of the rare hashes: their lists are short by construction).
    holders, rare_count = {}, Counter()
    for sid in ids:
        for name, fp in prints[sid].items():
            for h in fp.hashes:
                if frequency[(name, h)] <= limit_common:
                    holders.setdefault((name, h), []).append(sid)
                    rare_count[sid] += 1
    shared = Counter()
    for group in holders.values():
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                shared[(a, b)] += 1
    candidates = [
        (a, b) for (a, b), count in shared.items() if count / max(1, min(rare_count[a], rare_count[b])) >= threshold / 2
    ]
    # Exact figures and matching regions for the candidates, with the common passages removed too.
    bare = {}
    for name, hashes in common.items():
        bare[name] = np.unique(np.concatenate([skeleton, np.array(hashes, dtype=np.int64)]))
    rare_prints = {}

    def rare(sid):
        if sid not in rare_prints:
            rare_prints[sid] = {
                name: lean
                for name, fp in prints[sid].items()
                if (lean := without(fp, bare[name]) if name in bare else fp).token_coverage
            }
        return rare_prints[sid]

    pairs = []
    for a, b in candidates:
        left, right = rare(a), rare(b)
        coverage_a = sum(fp.token_coverage for fp in left.values())
        coverage_b = sum(fp.token_coverage for fp in right.values())
        overlap_a = overlap_b = 0
        regions = []
        for name in sorted(set(left) & set(right)):
            tokens, (share_a, share_b), (slices_a, slices_b) = compare_files(left[name], right[name])
            if not tokens:
                continue
            overlap_a += share_a * left[name].token_coverage
            overlap_b += share_b * right[name].token_coverage
            plain = skeleton_lines.get(name, set())
            regions.append(
                {
                    "file": name,
                    "a": _segments(left[name].raw_code, slices_a, plain),
                    "b": _segments(right[name].raw_code, slices_b, plain),
                }
            )
        sim_a = overlap_a / coverage_a if coverage_a else 0
        sim_b = overlap_b / coverage_b if coverage_b else 0
        if max(sim_a, sim_b) >= threshold and min(overlap_a, overlap_b) >= min_overlap:  # a < b: ids are sorted
            pairs.append(
                {
                    "a": a,
                    "b": b,
                    "similarity_a": round(min(sim_a, 1.0), 4),
                    "similarity_b": round(min(sim_b, 1.0), 4),
                    "matched_tokens": int(min(overlap_a, overlap_b)),
                    "regions": regions,
                }
            )
    # Most shared unusual code first (MOSS orders by lines matched): a high share of a short file says less.
    pairs.sort(key=lambda pair: (-pair["matched_tokens"], pair["a"], pair["b"]))
    return {
        "threshold": threshold,
        "compared": len(ids),
        "common_over": limit_common,
        "pairs": pairs[:limit],
        "more": max(0, len(pairs) - limit),
        "clusters": clusters(pairs),
    }


def clusters(pairs: list) -> list:
    """The students linked by the pairs (all of them, not only those listed), as connected groups
    of two or more, the largest first: {"members", "pairs": how many pairs inside, "top": the
    highest similarity of them}. Many pairs among a few students read as one group here."""
    parent = {}

    def root(sid):
        while parent.setdefault(sid, sid) != sid:
            parent[sid] = parent[parent[sid]]
            sid = parent[sid]
        return sid

    for pair in pairs:
        parent[root(pair["a"])] = root(pair["b"])
    groups = {}
    for pair in pairs:
        group = groups.setdefault(root(pair["a"]), {"members": set(), "pairs": 0, "top": 0.0})
        group["members"].update((pair["a"], pair["b"]))
        group["pairs"] += 1
        group["top"] = max(group["top"], pair["similarity_a"], pair["similarity_b"])
    out = [{"members": sorted(g["members"]), "pairs": g["pairs"], "top": g["top"]} for g in groups.values()]
    return sorted(out, key=lambda g: (-len(g["members"]), -g["top"], g["members"]))


def _segments(text: str, slices, plain: set = frozenset(), context: int = 3) -> list:
    """`text` cut at copydetect's slices into [[piece, matched]], keeping the matched lines and
    `context` lines around them; each run of lines left out becomes one ["⋯\n", False]. A line
    that is, stripped, one of `plain` (the skeleton's lines) or a comment is never marked matched:
    copydetect's slices run from the first matched token to the last, over whatever lies between."""
    pieces, at = [], 0
    if len(slices) and len(slices[0]):
        for start, end in sorted(zip(map(int, slices[0]), map(int, slices[1]))):
            start = max(start, at)
            if start > at:
                pieces.append((text[at:start], False))
            if end > start:
                pieces.append((text[start:end], True))
            at = max(at, end)
    if at < len(text):
        pieces.append((text[at:], False))
    lines = [[]]  # each line: its pieces (the newline stays with the line it ends)
    for piece, hit in pieces:
        for part in piece.splitlines(keepends=True):
            lines[-1].append([part, hit])
            if part.endswith("\n"):
                lines.append([])
    for line in lines:
        stripped = "".join(part for part, _ in line).strip()
        if stripped in plain or stripped.startswith("#"):
            for part in line:
                part[1] = False
    hits = [i for i, line in enumerate(lines) if any(hit and part.strip() for part, hit in line)]
    keep = {j for i in hits for j in range(i - context, i + context + 1)}
    out = []
    for i, line in enumerate(lines):
        if i in keep:
            out.extend(line)
        elif i - 1 in keep or (i == 0 and line):
            out.append(["⋯\n", False])
    return out
