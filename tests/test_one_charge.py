"""One mistake, one charge in the integration steps, for wrappers and for forbidden calls
(harness/earlier.py, engine/checks/earlier.py).

* Wrappers: whatever the module calls that computes an earlier step's function is judged as that
  step. The shapes are generated: the earlier function written plainly, decorated (torch's and
  the student's own decorator), as a callable object, as a closure, or handing its work to a
  class that the module then calls directly; the module calling it directly, through a class
  with __call__ (holding the function or calling it), a closure, functools.partial (made in
  __init__ or at import), a lambda, a method that forwards, a default argument, or its own
  instance of the class. With a planted mistake in the earlier step, it is charged once: the
  earlier step loses points, the module keeps all of its own.
* Excuses come from the judge's own facts: a forbidden call in the module's own code is charged
  to the module, always, however it is spelled, while its attention calls the same function
  (the red team below: each spelling made the module score 10 / 10 or 9.47 / 10 on main 7d8dbad
  where marked). A forbidden call made inside the earlier function alone costs that step only.
* A student release holds no written-out function: the module's checks that a wrong earlier
  function spoils say they depend on that step (no points there, the maximum kept), and the
  grade of record judges them with it written out.

The whole matrix is slow (CI); the quick run keeps the shapes main charged twice.
"""

import textwrap

import pytest

from autograder.engine.course import config as grading_config
from autograder.engine.judge.runner import grade
from conftest import SOLUTIONS

SEED = 5
REFERENCE_MHA = (SOLUTIONS / "mha" / "mha.py").read_text()

# ---------------------------------------------------------------------------- the sources

# The attention's body, with its planted mistake (a scale of sqrt(2 d_k)) where `mistake` says.
BODY = """\
d_k = q.size(-1)
scores = q @ k.transpose(-2, -1) / math.sqrt(d_k * {scale})
if mask is not None:
    scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
weights = torch.softmax(scores, dim=-1)
return weights @ v, weights
"""
HEAD = "import functools\nimport math\n\nimport torch\nimport torch.nn.functional as F\n\n"


def body(indent, scale="2"):
    return textwrap.indent(BODY.format(scale=scale), " " * indent)


def attention_shape(shape, scale="2"):
    """attention.py with the earlier function written in `shape`."""
    plain = "def scaled_dot_product_attention(q, k, v, mask=None):\n" + body(4, scale)
    if shape == "plain":
        return HEAD + plain
    if shape == "torch_decorated":
        return HEAD + "@torch.no_grad()\n" + plain
    if shape == "own_decorator":
        decorator = (
            "def logged(function):\n    @functools.wraps(function)\n    def wrapper(*args, **kwargs):\n"
            "        return function(*args, **kwargs)\n\n    return wrapper\n\n\n@logged\n"
        )
        return HEAD + decorator + plain
    if shape == "callable_object":
        return (
            HEAD
            + "class ScaledDotProductAttention:\n    def __call__(self, q, k, v, mask=None):\n"
            + body(8, scale)
            + "\n\nscaled_dot_product_attention = ScaledDotProductAttention()\n"
        )
    if shape == "closure":
        return (
            HEAD
            + f"def make(factor={scale}):\n    def scaled_dot_product_attention(q, k, v, mask=None):\n"
            + body(8, "factor")
            + "\n    return scaled_dot_product_attention\n\n\nscaled_dot_product_attention = make()\n"
        )
    if shape == "delegating":
        return (
            HEAD
            + "class Core:\n    def __call__(self, q, k, v, mask=None):\n"
            + body(8, scale)
            + "\n\n_core = Core()\n\n\ndef scaled_dot_product_attention(q, k, v, mask=None):\n"
            + "    return _core(q, k, v, mask)\n"
        )
    raise ValueError(shape)


FORWARD = """
    def forward(self, query, key=None, value=None, pad_mask=None):
        key = query if key is None else key
        value = key if value is None else value
        q = split_heads(self.w_q(query), self.num_heads)
        k = split_heads(self.w_k(key), self.num_heads)
        v = split_heads(self.w_v(value), self.num_heads)
        Lq, Lk = q.shape[-2], k.shape[-2]
        blocked = torch.zeros(Lq, Lk, dtype=torch.bool, device=q.device)
        if self.causal:
            blocked = torch.ones_like(blocked).triu(diagonal=1)
        if pad_mask is not None:
            blocked = blocked | pad_mask[:, None, None, :]
"""


