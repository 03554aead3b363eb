"""What runs beside student code: in a sandboxed worker, or in the student's own process.

Nothing here judges. It loads the student's package (package.py), runs one observer function on
it under a time limit and the forbidden-call watch (observe.py, watch.py), and reports what it saw
as plain data: values, an exception raised, a timeout, a contract the code does not meet. The
worker server preloads serve.py; the simulated CUDA device (fake_cuda.py) also runs here.

This package imports nothing of the judge (autograder.engine, autograder.routes): the judge
imports it, never the reverse (tests/test_architecture.py). Hidden checks, oracles, known
mistakes and the reference never load beside student code.
"""
