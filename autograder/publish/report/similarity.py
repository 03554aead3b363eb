"""Pairs of submissions whose code is alike (the class report's similarity section).

    similar = find_similar(entries, skeleton_files)   # {"pairs": [...], "clusters": [...]}
    data = data.build(entries, similarity=similar)

Works only on the code grading accepted and kept (entry["code"], reading.py): never on the
submission folders. Each submission's code is normalised (normalise.py: names and literals,
dead code, statement order, units that ignore files), cut into k-grams of K tokens, and compared
with every other as a whole package, whatever its files are called.

Two kinds of code weigh less or nothing:
- the skeleton's: its k-grams are removed (the students were given them);
- code many students share: a k-gram that more than `common` submissions hold (the larger of
  `min_common` and `common_share` of the class) weighs `common / holders`. It is never removed:
  so a pair's code that is the same in full scores 100 % however many share it, and a ring of
  copies stays visible however large; code that is only the usual way to write a line adds
  little to a pair whose other code differs.

A pair's similarity, per side: the weight of its k-grams found in the other, over the weight of
all its k-grams. A pair is listed where either side reaches `threshold` and at least
`min_overlap` of its tokens match.
"""

from collections import defaultdict

import numpy as np

from autograder.engine.checks.text import printable
from autograder.publish.report import normalise

K = 12  # tokens per k-gram: a short statement; shorter repeats are no evidence
MIN_OVERLAP = 60  # matched tokens a pair needs at least (a function of a few lines)
CHUNK = 4096  # shared k-grams per block of the overlap product (bounds its memory)
SHOWN_LINES = 400  # lines of one side of a pair shown in the report
LINE_CHARS = 300  # characters of one line shown


class Document:
    """One submission's k-grams but the skeleton's (`boilerplate`, a sorted int64 array): their
    hashes and the token each starts at (`hashes`, `starts`), the distinct ones (`distinct`), and
    every token's place (`places`: (file, first line, last line))."""

    def __init__(self, units: list, boilerplate: np.ndarray, k: int = K):
        places, starts = [], []
        for unit in units:
            offset = len(places)
            places.extend(unit.places)
            for i in range(len(unit.tokens) - k + 1):
                starts.append((offset + i, hash(tuple(unit.tokens[i : i + k]))))
        self.places = places
        self.k = k
        self.starts = np.array([s for s, _ in starts], dtype=np.int64)
        self.hashes = np.array([h for _, h in starts], dtype=np.int64)
        keep = ~np.isin(self.hashes, boilerplate)
        self.starts, self.hashes = self.starts[keep], self.hashes[keep]
        self.distinct = np.unique(self.hashes)

    def covered(self, others: np.ndarray) -> np.ndarray:
        """A bool per token: covered by one of its k-grams whose hash is in `others`."""
        hit = self.starts[np.isin(self.hashes, others)]
        marks = np.zeros(len(self.places) + 1, dtype=np.int64)
        np.add.at(marks, hit, 1)
        np.add.at(marks, np.minimum(hit + self.k, len(self.places)), -1)
        return np.cumsum(marks[:-1]) > 0


def skeleton_hashes(skeleton_files: dict, k: int = K) -> np.ndarray:
    """The k-grams of the skeleton's code, normalised as a submission's is (sorted, distinct)."""
    units = normalise.package_units(skeleton_files, normalise.api_names(skeleton_files))
    hashes = [hash(tuple(u.tokens[i : i + k])) for u in units for i in range(len(u.tokens) - k + 1)]
    return np.unique(np.array(hashes, dtype=np.int64))


