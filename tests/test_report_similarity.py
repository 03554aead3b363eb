"""The class report's similarity, as properties: disguised copies of different solutions are the
same code and are flagged; independently written styles are not; a ring stays visible however
common it is; dead code, names, order and files change nothing.

Students come from tests/disguise.py: independent ones (the reference with each file in a style
of tests/styles.py), and copies disguised by renames, reorderings, dead-code padding, moves into
sub-packages, splits and comments.
"""

import random

import pytest

from autograder.publish.report import dead_code, liveness, normalise, order, similarity
from disguise import KINDS, disguise, independent_students, random_function, skeleton, synthetic_student

SKELETON = skeleton()
API = normalise.api_names(SKELETON)


def canonical(files):
    return sorted(tuple(unit.tokens) for unit in normalise.package_units(files, API))


def entry(sid, files):
    return {"id": sid, "result": {}, "code": files, "code_note": None}


def flagged(entries, **options):
    found = similarity.find_similar(entries, SKELETON, **options)
    return found, {(pair["a"], pair["b"]) for pair in found["pairs"]}


@pytest.mark.parametrize(
    "kinds",
    [("rename",), ("reorder",), ("pad",), ("comments",), ("wrap",), ("rename", "reorder", "pad", "comments", "wrap")],
)
def test_a_disguise_leaves_the_normalised_code_as_it_was(kinds):
    students = independent_students(6)
    for seed in range(2):
        rng = random.Random(seed)
        for files in students[seed::2]:
            disguised = disguise(files, rng, kinds)
            assert disguised != files
            assert canonical(disguised) == canonical(files)


def test_copies_moved_and_split_across_files_are_the_same_code():
    students = independent_students(6)
    rng = random.Random(7)
    entries = [entry(f"ind{i}", files) for i, files in enumerate(students)]
    for i, files in enumerate(students[:3]):
        moved = disguise(files, rng, ("move", "split"))
        assert any("/" in path for path in moved) and set(moved) != set(files)
        entries.append(entry(f"moved{i}", moved))
    found, pairs = flagged(entries)
    assert pairs == {("ind0", "moved0"), ("ind1", "moved1"), ("ind2", "moved2")}
    for pair in found["pairs"]:
        assert min(pair["similarity_a"], pair["similarity_b"]) >= 0.95


def test_disguised_copies_of_different_solutions_are_flagged_and_independent_styles_are_not():
    students = independent_students(10)  # some pairs share up to four small files as written
    for seed in range(2):
        rng = random.Random(seed)
        entries = [entry(f"ind{i}", files) for i, files in enumerate(students)]
        bases = rng.sample(range(10), 4)
        for base in bases:
            entries.append(entry(f"zcopy{base}", disguise(students[base], rng, KINDS)))
        found, pairs = flagged(entries)
        assert pairs == {(f"ind{base}", f"zcopy{base}") for base in bases}, seed
        for pair in found["pairs"]:
            assert min(pair["similarity_a"], pair["similarity_b"]) >= 0.9
    # four students who share no file (each file has six ways or more): far below the
    # threshold, whichever ways they start from
    for offset in range(8):
        alone = [entry(f"ind{i}", files) for i, files in enumerate(independent_students(4, offset))]
        found, _ = flagged(alone, threshold=0.0, min_overlap=0)
        assert max(max(pair["similarity_a"], pair["similarity_b"]) for pair in found["pairs"]) < 0.35


@pytest.mark.parametrize("ring, others", [(4, 10), (4, 2), (10, 4)])
def test_a_ring_of_copies_is_one_group_with_every_pair_however_common(ring, others):
    """Four (or ten) students holding one solution, each disguised its own way, among `others`
    independent ones: every pair inside the ring is listed and they are one group, whether the
    ring is a few of a large class or most of a small one (its code is then "common")."""
    students = independent_students(others + 1)
    rng = random.Random(ring)
    members = [f"ring{i}" for i in range(ring)]
    entries = [entry(members[0], students[0])]
    entries += [entry(sid, disguise(students[0], rng, KINDS)) for sid in members[1:]]
    entries += [entry(f"ind{i}", files) for i, files in enumerate(students[1:])]
    found, pairs = flagged(entries, limit=100)
    expected = {(a, b) for i, a in enumerate(members) for b in members[i + 1 :]}
    assert pairs == expected
    assert found["clusters"] == [{"members": members, "pairs": len(expected), "top": 1.0}]
    assert ring * (ring - 1) // 2 > found["common_over"] or ring > found["common_over"]


def test_common_code_weighs_less_but_a_copy_in_full_still_scores_in_full():
    """Twenty students share one helper (the usual way to write it: 60 % of each one's code) and
    wrote the rest alone: no pair, as the shared helper weighs `common / 20`; counted in full
    it pairs them all. Four of them identical in full: their six pairs, at 100 %, whatever the
    weighting."""
    rng = random.Random(5)
    shared = random_function(rng, "common", 18)
    students = [entry(f"s{i:02d}", synthetic_student(rng, shared)) for i in range(20)]
    found, pairs = flagged(students)
    assert pairs == set() and found["common_over"] == 3
    _, unweighted = flagged(students, min_common=100, limit=500)
    assert len(unweighted) == 190  # the weighting is what keeps them apart
    ring = [entry(f"ring{i}", students[0]["code"]) for i in range(3)]
    found, pairs = flagged([*students, *ring])
    members = ["ring0", "ring1", "ring2", "s00"]
    assert pairs == {(a, b) for i, a in enumerate(members) for b in members[i + 1 :]}
    assert all(pair["similarity_a"] == pair["similarity_b"] == 1.0 for pair in found["pairs"])


