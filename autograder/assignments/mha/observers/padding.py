"""Observers of step `padding`: the student's pad_batch(sequences, pad_id=0, max_len=None)."""

from autograder.harness.contract import ContractError, describe


def pad(mha, sequences, **kwargs):
    """{"ids", "pad_mask"}: the student's pad_batch, its two outputs named."""
    result = mha.padding.pad_batch(sequences, **kwargs)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise ContractError(
            "wrong_type", name="pad_batch(...)", expected="a pair (ids, pad_mask)", got=describe(result)
        )
    ids, pad_mask = result
    return {"ids": ids, "pad_mask": pad_mask}


def empty_batch(mha):
    """{"raised": the exception's type name or None, "message"}: pad_batch([])."""
    try:
        mha.padding.pad_batch([])
    except NotImplementedError:
        raise  # the TODO is still there: reported as not implemented
    except ValueError:
        return {"raised": "ValueError"}
    except (IndexError, TypeError, RuntimeError) as error:
        return {"raised": type(error).__name__, "message": str(error)[:200]}
    return {"raised": None}


def input_unchanged(mha, sequences):
    """{"sequences": the caller's lists after two calls, "ids": the first call's ids}."""
    padded = pad(mha, sequences)  # a real result is required: doing nothing is not a pass
    pad(mha, sequences, max_len=2)
    return {"sequences": sequences, "ids": padded["ids"]}


# ### BEGIN HIDDEN CHECKS (observers only hidden checks use: left out of a student release)


def cases(mha, cases):
    """{"cases": [pad(**case) for each case]}."""
    return {"cases": [pad(mha, **case) for case in cases]}
