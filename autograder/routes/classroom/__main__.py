"""`python -m autograder.routes.classroom STEP ...`: the step a Classroom workflow runs."""

import sys

from autograder.routes.classroom import main

if __name__ == "__main__":  # loaded by another name (the release's leak measure), it runs nothing
    sys.exit(main())
