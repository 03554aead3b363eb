"""Grade the public corpus (tests/corpus.py) and say, item by item, what the grader does not do yet.

    python tests/tools/corpus_status.py [ITEM-SUBSTRING ...]           # the table
    python tests/tools/corpus_status.py --write [ITEM-SUBSTRING ...]   # and rewrite each item's [pending]

tests/test_corpus.py asserts the same thing item by item; run this after a change to the grader
(a fix, a new diagnosis) to see which items moved and to update their [pending] entries in one go:
an entry a fix made untrue fails its test as an XPASS until it is removed.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import corpus  # noqa: E402
from autograder.engine.course import config as grading_config  # noqa: E402
from autograder.engine.judge.runner import grade  # noqa: E402


def main(argv) -> int:
    write = "--write" in argv
    wanted = [a for a in argv if not a.startswith("--")]
    items = [i for i in corpus.load() if not wanted or any(w in i.id for w in wanted)]
    root = Path("/tmp") / "corpus-status"
    for item in items:
        config = grading_config.load(assignment=item.assignment)
        submission = item.submission(root / item.assignment)
        results = {seed: grade(submission, config, reference=corpus.SOLUTIONS, seed=seed) for seed in corpus.SEEDS}
        pending = corpus.status(item, results)
        changed = pending != item.pending
        print(f"{item.id:50s} {item.kind:5s} {'CHANGED ' if changed else ''}{pending or 'ok'}", flush=True)
        if write and changed:
            corpus.write_pending(item, pending)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
