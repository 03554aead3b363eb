"""Fairness to correct code in any style, and no new way for a wrong answer to pass (issue 12).

The style gallery itself is in tests/variants.py (GALLERY) and graded in tests/test_variants.py;
here: the blind spots that are closed, the role mapping of projections on wrong answers, the
tolerance rule, and the hidden inputs drawn from the contract."""

from pathlib import Path

import pytest
import torch

from autograder.assignments.mha.observers._projections import find_projections
from autograder.engine.course import config as grading_config
from autograder.engine.course.assignment import step_modules
from autograder.engine.judge.runner import grade
from autograder.harness.contract import ContractError
from conftest import SOLUTIONS, grade_with_hidden
from corpus import load as corpus_items

MHA = "mha.py"
DROPOUT = "weights = self.dropout(weights)  # (B, H, Lq, Lk)"
RETURN = "return self.w_o(out)  # (B, Lq, D)"


def failing(result, step):
    return sorted(check.id for check in result.step(step).checks if check.passed is False)


def planted(submission, file, *patches):
    root = submission()
    target = root / "mha" / file
    source = target.read_text()
    for old, new in patches:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    target.write_text(source)
    return root


# ---------------------------------------------------------------------------- dropout placement

WRONG_DROPOUT = {
    "on_the_output": [(DROPOUT, "pass"), (RETURN, "return self.dropout(self.w_o(out))")],
    "on_the_merged_heads": [(DROPOUT, "pass"), (RETURN, "return self.w_o(self.dropout(out))")],
    "on_the_scores": [
        (DROPOUT, "pass"),
        ("weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(self.dropout(scores), dim=-1)"),
    ],
    "on_the_values": [
        (DROPOUT, "pass"),
        ("out = merge_heads(weights @ v)", "out = merge_heads(weights @ self.dropout(v))"),
    ],
    "not_rescaled": [(DROPOUT, "weights = self.dropout(weights) * ((1 - self.dropout.p) if self.training else 1.0)")],
}


@pytest.mark.parametrize("name", WRONG_DROPOUT)
def test_dropout_anywhere_but_on_the_weights_fails_the_dropout_check_only(config, submission, name):
    result = grade(
        planted(submission, MHA, *WRONG_DROPOUT[name]),
        config,
        reference=SOLUTIONS,
        seed=5,
        steps=["multi_head_attention"],
    )
    assert failing(result, "multi_head_attention") == ["dropout"]
    message = next(c.message for c in result.step("multi_head_attention").checks if c.id == "dropout")
    assert "dropout on the attention weights" in message


# ---------------------------------------------------------------------------- projections by role

WRONG_PROJECTIONS = {
    # Seed 003: k and v projected with w_q.
    "k_and_v_with_w_q": [
        ("k = split_heads(self.w_k(key)", "k = split_heads(self.w_q(key)"),
        ("v = split_heads(self.w_v(value)", "v = split_heads(self.w_q(value)"),
    ],
    "w_k_is_w_q": [
        (
            "        self.w_v = nn.Linear(d_model, d_model, bias=bias)\n",
            "        self.w_v = nn.Linear(d_model, d_model, bias=bias)\n        self.w_k = self.w_q\n",
        )
    ],
    "fused_cut_k_q_v": [
        (
            "        self.w_q = nn.Linear(d_model, d_model, bias=bias)\n"
            "        self.w_k = nn.Linear(d_model, d_model, bias=bias)\n"
            "        self.w_v = nn.Linear(d_model, d_model, bias=bias)\n",
            "        self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)\n",
        ),
        (
            "q = split_heads(self.w_q(query), self.num_heads)",
            "k_, q_, v_ = self.c_attn(query).split(self.d_model, dim=-1)\n        q = split_heads(q_, self.num_heads)",
        ),
        (
            "k = split_heads(self.w_k(key), self.num_heads)",
            "k = split_heads(self.c_attn(key).split(self.d_model, dim=-1)[0], self.num_heads)",
        ),
        (
            "v = split_heads(self.w_v(value), self.num_heads)",
            "v = split_heads(self.c_attn(value).split(self.d_model, dim=-1)[2], self.num_heads)",
        ),
    ],
    "no_output_projection": [(RETURN, "return out")],
}


