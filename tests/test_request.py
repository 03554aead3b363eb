"""engine/judge/request.py: which assignment a request grades, its reference, its hidden seed, and
the worker server started once grading.yml is valid (what `grade` asked of the engine inline)."""

import pytest

from autograder.engine.course import config as grading_config
from autograder.engine.judge import request as request_module
from autograder.engine.judge.plan import seed_source
from autograder.engine.judge.request import Request, RequestError
from conftest import KIT, SOLUTIONS


@pytest.fixture
def graded():
    return grading_config.load_all()


def test_the_assignment_is_the_one_named_else_found_else_the_first(graded, tmp_path):
    last = graded[-1]
    assert Request(paths=[tmp_path], assignment=last.id).assignments(graded) == ([last], False)
    (tmp_path / last.package).mkdir()
    (tmp_path / last.package / "__init__.py").write_text("")
    assert Request(paths=[tmp_path]).assignments(graded) == ([last], True)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert Request(paths=[empty]).assignments(graded) == (graded[:1], False)
    with pytest.raises(grading_config.ConfigError, match="no assignment `nope`"):
        Request(paths=[tmp_path], assignment="nope").assignments(graded)


def test_a_submission_of_several_assignments_is_refused_where_one_result_is_written(graded):
    Request(paths=[KIT / "assignments"]).one_assignment(graded[:1])
    if len(graded) > 1:
        with pytest.raises(RequestError, match="holds several assignments .*choose one with --assignment"):
            Request(paths=[KIT / "assignments"]).one_assignment(graded)


def test_the_reference_must_hold_each_package_unless_public_only(graded, tmp_path):
    Request(reference=SOLUTIONS).check_reference(graded)
    with pytest.raises(RequestError, match=f"no reference {graded[0].package}/ in {tmp_path}"):
        Request(reference=tmp_path).check_reference(graded)
    public = Request(reference=tmp_path, public_only=True)
    public.check_reference(graded)
    assert public.hidden_reference is None and Request(reference=SOLUTIONS).hidden_reference == SOLUTIONS


def test_the_hidden_seed_is_the_one_given_else_the_course_s(graded):
    assert Request(seed=7).hidden_seed(graded[0]) == (7, "--seed")
    assert Request().hidden_seed(graded[0]) == seed_source(graded[0])


def test_the_worker_server_starts_only_for_isolated_grading(graded, monkeypatch):
    started = []
    monkeypatch.setattr(request_module.fork_server, "start", started.append)
    monkeypatch.setattr(request_module.kit_view, "SECRET_PATHS", set())
    assert [c.id for c in Request(isolate=False).load()] == [c.id for c in graded]
    assert started == [] and set() == request_module.kit_view.SECRET_PATHS
    outside = KIT / "elsewhere"
    assert [c.id for c in Request(reference=outside).load()] == [c.id for c in graded]
    assert started == [request_module.PRELOAD] and str(outside) in request_module.kit_view.SECRET_PATHS
