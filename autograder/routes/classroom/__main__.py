"""`python -m autograder.routes.classroom STEP ...`: the step a Classroom workflow runs."""

import sys

from autograder.routes.classroom import main

sys.exit(main())
