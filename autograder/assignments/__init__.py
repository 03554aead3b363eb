"""One folder per assignment (see autograder/engine/course/assignment.py for what a folder holds)."""
