"""One grading run, for any assignment grading.yml describes; its folders, bottom up (each imports
only those above it in this list, tests/test_architecture.py):

    checks/      what a check is and speaks with: the Check contract, earlier steps' charges,
                 message catalogs keyed by id, printable text, an assignment's folder
    scan/        the submission before it runs: staging, its file graph, the source policy
    course/      grading.yml read and validated into Assignments; the grading torch
    mistakes/    naming the likely mistake: diagnosis, fingerprints, the evidence rule they share
    judge/       plan -> observe -> judge -> score, and the results every route shows
    operations/  the instructor's batch: many submissions, shards, their merge
    generate/    not grading: skeletons, catalogs, fingerprints (`python -m autograder generate`)
"""
