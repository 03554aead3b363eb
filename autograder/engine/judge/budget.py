"""A submission's time budget (grading.yml `budget`): what grading one submission may take.

    budget = Budget(120)          # starts now: the judge's scan and every check spend it
    budget.left()                 # seconds left (inf without a budget)
    with budget.paused():         # the explanations: bounded on their own, they spend none of it
        ...

The budget bounds what a grade needs: the judge's own scan of the files (plan.py) and the checks.
What only explains a grade (probes, the smallest failing example) runs paused: it has bounds of
its own and never leaves a check without the time it would have had.
"""

import math
import time
from contextlib import contextmanager


class Budget:
    """The seconds one submission's grading may take, from its start (None: no limit)."""

    def __init__(self, seconds: float = None):
        self.seconds = seconds
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.frozen = None  # the seconds left when paused() began (what left() says meanwhile)

    def left(self) -> float:
        """Seconds left: inf without a budget, <= 0 once it is spent."""
        if self.deadline is None:
            return math.inf
        if self.frozen is not None:
            return self.frozen
        return self.deadline - time.monotonic()

    @contextmanager
    def paused(self):
        """Time spent in the block is not charged: left() stays what it was when it began, and
        the deadline moves by the time the block took."""
        if self.deadline is None or self.frozen is not None:
            yield
            return
        self.frozen = self.left()
        try:
            yield
        finally:
            self.deadline, self.frozen = time.monotonic() + self.frozen, None
