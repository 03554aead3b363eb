"""The judge pipeline: runner.py runs plan -> observe -> judge -> score over a submission's steps;
observation.py reads what a worker reports against the judge's own facts; remote.py observes in
the sandbox; feedback.py says why a step lost points (example.py and shrink.py find its smallest
failing input); results.py holds what every route shows (data only: table.py prints it,
result_files.py writes and reads it)."""