def module(forward_body, imports="", init="", methods="", after=""):
    """mha.py: the reference's __init__ (with `init` added), a forward that projects, splits and
    masks, then runs `forward_body`."""
    head = REFERENCE_MHA[: REFERENCE_MHA.index("    def forward(")]
    head = head.replace(
        "from .heads import merge_heads, split_heads", "from .heads import merge_heads, split_heads\n" + imports
    )
    head = head.replace(
        "        self.causal = causal\n", "        self.causal = causal\n" + textwrap.indent(init, " " * 8)
    )
    methods = textwrap.indent(textwrap.dedent(methods), "    ") if methods else ""
    return head + methods + FORWARD + textwrap.indent(textwrap.dedent(forward_body), " " * 8) + after


USE = "out, w = {call}(q, k, v, blocked)\nreturn self.w_o(merge_heads(self.dropout(w) @ v))\n"
IMPORT = "import functools\nfrom .attention import scaled_dot_product_attention\n"
CLASS_OF = {"callable_object": "ScaledDotProductAttention", "delegating": "Core"}

# how the module reaches the attention: name -> module() keyword arguments
WRAPPERS = {
    "direct": dict(forward_body=USE.format(call="scaled_dot_product_attention")),
    "class_call": dict(
        forward_body=USE.format(call="self.attend"),
        init="self.attend = Attend()\n",
        after="\n\nclass Attend:\n    def __call__(self, q, k, v, mask=None):\n"
        "        return scaled_dot_product_attention(q, k, v, mask)\n",
    ),
    "class_holds_function": dict(
        forward_body=USE.format(call="self.attend"),
        init="self.attend = Attend(scaled_dot_product_attention)\n",
        after="\n\nclass Attend:\n    def __init__(self, fn):\n        self.fn = fn\n\n"
        "    def __call__(self, q, k, v, mask=None):\n        return self.fn(q, k, v, mask)\n",
    ),
    "closure": dict(
        forward_body=USE.format(call="self.attend"),
        init="def attend(q, k, v, mask):\n    return scaled_dot_product_attention(q, k, v, mask)\n\n"
        "self.attend = attend\n",
    ),
    "partial": dict(
        forward_body=USE.format(call="self.attend"),
        init="self.attend = functools.partial(scaled_dot_product_attention)\n",
    ),
    "partial_at_import": dict(
        forward_body=USE.format(call="ATTEND"),
        imports="ATTEND = functools.partial(scaled_dot_product_attention)\n",
    ),
    "lambda": dict(
        forward_body=USE.format(call="self.attend"),
        init="self.attend = lambda q, k, v, m: scaled_dot_product_attention(q, k, v, m)\n",
    ),
    "forwarding_method": dict(
        forward_body=USE.format(call="self._attend"),
        methods="def _attend(self, q, k, v, mask):\n    return scaled_dot_product_attention(q, k, v, mask)\n\n",
    ),
    "default_argument": dict(
        forward_body=USE.format(call="self._attend"),
        methods="def _attend(self, q, k, v, mask, fn=scaled_dot_product_attention):\n    return fn(q, k, v, mask)\n\n",
    ),
}


def own_instance(shape):
    """The module makes its own instance of the class that computes the attention."""
    name = CLASS_OF[shape]
    return dict(
        forward_body=USE.format(call="self.attend"),
        imports=f"from .attention import {name}\n",
        init=f"self.attend = {name}()\n",
    )


SHAPES = ["plain", "torch_decorated", "own_decorator", "callable_object", "closure", "delegating"]
MATRIX = [(shape, wrapper) for shape in SHAPES for wrapper in WRAPPERS] + [
    (shape, "own_instance") for shape in CLASS_OF
]
# charged twice on main 7d8dbad (the module lost points too): the quick run keeps these
CHARGED_TWICE_ON_MAIN = {
    ("torch_decorated", "partial_at_import"),
    ("callable_object", "own_instance"),
    ("delegating", "own_instance"),
    ("closure", "default_argument"),
}


def submission(tmp_path, files, package="mha"):
    root = tmp_path / "submission"
    import shutil

    shutil.copytree(SOLUTIONS / package, root / package)
    for name, text in files.items():
        (root / package / name).write_text(text)
    return root


def graded(root, steps, assignment="mha", isolate=False):
    config = grading_config.load(assignment=assignment)
    result = grade(root, config, reference=SOLUTIONS, seed=SEED, steps=steps, isolate=isolate)
    return {step.id: step for step in result.steps}


