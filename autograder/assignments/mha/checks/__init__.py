"""The checks of the multi-head attention assignment: one module per step, named by the step id.

A step module defines Check subclasses (autograder/engine/checks/check.py): public ones first, then the
hidden ones, which compare against the reference solution on inputs made at grading time. It may
also define probes (Check subclasses with a `diagnosis` id, unscored) and FILES (the student
files the step grades, for the source scan). Its known mistakes live in ../mistakes/, apart,
because they quote the reference. The engine loads them (autograder/engine/course/assignment.py).
"""