# The dead code a copier adds for free: each form, padded into a small function, changes nothing.
PLAIN = """
import torch

def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
"""
PADDINGS = [
    "pass",
    "'''a docstring'''",
    "...",
    "unused = torch.zeros(3)",
    "a = q\n    b = a * 2",
    "a = 1\n    b = a\n    a = b",
    "scores = scores",
    "scores += 0",
    "scores = scores * 1",
    "if False:\n        scores = scores + 1",
    "if 0 > 1:\n        print(q)",
    "if mask is None or True:\n        pass",
    "while False:\n        q = k",
    "print('debug', q.shape)",
    "assert q.dim() >= 2",
    "def helper(x):\n        return x + 1",
    "import os",
    "try:\n        pass\n    except ValueError:\n        raise",
]


@pytest.mark.parametrize("padding", PADDINGS)
def test_each_form_of_dead_code_is_stripped(padding):
    lines = PLAIN.splitlines()
    at = next(i for i, line in enumerate(lines) if "weights =" in line)
    padded = "\n".join(lines[:at] + ["    " + padding] + lines[at:])
    assert canonical({"attention.py": padded}) == canonical({"attention.py": PLAIN}), padding


@pytest.mark.parametrize(
    "padded",
    [
        PLAIN + "    print('never')\n",  # after the return
        PLAIN + "\n\ndef unused(x):\n    return x * 3\n",  # a function nothing calls
        PLAIN + "\n\nclass Unused:\n    def forward(self, x):\n        return x\n",  # a class nothing uses
        PLAIN.replace("weights @ v, weights", "(weights * 1) @ v.contiguous(), +weights"),  # identities
        PLAIN.replace("import torch", "import torch as th").replace("torch.", "th."),  # an alias
        PLAIN.replace("scores", "s").replace("weights", "w"),  # names
    ],
)
def test_dead_code_around_a_function_and_aliases_change_nothing(padded):
    assert canonical({"attention.py": padded}) == canonical({"attention.py": PLAIN})


def test_a_different_computation_is_not_normalised_away():
    """The normalisation keeps what a program computes: a different formula stays different."""
    other = PLAIN.replace("/ q.size(-1) ** 0.5", "/ q.size(-1)")
    assert canonical({"attention.py": other}) != canonical({"attention.py": PLAIN})
    reordered = PLAIN.replace("k.transpose(-2, -1)", "k.transpose(-1, -2)")
    assert canonical({"attention.py": reordered}) != canonical({"attention.py": PLAIN})


HOSTILE = {
    "deep": "x = " + "(" * 150 + "1" + ")" * 150 + "\n" + "y = a" + ".b" * 3000 + "\n",
    "binary": "\x00\x01\x02\xff" * 1000,
    "undecodable": "def f(x):\n    return x  # \ufffd\ufffd\n" * 50,
    "unterminated": "def f(x:\n    return '''\n",
    "long_line": "x = [" + ", ".join(str(i) for i in range(20000)) + "]\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_code_is_compared_without_raising(name):
    units = normalise.package_units({"attention.py": HOSTILE[name], "heads.py": PLAIN}, API)
    assert any(unit.file == "heads.py" for unit in units)  # the rest of the package is still read
    found = similarity.find_similar(
        [entry("a", {"x.py": HOSTILE[name]}), entry("b", {"x.py": HOSTILE[name]})], SKELETON
    )
    assert found["compared"] <= 2


def test_the_work_is_bounded_however_long_a_block_or_a_chain_of_dead_stores(monkeypatch):
    """Counted, not timed: a block longer than ORDERED_BLOCK is not reordered (no pair of its
    statements is compared), and stripping takes at most MAX_PASSES rounds however long a chain
    of stores that feed each other."""
    calls = {"conflict": 0, "rounds": 0}
    conflict, sweep = order._conflict, liveness.drop_dead_stores

    def counted_conflict(*args):
        calls["conflict"] += 1
        return conflict(*args)

    def counted_sweep(*args):
        calls["rounds"] += 1
        return sweep(*args)

    monkeypatch.setattr(order, "_conflict", counted_conflict)
    monkeypatch.setattr(liveness, "drop_dead_stores", counted_sweep)
    live = "def f(x):\n    a0 = x\n" + "".join(f"    a{i + 1} = a{i} * x\n" for i in range(5000)) + "    return a5000\n"
    dead = "def g(x):\n" + "".join(f"    b{i + 1} = b{i} + x\n" for i in range(3000)) + "    return x\n"
    units = normalise.package_units({"a.py": live, "b.py": dead}, API | {"f", "g"})
    assert calls["conflict"] == 0  # one block of 5002 statements: kept in its order
    assert calls["rounds"] <= dead_code.MAX_PASSES
    assert sum(len(u.tokens) for u in units if u.file == "a.py") > 5000 * 5  # all live: kept
    assert sum(len(u.tokens) for u in units if u.file == "b.py") < 40  # the whole chain feeds nothing: gone
    short = "def h(x):\n" + "".join(f"    c{i} = x * {i}\n" for i in range(100)) + "    return c0, c99\n"
    normalise.package_units({"c.py": short}, API | {"h"})
    assert 0 < calls["conflict"] <= 101 * 100 // 2  # a short block is ordered: each pair once
