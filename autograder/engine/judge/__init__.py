"""The judge pipeline: runner.py runs plan -> observe -> judge -> score over a submission's steps;
observation.py reads what a worker reports against the judge's own facts; remote.py observes in
the sandbox; feedback.py and shrink.py say why a step lost points; results.py holds what every
route shows (data only: table.py prints it, result_files.py writes and reads it)."""
