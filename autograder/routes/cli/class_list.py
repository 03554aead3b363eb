"""`python -m autograder class-list PATHS...`: a frozen class list of the submissions (one absolute
path a line), for `grade --class-list`.
"""

import sys

from autograder.engine.operations.shard import ShardError, class_list_text


def run(args):
    missing = [str(path) for path in args.paths if not path.exists()]
    if missing:
        print(f"error: no such submission: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        sys.stdout.write(class_list_text(args.paths))
    except ShardError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{len(set(args.paths))} submissions", file=sys.stderr)
    return 0
