"""A solution region that is a ladder of shape changes keeps its ladder in the skeleton, as
nanoGPT's `forward` reads: one line per assignment, each with its shape comment, the right-hand
sides left to the student, the `return` the line that raises (engine/generate/skeleton.py)."""

import ast
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine.generate.skeleton import PLACEHOLDER, ladder, skeleton_source, solution_regions
from conftest import ASSIGNMENTS, SOLUTIONS

REFERENCE_FILES = sorted(SOLUTIONS.glob("*/*.py"))


def statements(region: str) -> list:
    """The assignments and returns of a region, at any depth, in the order they are written."""
    found = [
        node for node in ast.walk(ast.parse(textwrap.dedent(region))) if isinstance(node, (ast.Assign, ast.Return))
    ]
    return sorted(found, key=lambda node: node.lineno)


def trailing_comment(region: str, node) -> str:
    line = textwrap.dedent(region).splitlines()[node.end_lineno - 1]
    return line[line.index("  #") + 2 :] if "  #" in line else ""


@pytest.mark.parametrize("path", REFERENCE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_ladder_keeps_one_line_per_step_with_its_shape(path):
    """Each ladder of the reference reaches the skeleton with as many lines as the reference has
    assignments and returns, in order, each with the reference line's comment and no right-hand
    side of the reference; the skeleton still compiles."""
    source = path.read_text(encoding="utf-8")
    skeleton = skeleton_source(source, str(path))
    compile(skeleton, str(path), "exec")
    for region in solution_regions(source):
        rungs = ladder(region + "\n")
        if rungs is None:
            continue
        steps = statements(region)
        code_rungs = [rung for rung in rungs if rung and not rung.startswith("#")]
        assert len(code_rungs) == len(steps), (path.name, rungs)
        for rung, node in zip(code_rungs, steps, strict=True):
            comment = trailing_comment(region, node)
            if isinstance(node, ast.Return):
                assert rung.startswith(PLACEHOLDER) and rung.endswith(comment.lstrip("# ")), rung
            else:
                assert rung.split(" = ")[-1].split("  #")[0].strip(" .,") == "" and rung.endswith(comment), rung
        indent = region[: len(region) - len(region.lstrip())].rsplit("\n", 1)[-1]
        assert "".join(f"{indent}{rung}\n" if rung else "\n" for rung in rungs) in skeleton, path.name


def test_the_module_forward_is_a_ladder_of_shapes():
    """mha's forward: the student file shows each shape change of the reference on its own line
    (q, k, v split into heads, the scores, the mask, the weights, the merged heads)."""
    forward = (ASSIGNMENTS / "mha" / "mha.py").read_text(encoding="utf-8").split("def forward", 1)[1]
    for shape in ["# (B, H, Lq, d_k)", "# (B, H, Lk, d_k)", "# (B, H, Lq, Lk)", "# (B, Lq, D)"]:
        assert shape in forward, shape
    assert forward.rstrip().endswith(f"{PLACEHOLDER}  # return (B, Lq, D)")
    regions = solution_regions((SOLUTIONS / "mha" / "mha.py").read_text(encoding="utf-8"))
    assert len([rung for rung in ladder(regions[-1] + "\n") if " = ..." in rung]) == 12


def test_a_ladder_runs_up_to_its_return():
    """The `...` lines run (a tuple target unpacks as many `...`), so the untouched ladder stops at
    the NotImplementedError line: the grader says "not implemented", not a TypeError."""
    region = (
        "    a = f(x)  # (B, L)\n    m, n = a.shape  # sizes\n    if m:\n        a = g(a)  # (B, L)\n"
        "    else:\n        a = h(a)  # (L, B)\n    b = a.T  # (L, B)\n    return b  # (L, B)\n"
    )
    rungs = ladder(region)
    assert rungs == [
        "a = ...  # (B, L)",
        "m, n = ..., ...  # sizes",
        "# if m:",
        "a = ...  # (B, L)",
        "# else:",
        "a = ...  # (L, B)",
        "b = ...  # (L, B)",
        f"{PLACEHOLDER}  # return (L, B)",
    ]
    with pytest.raises(NotImplementedError):
        exec("\n".join(rungs), {})


@pytest.mark.parametrize(
    "region",
    [
        "    a = f(x)  # (B, L)\n    b = g(a)  # (B, L)\n    c = h(b)  # (B, L)\n",  # no return
        "    a = f(x)  # (B, L)\n    b = g(a)  # (B, L)\n    return b\n",  # two shapes only
        "    for i in r:\n        a[i] = f(x)  # (B, L)\n    b = g(a)  # (B, L)\n    c = 1  # (B,)\n    return c  # (B,)\n",
        "    a = f(x)  # (B, L)\n    a[0] = 1  # (L,)\n    b = g(a)  # (B, L)\n    return b  # (B, L)\n",
    ],
)
def test_what_is_not_a_ladder_stays_one_raise(region):
    assert ladder(region) is None
    source = f"def f(x):\n    ### BEGIN SOLUTION\n{region}    ### END SOLUTION\n"
    assert skeleton_source(source) == f"def f(x):\n    {PLACEHOLDER}\n"


NAMES = st.sampled_from(["q", "k", "v", "scores", "out", "self.w"])
SHAPES = st.lists(st.sampled_from("BHLDk"), min_size=1, max_size=4).map(lambda dims: f"# ({', '.join(dims)})")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(NAMES, SHAPES), min_size=3, max_size=8), SHAPES)
def test_any_ladder_keeps_its_targets_and_shapes_in_order(steps, last):
    """Over generated ladders: the skeleton region is the same targets and comments, in order,
    and never a right-hand side of the reference."""
    body = "".join(f"        {name} = secret_{i}(x)  {shape}\n" for i, (name, shape) in enumerate(steps))
    source = f"class M:\n    def forward(self, x):\n        ### BEGIN SOLUTION\n{body}        return out  {last}\n        ### END SOLUTION\n"
    skeleton = skeleton_source(source)
    assert "secret_" not in skeleton and "return out" not in skeleton
    expected = "".join(f"        {name} = ...  {shape}\n" for name, shape in steps)
    assert expected + f"        {PLACEHOLDER}  # return {last[2:]}\n" in skeleton
