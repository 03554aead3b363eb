"""A grading request: what a route asks of the engine, before any submission is graded.

    request = Request(paths=[Path("alice")], reference=KIT / "solutions")
    graded = request.load()                  # grading.yml validated; the worker server started
    chosen, found = request.assignments(graded)   # the Assignment(s) the submission is graded as
    request.check_reference(chosen)          # RequestError: no reference mha/ in DIR
    seed, source = request.hidden_seed(chosen[0])

The command line's `grade` reads its options into one; what a route prints of it (the
assignment it took, the warnings) stays the route's. RequestError is a mistake in the request:
its message says which and how to ask again (exit 2 at the command line).
"""

from dataclasses import dataclass, field
from pathlib import Path

from autograder.engine.course import config as grading_config
from autograder.engine.course.secret import course_dir
from autograder.sandbox import fork_server, kit_view

PRELOAD = "autograder.harness.serve"  # what the worker server imports before it forks


class RequestError(ValueError):
    """A request the engine cannot grade as asked (several assignments, no reference)."""


@dataclass
class Request:
    """`paths`: the submissions (the first decides the assignment); `config`: grading.yml (None:
    the kit's); `assignment`: its id, else found in the submission; `reference`: the folder
    holding the reference package (None, or `public_only`: public checks only); `seed`: the hidden checks' seed
    (None: grading.yml's, else the course secret's); `isolate`: student code in sandboxed
    workers (the worker server starts in load)."""

    paths: list = field(default_factory=list)
    config: Path = None
    assignment: str = None
    reference: Path = None
    public_only: bool = False
    seed: int = None
    isolate: bool = True

    @property
    def hidden_reference(self):
        """The reference the hidden checks run against, None for public checks only."""
        return None if self.public_only else self.reference

    def load(self) -> list:
        """The Assignments of grading.yml, validated, with the worker server started where
        student code runs isolated. All of grading.yml (check ids, forbidden names: torch loads)
        is validated before the server starts, unless this very file passed that on this machine
        before: then the server's torch import overlaps ours, and a failure still raises."""
        early = self.isolate and grading_config.validated_before(self.config)
        if self.isolate:
            # a reference, configuration or course folder (the secret) kept outside the kit: closed to the workers too
            kit_view.SECRET_PATHS.update(str(p) for p in (self.reference, self.config, course_dir()) if p)
        if early:
            fork_server.start(PRELOAD)  # it imports its torch while this process goes on
        graded = grading_config.load_all(self.config)
        if not early:  # an early start means the file is remembered already
            grading_config.remember_valid(self.config)
        if self.isolate and not early:
            fork_server.start(PRELOAD)
        return graded

    def assignments(self, graded: list) -> tuple:
        """(the Assignments of `graded` the submission is graded as, whether they were found in
        it): the one `assignment` names, else those whose package the first path holds, else
        the first of grading.yml."""
        if self.assignment:
            path = self.config or grading_config.default_path()
            return [grading_config.choose(graded, self.assignment, path)], False
        found = grading_config.found_in(graded, self.paths[0])
        return found or graded[:1], bool(found)

    def one_assignment(self, chosen: list) -> None:
        """RequestError where the submission holds several assignments and the route writes one
        result (a batch, a JSON, Gradescope's results)."""
        if len(chosen) > 1:
            raise RequestError(
                f"{self.paths[0]} holds several assignments ({', '.join(c.id for c in chosen)}): "
                "choose one with --assignment"
            )

    def check_reference(self, chosen: list) -> None:
        """RequestError where the reference folder lacks the package of an assignment of `chosen`."""
        reference = self.hidden_reference
        for config in chosen:
            if reference is not None and not (Path(reference) / config.package).is_dir():
                raise RequestError(f"no reference {config.package}/ in {reference} (use --public-only without one)")

    def hidden_seed(self, config) -> tuple:
        """(the hidden checks' seed for `config`, where it comes from: "--seed", "grading.yml",
        "secret" or "public"; plan.seed_source)."""
        from autograder.engine.judge.plan import seed_source  # late: torch, once the worker server imports its own

        return (self.seed, "--seed") if self.seed is not None else seed_source(config)
