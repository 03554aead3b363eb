"""What the routes hand out, built in one place: it imports the engine, never a route.

    student_release, release, student_readme    the kit students get (release.py adds notebooks)
    student_notebook, nbgrader_course, grader_home   the notebooks and the nbgrader course
    classroom_workflow                          the GitHub Classroom workflow of a release
    gradescope                                  the Gradescope autograder zip and results.json
    public_view, check_cell, plots              what a student may see of a graded run: the view,
                                                a check cell's report and score, the pictures
    nbgrader_gradebook                          the judge's scores in nbgrader's gradebook

Routes (routes/) are leaves: what two of them share lives here or in the engine.
"""