def lost(step):
    return [f"{c.id}: {c.message[:160]}" for c in step.checks if c.passed is not True]


# ---------------------------------------------------------------------------- wrappers


def marks(s, w):
    return [] if (s, w) in CHARGED_TWICE_ON_MAIN else [pytest.mark.slow]


@pytest.mark.parametrize(
    "shape,wrapper",
    [pytest.param(s, w, marks=marks(s, w), id=f"{s}-{w}") for s, w in MATRIX],
)
def test_an_attention_mistake_is_charged_once_however_the_module_reaches_it(tmp_path, shape, wrapper):
    kwargs = own_instance(shape) if wrapper == "own_instance" else WRAPPERS[wrapper]
    mha = module(**{**kwargs, "imports": IMPORT + kwargs.get("imports", "")})
    steps = graded(
        submission(tmp_path, {"attention.py": attention_shape(shape), "mha.py": mha}),
        ["attention", "multi_head_attention"],
    )
    assert steps["attention"].score < steps["attention"].max_score  # the mistake is the attention's
    assert lost(steps["multi_head_attention"]) == []  # and costs the module nothing


@pytest.mark.slow
@pytest.mark.parametrize("wrapper", ["direct", "class_holds_function", "own_instance"])
def test_a_callable_object_attention_is_charged_once_in_the_sandboxed_grade(tmp_path, wrapper):
    """The grade of record (the sandboxed worker) writes a callable object out as in-process
    grading does: its __call__ is found however many copies of attributes the walk makes
    (tests/test_write_out.py). Charged again in the module's pad_mask, dropout and hidden checks,
    by chance, before that fix."""
    kwargs = own_instance("callable_object") if wrapper == "own_instance" else WRAPPERS[wrapper]
    mha = module(**{**kwargs, "imports": IMPORT + kwargs.get("imports", "")})
    root = submission(tmp_path, {"attention.py": attention_shape("callable_object"), "mha.py": mha})
    steps = graded(root, ["attention", "multi_head_attention"], isolate=True)
    assert steps["attention"].score < steps["attention"].max_score
    assert lost(steps["multi_head_attention"]) == []


@pytest.mark.parametrize("shape,wrapper", [("plain", "direct"), ("delegating", "own_instance")])
def test_every_wrapper_shape_is_right_when_the_attention_is(tmp_path, shape, wrapper):
    """The same sources with the right scale: full marks in both steps (the shapes are no mistake)."""
    kwargs = own_instance(shape) if wrapper == "own_instance" else WRAPPERS[wrapper]
    mha = module(**{**kwargs, "imports": IMPORT + kwargs.get("imports", "")})
    files = {"attention.py": attention_shape(shape, scale="1"), "mha.py": mha}
    steps = graded(submission(tmp_path, files), ["attention", "multi_head_attention"])
    assert lost(steps["attention"]) == [] and lost(steps["multi_head_attention"]) == []


@pytest.mark.slow
def test_the_modules_own_mistake_is_still_charged_beside_a_wrapped_attention_mistake(tmp_path):
    kwargs = own_instance("delegating")
    forward = kwargs["forward_body"].replace("return self.w_o(", "return 2 * self.w_o(")
    mha = module(**{**kwargs, "forward_body": forward, "imports": IMPORT + kwargs["imports"]})
    steps = graded(
        submission(tmp_path, {"attention.py": attention_shape("delegating"), "mha.py": mha}), ["multi_head_attention"]
    )
    assert steps["multi_head_attention"].score < 1


KV_GQA = (SOLUTIONS / "kv_cache" / "gqa.py").read_text()
KV_DECODER = (SOLUTIONS / "kv_cache" / "decoder.py").read_text()
KV_CALL = "out = grouped_query_attention(q, k, v, blocked)"


def kv_delegating_gqa():
    """gqa.py whose grouped_query_attention (no scale: the mistake) hands its work to a class."""
    source = KV_GQA.replace("def grouped_query_attention(", "def _grouped_query_attention(")
    source = source.replace("/ math.sqrt(q.size(-1))", "")
    return source + (
        "\n\nclass Grouped:\n    def __call__(self, q, k, v, mask=None):\n"
        "        return _grouped_query_attention(q, k, v, mask)\n\n\n_grouped = Grouped()\n\n\n"
        "def grouped_query_attention(q, k, v, mask=None):\n    return _grouped(q, k, v, mask)\n"
    )