@pytest.mark.parametrize("name", WRONG_PROJECTIONS)
def test_a_wrong_projection_still_loses_points_whatever_the_mapping(config, submission, name):
    result = grade(
        planted(submission, MHA, *WRONG_PROJECTIONS[name]),
        config,
        reference=SOLUTIONS,
        seed=5,
        steps=["multi_head_attention"],
    )
    lost = failing(result, "multi_head_attention")
    assert {"self_attention", "cross_attention"} & set(lost) or "gradients" in lost, lost
    assert result.step("multi_head_attention").score < 10


def test_a_projection_shared_by_two_roles_fails_the_gradient_check_and_says_so(config, submission):
    result = grade(
        planted(submission, MHA, *WRONG_PROJECTIONS["k_and_v_with_w_q"]), config, steps=["multi_head_attention"]
    )
    message = next(c.message for c in result.step("multi_head_attention").checks if c.id == "gradients")
    assert "the key projection is the same weights as the query projection (w_q)" in message


class RawParameters(torch.nn.Module):
    """Projections as bare parameters and F.linear: nothing tells which is which."""

    def __init__(self, d_model):
        super().__init__()
        self.weights = torch.nn.Parameter(torch.randn(4, d_model, d_model, dtype=torch.float64))

    def forward(self, query, key=None, value=None, pad_mask=None):
        return torch.nn.functional.linear(query, self.weights[0])


def test_when_no_layer_can_be_found_the_message_names_what_the_contract_accepts():
    with pytest.raises(ContractError) as caught:
        find_projections(RawParameters(6), 6)
    from autograder.engine.checks.messages import render

    text = render(caught.value.what, **caught.value.params)
    assert "fused (d_model -> 3*d_model)" in text and "w_q, w_k, w_v, w_o" in text and "QKVProjection" in text


