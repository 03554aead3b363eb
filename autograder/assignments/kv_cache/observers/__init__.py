"""The half of the kv_cache checks that runs student code: one module per step (named by the step
id), each function an observer that a check of autograder/assignments/kv_cache/checks/ names.
Observers run beside the student's code (autograder/harness/), so they import nothing of the
judge: no oracle, no hidden check, no known mistake, no reference. Modules whose names start with
`_` hold helpers, not observers.
"""
