"""Build tools, not grading: the student skeletons (skeleton.py), the message catalogs
(catalogs.py), the fingerprints (fingerprint_build.py), all made by `python -m autograder
generate` (generated.py). Not shipped to students."""
