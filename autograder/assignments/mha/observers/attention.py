"""Observers of step `attention`: the student's scaled_dot_product_attention(q, k, v, mask=None)."""

from autograder.harness.contract import ContractError, describe
from autograder.harness.trace import traced_calls


def attend(mha, q, k, v, **kwargs):
    """{"out", "weights"}: the student's attention, its pair of results named."""
    result = mha.attention.scaled_dot_product_attention(q, k, v, **kwargs)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise ContractError(
            "wrong_type",
            name="scaled_dot_product_attention(...)",
            expected="a pair (out, weights)",
            got=describe(result),
        )
    return {"out": result[0], "weights": result[1]}


def outputs(mha, q, k, v, names=("out", "weights")):
    """attend(), keeping the results `names` (a finer-grained check judges one of them)."""
    got = attend(mha, q, k, v)
    return {name: got[name] for name in names}


def row_sums(mha, q, k, v):
    """{"sums"}: what each row of the weights adds up to."""
    return {"sums": attend(mha, q, k, v)["weights"].detach().sum(-1)}


def traced(mha, q, k, v, mask=None):
    """Localisation (engine/mistakes/localise.py): the student's attention on q, k, v (and mask),
    every value it computes recorded, then what it returned (harness/trace.py)."""
    kwargs = {} if mask is None else {"mask": mask}
    return traced_calls(mha, [lambda: mha.attention.scaled_dot_product_attention(q, k, v, **kwargs)])
