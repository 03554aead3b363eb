"""One folder per assignment (see autograder/engine/assignment.py for what a folder holds)."""