def test_a_layer_applied_to_the_key_but_discarded_does_not_count_as_the_key_projection():
    """The student's composed QKVProjection runs all three layers on every input; only the
    calls whose output the result depends on give a role."""

    class Composed(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.a, self.b, self.c, self.d = (torch.nn.Linear(d, d).double() for _ in range(4))

        def forward(self, query, key=None, value=None, pad_mask=None):
            def three(x):  # q, k, v from layers registered in another order
                return self.c(x), self.a(x), self.b(x)

            q, k, v = three(query)[0], three(key)[1], three(value)[2]
            w = torch.softmax(q @ k.transpose(-2, -1), -1)
            return self.d(w @ v)

    roles = find_projections(Composed(6), 6)
    assert {role: slot.path for role, slot in roles.items()} == {"w_q": "c", "w_k": "a", "w_v": "b", "w_o": "d"}


# ---------------------------------------------------------------------------- hidden inputs


def test_hidden_padding_is_trailing_as_pad_batch_makes_it():
    check = next(c for c in step_modules("mha")["multi_head_attention"].CHECKS if c.id == "random_configurations")
    for seed in range(40):
        mask = check.inputs(torch.Generator().manual_seed(seed))["pad_mask"]
        lengths = (~mask).sum(-1)
        assert torch.equal(mask, torch.arange(mask.shape[1])[None, :] >= lengths[:, None])
        assert (lengths >= 1).all() and mask[:, -1].all()


def test_a_lengths_based_mask_passes_and_the_hidden_check_still_catches_an_ignored_mask(config, submission):
    lengths = planted(
        submission,
        MHA,
        (
            "blocked = blocked | pad_mask[:, None, None, :]  # (B, 1, Lq, Lk)",
            "n = (~pad_mask).sum(-1)\n"
            "            blocked = blocked | (torch.arange(Lk, device=n.device)[None, :] >= n[:, None])[:, None, None, :]",
        ),
    )
    for seed in (1, 2, 3):
        assert failing(grade_with_hidden(lengths, config, seed=seed), "multi_head_attention") == []
    ignored = planted(submission, MHA, ("if pad_mask is not None:", "if False:"))
    assert "random_configurations" in failing(grade_with_hidden(ignored, config, seed=1), "multi_head_attention")


# ---------------------------------------------------------------------------- parts found by what they do (issue 22)


class SlicedFused(torch.nn.Module):
    """nanoGPT's cross-attention: one fused c_attn whose weight rows are cut and applied with
    F.linear; c_attn itself is never called."""

    def __init__(self, d):
        super().__init__()
        self.d = d
        self.c_attn = torch.nn.Linear(d, 3 * d).double()
        self.c_proj = torch.nn.Linear(d, d).double()

    def forward(self, query, key=None, value=None, pad_mask=None):
        key = query if key is None else key
        value = key if value is None else value

        def block(x, i):
            rows = slice(i * self.d, (i + 1) * self.d)
            return torch.nn.functional.linear(x, self.c_attn.weight[rows], self.c_attn.bias[rows])

        q, k, v = block(query, 0), block(key, 1), block(value, 2)
        return self.c_proj(torch.softmax(q @ k.transpose(-2, -1), -1) @ v)


class StackedParameters(torch.nn.Module):
    """nn.MultiheadAttention's layout: q, k, v stacked in one bare parameter, chunked, applied
    with F.linear; the output projection a bare parameter too."""

    def __init__(self, d):
        super().__init__()
        self.in_proj_weight = torch.nn.Parameter(torch.randn(3 * d, d, dtype=torch.float64))
        self.in_proj_bias = torch.nn.Parameter(torch.randn(3 * d, dtype=torch.float64))
        self.out_weight = torch.nn.Parameter(torch.randn(d, d, dtype=torch.float64))

    def forward(self, query, key=None, value=None, pad_mask=None):
        key = query if key is None else key
        value = key if value is None else value
        weights, biases = self.in_proj_weight.chunk(3), self.in_proj_bias.chunk(3)
        q, k, v = (
            torch.nn.functional.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases, strict=True)
        )
        return torch.nn.functional.linear(torch.softmax(q @ k.transpose(-2, -1), -1) @ v, self.out_weight)


def by_definition(states, query, key, value):
    def project(x, role):
        return torch.nn.functional.linear(x, states[role]["weight"], states[role].get("bias"))

    q, k, v = project(query, "w_q"), project(key, "w_k"), project(value, "w_v")
    return project(torch.softmax(q @ k.transpose(-2, -1), -1) @ v, "w_o")


@pytest.mark.parametrize("module_class", [SlicedFused, StackedParameters])
def test_F_linear_on_blocks_of_a_weight_is_found_and_loaded(module_class):
    from autograder.assignments.mha.observers._projections import load_projections

    module = module_class(6)
    roles = find_projections(module, 6)
    assert [roles[role].block for role in ("w_q", "w_k", "w_v")] == [0, 1, 2]
    assert len({roles[role].parameter(module).data_ptr() for role in ("w_q", "w_k", "w_v")}) == 1
    rng = torch.Generator().manual_seed(3)
    with_bias = module_class is SlicedFused
    states = {
        role: {
            "weight": torch.randn(6, 6, generator=rng, dtype=torch.float64),
            **({"bias": torch.randn(6, generator=rng, dtype=torch.float64)} if with_bias or role != "w_o" else {}),
        }
        for role in ("w_q", "w_k", "w_v", "w_o")
    }
    load_projections(module, roles, states)
    query, key, value = (torch.randn(2, n, 6, generator=rng, dtype=torch.float64) for n in (3, 5, 5))
    with torch.no_grad():
        assert torch.allclose(module(query, key, value), by_definition(states, query, key, value))


