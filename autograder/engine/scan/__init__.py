"""The submission before any of it runs: staging it into scratch (submission.py), the files its
code reaches and the forbidden names it uses (forbidden.py), and the allow-list that tells
tampering from code (source_policy.py)."""
