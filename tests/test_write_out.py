"""harness/write_out.py: finding what computes an earlier function, and writing it out."""

import types

from autograder.harness.write_out import functions_with


def callable_objects(count):
    """`count` classes with a __call__ each (distinct codes, from source like a student's file),
    and one instance of each."""
    namespace = {}
    source = "".join(
        f"class Attend{i}:\n    def __call__(self, q, k, v, mask=None):\n        return q * {i}\n\n\n"
        f"attend{i} = Attend{i}()\n\n\n"
        for i in range(count)
    )
    exec(compile(source, "/student/mha/attention.py", "exec"), namespace)  # noqa: S102 - our own source
    return [namespace[f"attend{i}"] for i in range(count)]


def test_every_callable_objects_call_is_found_however_many_copies_the_walk_makes():
    """The walk reads a class's and an instance's attributes through copies (dict(vars(...))),
    freed once read: a later copy at the same address must not be taken for one already seen.
    With the walk taking ids alone for seen (h-leak 5b6a4e3), 39 of these 40 __call__s were
    missed, and an attention written as a callable object was charged again in the module step,
    by chance, check by check (test_one_charge)."""
    objects = callable_objects(40)
    codes = {type(item).__call__.__code__ for item in objects}
    package = types.SimpleNamespace(_directory="/student/mha")
    for item in objects:  # each alone, as harness/earlier.py asks, and all at once
        assert functions_with(package, [item], {type(item).__call__.__code__}) == [type(item).__call__]
    assert {function.__code__ for function in functions_with(package, objects, codes)} == codes
