"""`python -m autograder ...`: the command line (autograder/routes/cli.py)."""
import sys

from autograder.routes.cli import main

if __name__ == "__main__":
    sys.exit(main())