class PerHead(torch.nn.Module):
    """Karpathy's GPT: one Head module per head, each with its own (d -> d / H) query, key and
    value layers; the heads called in `calls` order and merged (concatenated) in `merged` order."""

    def __init__(self, d, num_heads, calls, merged):
        super().__init__()

        class Head(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.query, self.key, self.value = (torch.nn.Linear(d, d // num_heads).double() for _ in range(3))

            def forward(self, q, k, v):
                q, k, v = self.query(q), self.key(k), self.value(v)
                return torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, -1) @ v

        self.heads = torch.nn.ModuleList(Head() for _ in range(num_heads))
        self.proj = torch.nn.Linear(d, d).double()
        self.calls, self.merged = calls, merged

    def forward(self, query, key=None, value=None, pad_mask=None):
        key = query if key is None else key
        value = key if value is None else value
        outputs = {h: self.heads[h](query, key, value) for h in self.calls}
        return self.proj(torch.cat([outputs[h] for h in self.merged], dim=-1))


def by_definition_in_heads(states, query, key, value, num_heads):
    def project(x, role):
        return torch.nn.functional.linear(x, states[role]["weight"], states[role].get("bias"))

    def split(x):  # (B, L, D) -> (B, H, L, d_k)
        return x.view(x.size(0), x.size(1), num_heads, -1).transpose(1, 2)

    q, k, v = split(project(query, "w_q")), split(project(key, "w_k")), split(project(value, "w_v"))
    out = torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, -1) @ v  # (B, H, Lq, d_k)
    return project(out.transpose(1, 2).reshape(query.size(0), query.size(1), -1), "w_o")


@pytest.mark.parametrize("seed", range(8))
def test_a_projection_kept_as_one_layer_per_head_is_found_and_loaded(seed):
    """Whatever the head count, the order the heads are called in and the order their outputs
    are merged in, the per-head layers are loaded so that the module computes multi-head
    attention with the grader's weights (fails before: 'could not tell which layers')."""
    from autograder.assignments.mha.observers._projections import load_projections

    rng = torch.Generator().manual_seed(seed)
    d = 12
    num_heads = [2, 3, 4, 6][seed % 4]
    calls, merged = (torch.randperm(num_heads, generator=rng).tolist() for _ in range(2))
    module = PerHead(d, num_heads, calls, merged)
    roles = find_projections(module, d)
    states = {
        role: {
            "weight": torch.randn(d, d, generator=rng, dtype=torch.float64),
            "bias": torch.randn(d, generator=rng, dtype=torch.float64),
        }
        for role in ("w_q", "w_k", "w_v", "w_o")
    }
    load_projections(module, roles, states)
    query, key, value = (torch.randn(2, n, d, generator=rng, dtype=torch.float64) for n in (3, 5, 5))
    with torch.no_grad():
        expected = by_definition_in_heads(states, query, key, value, num_heads)
        assert torch.allclose(module(query, key, value), expected), (num_heads, calls, merged)


PER_HEAD = Path(__file__).parent / "fixtures" / "per_head"


def per_head_score(submission, name) -> float:
    root = submission(files={"mha.py": (PER_HEAD / f"{name}.py").read_text()})
    result = grade(
        root, grading_config.load(assignment="mha"), reference=SOLUTIONS, seed=1, steps=["multi_head_attention"]
    )
    return next(step.score for step in result.steps if step.id == "multi_head_attention")


@pytest.mark.slow  # a grading each; CI runs it (pytest -m "")
@pytest.mark.parametrize(
    "name",
    [
        "correct_heads_in_order",
        # a red team's: the merge order differs from instance to instance (a set of heads); a
        # backward that runs once only, with heads called last to first and merged first to last
        "correct_heads_as_a_set",
        "correct_once_only_backward",
        "correct_once_only_backward_reversed_calls",
    ],
)
def test_a_correct_per_head_module_gets_full_marks(submission, name):
    """Fails on a first design that asked a second backward for the heads' order and kept the
    roles per class: 0.0, 0.53 and 4.74 / 10 for the last three."""
    assert per_head_score(submission, name) == 10.0


@pytest.mark.slow
def test_a_wrong_per_head_module_earns_no_more_than_its_ordinary_spelling(submission):
    """Keys through the query layers (the key layers unused): a red team's 0.53 / 10 on a first
    design where the ordinary spelling of the same mistake gets 0 (two roles over the same layers
    in different orders were not seen as sharing weights)."""
    per_head = per_head_score(submission, "wrong_keys_through_query_layers")
    assert per_head <= per_head_score(submission, "wrong_keys_through_query_layer_ordinary") < 10.0


def test_a_module_without_projections_is_told_what_was_seen():
    from autograder.engine.checks.messages import render

    with pytest.raises(ContractError) as caught:
        find_projections(RawParameters(6), 6)
    text = render(caught.value.what, **caught.value.params)
    assert "F.linear on weights rows 0:6 (query)" in text, text
    assert "F.linear on the module's parameters" in text


class ModuleListQKV(torch.nn.Module):
    """The Annotated Transformer's clones: three layers in a list, used out of list order."""

    def __init__(self, d, bias=True):
        super().__init__()
        self.linears = torch.nn.ModuleList(torch.nn.Linear(d, d, bias=bias) for _ in range(3))

    def forward(self, x):
        first, second, third = (layer(x) for layer in self.linears)
        return third, first, second


class QueryKeyValue(torch.nn.Module):
    """HF BERT's names."""

    def __init__(self, d, bias=True):
        super().__init__()
        self.query, self.key, self.value = (torch.nn.Linear(d, d, bias=bias) for _ in range(3))

    def forward(self, x):
        return self.query(x), self.key(x), self.value(x)


class SharedKeyLayer(QueryKeyValue):
    """A mistake: k computed with the query's layer."""

    def forward(self, x):
        return self.query(x), self.query(x), self.value(x)


@pytest.mark.parametrize(
    "module_class,expected",
    [
        (ModuleListQKV, {"w_q": "linears.2", "w_k": "linears.0", "w_v": "linears.1"}),
        (QueryKeyValue, {"w_q": "query", "w_k": "key", "w_v": "value"}),
        (SharedKeyLayer, {"w_q": "query", "w_k": "query", "w_v": "value"}),
    ],
)
def test_qkv_projections_are_told_apart_by_the_output_they_give(module_class, expected):
    from autograder.assignments.mha.observers._projections import find_qkv

    roles = find_qkv(module_class(5).double(), 5)
    assert {role: slot.path for role, slot in roles.items()} == expected


def test_a_qkv_projection_that_cannot_be_told_apart_says_what_it_saw():
    from autograder.assignments.mha.observers._projections import find_qkv
    from autograder.engine.checks.messages import render

    class Summed(QueryKeyValue):
        def forward(self, x):  # every output from all three layers: no layer is one output's
            total = self.query(x) + self.key(x) + self.value(x)
            return total, 2 * total, 3 * total

    with pytest.raises(ContractError) as caught:
        find_qkv(Summed(4).double(), 4)
    text = render(caught.value.what, **caught.value.params)
    assert caught.value.what == "qkv_layers_not_found"
    assert "query (q and k and v), key (q and k and v), value (q and k and v)" in text, text


EMBEDDINGS = {
    "subclass": """
class TokenEmbedding(nn.Embedding):
    def __init__(self, vocab_size, d_model, pad_id=0):
        super().__init__(vocab_size, d_model, padding_idx=pad_id)
""",
    "functional_with_positions": """
class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, d_model, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.positions = nn.Parameter(torch.zeros(64, d_model))  # looked up by position, not by id
        self.wte = nn.Parameter(torch.randn(vocab_size, d_model))
        with torch.no_grad():
            self.wte[pad_id] = 0

    def forward(self, ids):
        where = torch.arange(ids.shape[1], device=ids.device)
        return F.embedding(ids, self.wte, padding_idx=self.pad_id) + 0 * F.embedding(where, self.positions)
""",
}


@pytest.mark.parametrize("name", EMBEDDINGS)
def test_the_embedding_table_is_the_one_forward_looks_the_ids_up_in(config, submission, name):
    root = submission(
        files={
            "embedding.py": "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n" + EMBEDDINGS[name]
        }
    )
    result = grade(root, config, reference=SOLUTIONS, seed=3, steps=["embedding"])
    assert result.step("embedding").score == result.step("embedding").max_score, failing(result, "embedding")


def test_an_embedding_that_cannot_be_found_says_what_was_seen():
    from autograder.assignments.mha.observers.embedding import embedding_table
    from autograder.engine.checks.messages import render

    class Indexed(torch.nn.Module):  # a bare parameter indexed by hand: no lookup to see
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Parameter(torch.randn(7, 3))
            self.extra = torch.nn.Embedding(4, 3)

        def forward(self, ids):
            return self.table[ids]

    with pytest.raises(ContractError) as caught:
        embedding_table(Indexed(), 7)
    text = render(caught.value.what, **caught.value.params)
    assert caught.value.what == "embedding_not_found"
    assert "extra (nn.Embedding, never looked up)" in text and "F.embedding(ids, table, padding_idx=pad_id)" in text


DROPOUT_RATE_WRONG = {
    "attn_drop": [
        ("self.dropout = nn.Dropout(dropout)\n", "self.attn_drop = nn.Dropout(0.1)\n"),
        (DROPOUT, "weights = self.attn_drop(weights)"),
    ],
    "functional": [
        ("self.dropout = nn.Dropout(dropout)\n", "self.rate = 0.1\n"),
        (DROPOUT, "weights = F.dropout(weights, self.rate, training=self.training)"),
    ],
}


@pytest.mark.parametrize("name,where", [("attn_drop", "attn_drop.p"), ("functional", "F.dropout(p)")])
def test_a_dropout_of_any_name_is_found_and_a_wrong_rate_is_named(config, submission, name, where):
    root = planted(submission, MHA, *DROPOUT_RATE_WRONG[name])
    source = (root / "mha" / MHA).read_text()
    if "import torch.nn.functional as F" not in source:
        (root / "mha" / MHA).write_text("import torch.nn.functional as F\n" + source)
    result = grade(root, config, seed=5, steps=["multi_head_attention"])
    assert failing(result, "multi_head_attention") == ["dropout"]
    message = next(c.message for c in result.step("multi_head_attention").checks if c.id == "dropout")
    assert f"MultiHeadAttention.{where}: expected 0.5, got 0.1" in message, message


def test_layers_used_in_other_roles_than_their_names_are_graded_by_what_they_do(config, submission):
    """q from the layer called w_k and k from w_q computes what the contract asks: each output
    has its own projection; the names are not what is graded."""
    root = planted(
        submission,
        "projection.py",
        ("q = self.w_q(x)", "q = self.w_k(x)"),
        ("k = self.w_k(x)", "k = self.w_q(x)"),
    )
    result = grade(root, config, reference=SOLUTIONS, seed=5, steps=["qkv_projection"])
    assert failing(result, "qkv_projection") == []


# ---------------------------------------------------------------------------- judged by what they compute (issue 32)


def test_a_layer_without_the_bias_the_state_has_is_loaded_and_its_outputs_decide():
    """A key projection without bias computes the same attention (the softmax cancels what a key
    bias adds to a query's every score): loading refuses it no more; a bias the contract rules out
    (bias=False) still is refused."""
    from autograder.harness.layers import load_linear

    rng = torch.Generator().manual_seed(0)
    state = {"weight": torch.randn(4, 4, generator=rng), "bias": torch.randn(4, generator=rng)}
    layer = torch.nn.Linear(4, 4, bias=False)
    load_linear(torch.nn.ModuleDict({"w_k": layer}), "w_k", state)
    assert torch.equal(layer.weight, state["weight"])
    with pytest.raises(ContractError):
        load_linear(torch.nn.ModuleDict({"w_k": torch.nn.Linear(4, 4)}), "w_k", {"weight": state["weight"]})


def test_the_scripted_cache_takes_keys_off_by_one_vector_and_answers_with_them():
    """Keys without their bias are the expected keys off by the same vector at every position: the
    scripted cache accepts them and answers in kind (the attention is the same); keys off by
    anything else are not the next chunk."""
    from autograder.assignments.kv_cache.observers.incremental_decoding import ScriptedCache

    rng = torch.Generator().manual_seed(1)
    keys, values = (torch.randn(2, 3, 5, 4, generator=rng, dtype=torch.float64) for _ in range(2))
    shift = torch.randn(2, 3, 1, 4, generator=rng, dtype=torch.float64)
    cache = ScriptedCache(keys, values)
    K, V = cache.update(keys[:, :, :2] + shift, values[:, :, :2])
    K, V = cache.update(keys[:, :, 2:3] + shift, values[:, :, 2:3])
    assert torch.allclose(K, keys[:, :, :3] + shift) and torch.equal(V, values[:, :, :3])
    with pytest.raises(ContractError):  # not the same shift as before
        cache.update(keys[:, :, 3:4] + 2 * shift, values[:, :, 3:4])
    with pytest.raises(ContractError):  # other values altogether
        ScriptedCache(keys, values).update(2 * keys[:, :, :2], values[:, :, :2])


def test_kept_copies_every_tensor_it_is_given():
    from autograder.harness.kept import kept

    x = torch.zeros(3)
    copy = kept({"K": [x, (x, 1)], "n": 2})
    x.add_(1)
    assert copy["K"][0].sum() == 0 and copy["K"][1][0].sum() == 0 and copy["K"][1][1] == 1 and copy["n"] == 2


def test_a_static_cache_that_hands_out_views_of_its_buffers_gets_full_marks(tmp_path):
    """gpt-fast's KVCache returns views of preallocated buffers and writes over them after a reset:
    what it returned was right when it returned it, and the observers judge that (they keep
    copies, harness/kept.py), not what the buffers hold later."""
    item = next(i for i in corpus_items("kv_cache") if i.name == "gptfast_static_cache")
    config = grading_config.load(assignment="kv_cache")
    result = grade(item.submission(tmp_path / "static"), config, reference=SOLUTIONS, seed=1, steps=["kv_cache"])
    step = result.step("kv_cache")
    assert step.score == step.max_score, [c.message for c in step.checks if c.passed is False]


@pytest.mark.parametrize(
    "name,step,check",
    [
        ("lingua44_cache_after_repeat", "decoder", "cache_holds_kv_heads"),
        ("llaisys_offset_mask_on_cpu", "incremental_decoding", "mask_device"),
    ],
)
def test_what_the_contract_states_is_checked_where_outputs_cannot_tell(tmp_path, name, step, check):
    """Two real bugs with correct outputs on the CPU: lingua's cache filled after repeat_kv (every
    query head's copy, the memory GQA saves) and llaisys' mask made on the default device. The
    contract states both (the cache holds the H_kv heads; the mask is made on the device given):
    the check of that statement fails (that the bug loses in its own step only: tests/test_corpus.py)."""
    item = next(i for i in corpus_items("kv_cache") if i.name == name)
    config = grading_config.load(assignment="kv_cache")
    result = grade(item.submission(tmp_path / name), config, reference=SOLUTIONS, seed=1, steps=[step])
    assert failing(result, step) == [check]


def test_in_process_grading_with_hidden_checks_warms_the_assignment_up_once(monkeypatch):
    """The hidden mask_device check's first triu on 'meta' loads PyTorch's decompositions (8 s on a
    loaded machine): paid under the check's time limit, it stopped correct code ("did not finish")
    and every check after it. In-process grading runs the assignment's warm-up first, once, as the
    sandbox's worker server does; a student's own run (no hidden checks) does not."""
    from autograder.assignments.kv_cache import warmup
    from autograder.engine.judge import plan

    calls = []
    monkeypatch.setattr(plan, "_WARMED", set())
    monkeypatch.setattr(warmup, "warm_up", lambda simulation=None, real_gpu=False: calls.append(simulation))
    config = grading_config.load(assignment="kv_cache")
    grade(SOLUTIONS, config, steps=["kv_cache"])  # the student's public checks
    assert calls == []
    for _ in range(2):
        grade(SOLUTIONS, config, reference=SOLUTIONS, seed=1, steps=["kv_cache"])
    assert calls == [None]


class OneLengthOnly(torch.nn.Module):
    """Layers named for nothing, attention that fails when the key's length is not the query's:
    `form` "heads_kept" keeps heads (B, L, H, d_k) and so attends over the heads (NATTEN's permute
    bug); "asserted" is correct attention that refuses two lengths."""

    def __init__(self, d, num_heads, form):
        super().__init__()
        self.a, self.b, self.c, self.d = (torch.nn.Linear(d, d).double() for _ in range(4))
        self.num_heads, self.form = num_heads, form

    def forward(self, query, key=None, value=None, pad_mask=None):
        key = query if key is None else key
        value = key if value is None else value
        B, Lq, D = query.shape
        q, k, v = (x.view(B, x.size(1), self.num_heads, -1) for x in (self.b(query), self.c(key), self.a(value)))
        if self.form == "asserted":
            assert query.shape == key.shape, "self-attention only"
            q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # (B, H, L, d_k)
        out = torch.softmax(q @ k.transpose(-2, -1), -1) @ v
        if self.form == "asserted":
            out = out.transpose(1, 2)
        return self.d(out.reshape(B, Lq, D))


@pytest.mark.parametrize("form", ["heads_kept", "asserted"])
@pytest.mark.parametrize("num_heads", [1, 3])
def test_layers_of_code_that_fails_across_lengths_are_still_found(form, num_heads):
    """Layers are found by what they do on probes of one length where the cross-attention probes
    raise: the checks then grade the code and say where it raises, instead of every check
    failing on the layer search (fails before: the AssertionError or the matmul's RuntimeError)."""
    module = OneLengthOnly(6, num_heads, form)
    roles = find_projections(module, 6)
    assert {role: roles[role].path for role in ("w_q", "w_k", "w_v", "w_o")} == {
        "w_q": "b",
        "w_k": "c",
        "w_v": "a",
        "w_o": "d",
    }


@pytest.mark.slow  # one module step graded with hidden checks
def test_attention_over_the_heads_is_localised_where_the_heads_are_made(tmp_path):
    """NATTEN's permute bug (heads kept (B, L, H, d_k), so the scores are (B, L, H, H)): the module
    step names the query heads as where the code leaves the reference, with the shapes that met
    (fails before: no diagnosis but no_known_mistake, every check failing on the layer search)."""
    item = next(i for i in corpus_items() if i.name == "natten_qkv_permute")
    result = grade(
        item.submission(tmp_path / "s"),
        grading_config.load(assignment="mha"),
        reference=SOLUTIONS,
        seed=1,
        steps=["multi_head_attention"],
    )
    step = result.step("multi_head_attention")
    # the raise, and before it the heads' layout: (B, Lq, H, d_k) where (B, H, Lq, d_k) is needed
    assert [d["id"] for d in step.diagnoses] == ["localised.q_heads.layout"]
    assert "(B, L, H, H)" in step.diagnoses[0]["message"]
    assert "(B, Lq, H, d_k)" in step.diagnoses[0]["message"]
    assert any(check.passed for check in step.checks)  # graded, not refused on the layer search