def find_similar(
    entries: list,
    skeleton_files: dict,
    threshold: float = 0.6,
    limit: int = 50,
    common_share: float = 0.1,
    min_common: int = 3,
    min_overlap: int = MIN_OVERLAP,
    k: int = K,
) -> dict:
    """Pairs of submissions whose kept code is alike (see the module's docstring), the most
    matched tokens first, at most `limit` with the matching lines of each side for a side-by-side
    view; `clusters`: every pair's students as connected groups; `not_compared`: {note: ids} of
    the graded whose code is not compared, or in part (kept_code.read's notes; `code_empty`:
    grading took no file of theirs)."""
    api = normalise.api_names(skeleton_files)
    boilerplate = skeleton_hashes(skeleton_files, k)
    documents, code, not_compared = {}, {}, {}
    for entry in entries:
        files = entry.get("code")
        if entry.get("result") is not None and (not files or entry.get("code_note")):
            not_compared.setdefault(entry.get("code_note") or "code_empty", []).append(entry["id"])
        if not files:
            continue
        try:
            document = Document(normalise.package_units(files, api), boilerplate, k)
        except (RecursionError, MemoryError):  # past what this process can hold: that student's alone
            not_compared.setdefault("code_unreadable", []).append(entry["id"])
            continue
        if len(document.distinct):
            documents[entry["id"]], code[entry["id"]] = document, files
    ids = sorted(documents)
    common = max(min_common, int(np.ceil(common_share * len(ids))))
    pairs = []
    for a, b, sim_a, sim_b in _alike(ids, documents, common, threshold):
        left, right = documents[a], documents[b]
        covered_a, covered_b = left.covered(right.distinct), right.covered(left.distinct)
        matched = int(min(covered_a.sum(), covered_b.sum()))
        if matched < min_overlap:
            continue
        pairs.append(
            {
                "a": a,
                "b": b,
                "similarity_a": round(min(sim_a, 1.0), 4),
                "similarity_b": round(min(sim_b, 1.0), 4),
                "matched_tokens": matched,
                "covered": (covered_a, covered_b),
            }
        )
    # The most shared code first (MOSS orders by lines matched): a high share of a short file says less.
    pairs.sort(key=lambda pair: (-pair["matched_tokens"], pair["a"], pair["b"]))
    for pair in pairs[:limit]:
        covered_a, covered_b = pair["covered"]
        pair["regions"] = [
            {"side": "a", "files": regions(code[pair["a"]], documents[pair["a"]], covered_a)},
            {"side": "b", "files": regions(code[pair["b"]], documents[pair["b"]], covered_b)},
        ]
    for pair in pairs:
        del pair["covered"]
    return {
        "threshold": threshold,
        "k": k,
        "compared": len(ids),
        "common_over": common,
        "pairs": pairs[:limit],
        "more": max(0, len(pairs) - limit),
        "clusters": clusters(pairs),
        "not_compared": {note: sorted(ids) for note, ids in sorted(not_compared.items())},
    }


def _alike(ids: list, documents: dict, common: int, threshold: float):
    """(a, b, similarity of a's code in b, of b's in a) for every pair where either side
    reaches `threshold`, by the weighted overlap of their k-grams (one product of the
    submissions-by-shared-k-grams matrix, in blocks)."""
    if len(ids) < 2:
        return
    every = np.concatenate([documents[sid].distinct for sid in ids])
    values, holders = np.unique(every, return_counts=True)
    weights = np.minimum(1.0, common / holders)
    index = {sid: np.searchsorted(values, documents[sid].distinct) for sid in ids}
    total = np.array([weights[index[sid]].sum() for sid in ids])
    shared = np.flatnonzero(holders > 1)  # k-grams only one submission holds match nothing
    overlap = np.zeros((len(ids), len(ids)))
    for start in range(0, len(shared), CHUNK):
        block = shared[start : start + CHUNK]
        position = np.full(len(values), -1, dtype=np.int64)
        position[block] = np.arange(len(block))
        held = np.zeros((len(ids), len(block)), dtype=np.float32)
        for row, sid in enumerate(ids):
            columns = position[index[sid]]
            held[row, columns[columns >= 0]] = 1.0
        overlap += (held * weights[block].astype(np.float32)) @ held.T
    share = overlap / np.maximum(total, 1e-12)[:, None]
    for i, j in zip(*np.nonzero(np.triu(np.maximum(share, share.T) >= threshold, 1)), strict=True):
        yield ids[i], ids[j], float(share[i, j]), float(share[j, i])


def regions(files: dict, document: Document, covered: np.ndarray, context: int = 3, most: int = SHOWN_LINES) -> list:
    """The files of one side of a pair with its matched lines marked: [{"file", "lines":
    [[text, matched]]}], each matched line with `context` lines around it, each run of lines
    left out as one ["⋯", False]; only files with a matched line, at most `most` lines in all
    (then one ["⋯ N more lines", False]). Each line printable (control characters escaped) and
    cut to LINE_CHARS."""
    matched = defaultdict(set)
    for (path, first, last), hit in zip(document.places, covered, strict=False):
        if hit:
            matched[path].update(range(first, last + 1))
    out, budget = [], most
    for path in sorted(matched):
        lines = files.get(path, "").splitlines()
        marked = matched[path]
        keep = {j for i in marked for j in range(i - context, i + context + 1)}
        shown, gap = [], False
        for number, text in enumerate(lines, 1):
            if number not in keep:
                if not gap:
                    shown.append(["⋯", False])
                gap = True
                continue
            if budget <= 0:
                shown.append([f"⋯ {len(lines) - number + 1}", False])
                break
            hit = number in marked and bool(text.strip()) and not text.strip().startswith("#")
            shown.append([_shown(text), hit])
            budget -= 1
            gap = False
        out.append({"file": _shown(path), "lines": shown})
    return out


def _shown(text: str) -> str:
    """A line of code as the report shows it: control characters escaped, cut to LINE_CHARS."""
    escaped = printable(text[: LINE_CHARS + 1])
    return escaped if len(escaped) <= LINE_CHARS else escaped[:LINE_CHARS] + " [...]"


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