@pytest.mark.slow
@pytest.mark.parametrize("call", ["Grouped()", "functools.partial(grouped_query_attention)"])
def test_a_grouped_attention_mistake_is_charged_once_through_a_wrapper_in_the_decoder(tmp_path, call):
    assert "/ math.sqrt(q.size(-1))" in KV_GQA and KV_CALL in KV_DECODER
    decoder = KV_DECODER.replace(KV_CALL, "out = self.attend(q, k, v, blocked)")
    decoder = decoder.replace(
        "        self.d_k = d_model // n_heads\n",
        f"        self.d_k = d_model // n_heads\n        self.attend = {call}\n",
    )
    decoder = "import functools\nfrom .gqa import Grouped\n" + decoder
    root = submission(tmp_path, {"gqa.py": kv_delegating_gqa(), "decoder.py": decoder}, package="kv_cache")
    steps = graded(root, ["grouped_query_attention", "decoder"], assignment="kv_cache")
    assert steps["grouped_query_attention"].score < steps["grouped_query_attention"].max_score
    assert lost(steps["decoder"]) == []


# ---------------------------------------------------------------------------- forbidden calls

ATTENTION_FORBIDDEN = (
    HEAD
    + """\
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)
    return out, weights
"""
)
FAST = """
def fast(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask), weights
"""
SNEAKY_MASK = """

class Blocked(torch.Tensor):
    # a mask that runs the fused kernel when the attention fills with it
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "masked_fill":
            q = args[0]
            F.scaled_dot_product_attention(q[..., None], q[..., None], q[..., None])
        return super().__torch_function__(func, types, args, kwargs or {})
"""
MODULE_IMPORTS = "import math\nimport torch.nn.functional as F\nfrom .attention import scaled_dot_product_attention\n"

# name -> (attention.py, mha.py, whether the module's own code calls the forbidden function)
SPELLINGS = {
    # the module calls it beside its attention, which calls it too (9.47 / 10 on main where the
    # module told its own attention from the written-out one; 0 on main without the trick)
    "beside_the_attention": (
        ATTENTION_FORBIDDEN,
        module(
            "_, w = scaled_dot_product_attention(q, k, v, blocked)\n"
            "out = F.scaled_dot_product_attention(q, k, v, attn_mask=~blocked)\n"
            "return self.w_o(merge_heads(out))\n",
            MODULE_IMPORTS,
        ),
        True,
    ),
    "only_while_not_written_out": (  # 9.47 / 10 on main
        ATTENTION_FORBIDDEN.replace("return out, weights", "out.mine = True\n    return out, weights"),
        module(
            "out, w = scaled_dot_product_attention(q, k, v, blocked)\n"
            "if getattr(out, 'mine', False):\n"
            "    out = F.scaled_dot_product_attention(q, k, v, attn_mask=~blocked)\n"
            "else:\n"
            "    out = self.dropout(w) @ v\n"
            "return self.w_o(merge_heads(out))\n",
            MODULE_IMPORTS,
        ),
        True,
    ),
    "the_same_function_object": (  # 10 / 10 on main: the write-out replaced the module's alias too
        HEAD + "scaled_dot_product_attention = F.scaled_dot_product_attention\n",
        module(
            "r = fused(q, k, v, blocked)\n"
            "out = self.dropout(r[1]) @ v if isinstance(r, tuple) else r\n"
            "return self.w_o(merge_heads(out))\n",
            "from torch.nn.functional import scaled_dot_product_attention as fused\n",
        ),
        True,
    ),
    "through_the_attention_module": (
        ATTENTION_FORBIDDEN + "\nfused = F.scaled_dot_product_attention\n",
        module(
            "_, w = A.scaled_dot_product_attention(q, k, v, blocked)\n"
            "return self.w_o(merge_heads(A.fused(q, k, v, attn_mask=~blocked)))\n",
            "from . import attention as A\n",
        ),
        True,
    ),
    "through_an_alias_in_the_module": (
        ATTENTION_FORBIDDEN,
        module(
            "_, w = scaled_dot_product_attention(q, k, v, blocked)\n"
            "return self.w_o(merge_heads(sdpa(q, k, v, attn_mask=~blocked)))\n",
            MODULE_IMPORTS + "sdpa = F.scaled_dot_product_attention\n",
        ),
        True,
    ),
    "through_a_wrapper_of_the_modules_own": (
        ATTENTION_FORBIDDEN,
        module("out, w = fast(q, k, v, blocked)\nreturn self.w_o(merge_heads(out))\n", MODULE_IMPORTS, after=FAST),
        True,
    ),
    "from_inside_the_attention_by_a_tensor_of_the_modules": (
        ATTENTION_FORBIDDEN,
        module(
            "out, w = scaled_dot_product_attention(q, k, v, blocked.as_subclass(Blocked))\n"
            "return self.w_o(merge_heads(self.dropout(w) @ v))\n",
            MODULE_IMPORTS,
            after=SNEAKY_MASK,
        ),
        True,
    ),
    # the module calls only its attention, which makes the call: the attention's alone
    "inside_the_attention_only": (
        ATTENTION_FORBIDDEN,
        module(USE.format(call="scaled_dot_product_attention"), MODULE_IMPORTS),
        False,
    ),
    "the_attention_function_written_in_mha_py": (
        "from .mha import fast as scaled_dot_product_attention\n",
        module(USE.format(call="fast"), MODULE_IMPORTS.split("from .")[0], after=FAST),
        False,
    ),
}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_a_forbidden_call_is_the_modules_own_wherever_its_own_code_makes_it(tmp_path, spelling):
    attention, mha, own = SPELLINGS[spelling]
    steps = graded(submission(tmp_path, {"attention.py": attention, "mha.py": mha}), ["multi_head_attention"])
    module_step = steps["multi_head_attention"]
    if own:
        assert module_step.score == 0, lost(module_step)
        assert {c.message_id for c in module_step.checks} <= {"forbidden_call", "forbidden_call_at", "tampering"}
    else:
        assert lost(module_step) == []


def test_a_decoder_that_calls_the_fused_kernel_beside_its_attention_is_charged(tmp_path):
    gqa = "import torch.nn.functional as F\n" + KV_GQA.replace(
        "return weights @ v  # (B, H, Lq, d_v)",
        "F.scaled_dot_product_attention(q, k, v)\n    return weights @ v  # (B, H, Lq, d_v)",
    )
    assert gqa != KV_GQA
    decoder = "import torch.nn.functional as F\n" + KV_DECODER.replace(
        KV_CALL, KV_CALL + "\n        F.scaled_dot_product_attention(q, q, q)"
    )
    root = submission(tmp_path, {"gqa.py": gqa, "decoder.py": decoder}, package="kv_cache")
    steps = graded(root, ["grouped_query_attention", "decoder"], assignment="kv_cache")
    gqa_step = steps["grouped_query_attention"]
    assert "forbidden_call_at" in {c.message_id for c in gqa_step.checks}  # the attention's call, in its step
    decoder_step = steps["decoder"]  # every check that runs forward is charged (not_divisible only makes it)
    assert {c.id for c in decoder_step.checks if c.passed} == {"not_divisible"}
    assert {c.message_id for c in decoder_step.checks if not c.passed} == {"forbidden_call_at"}


# ---------------------------------------------------------------------------- a student release


def test_a_release_says_the_module_depends_on_a_wrong_earlier_function(tmp_path, monkeypatch):
    """In a student release (no written-out versions; the probe's results stored), the module's
    checks that the wrong attention spoils are not judged: they name the step they wait on."""
    from autograder.engine.generate import answers_build
    from autograder.harness import answers, earlier

    config = grading_config.load(assignment="mha")
    stored = answers_build.build(config)
    monkeypatch.setitem(earlier._versions, "mha", None)
    monkeypatch.setitem(answers._loaded, "mha", stored)
    monkeypatch.setattr(earlier, "_expected", {})
    mha = module(**{**WRAPPERS["class_call"], "imports": IMPORT})
    root = submission(tmp_path, {"attention.py": attention_shape("plain"), "mha.py": mha})
    module_step = grade(root, config, steps=["multi_head_attention"]).step("multi_head_attention")
    failing = [c for c in module_step.checks if c.passed is not True]
    assert failing and {c.message_id for c in failing} == {"depends_on_earlier"}
    assert {c.params["blocked_by"] for c in failing} == {"attention"}
    assert module_step.max_score == config.step("multi_head_attention").points
    # a module wrong on its own, whose attention is right, is judged as it is
    right = submission(
        tmp_path / "right",
        {
            "mha.py": module(
                USE.format(call="scaled_dot_product_attention").replace("self.w_o(", "2 * self.w_o("), IMPORT
            )
        },
    )
    module_step = grade(right, config, steps=["multi_head_attention"]).step("multi_head_attention")
    assert "depends_on_earlier" not in {c.message_id for c in module_step.checks} and module_step.score < 1
