"""Observers of step `split_heads`: the student's split_heads(x, num_heads) and merge_heads(x)."""

from autograder.harness.trace import traced_calls


def split(mha, x, num_heads):
    """{"heads"}: split_heads(x, num_heads)."""
    return {"heads": mha.heads.split_heads(x, num_heads)}


def split_twice(mha, x):
    """split_heads of one input into 2 heads and into 5."""
    return {"two_heads": mha.heads.split_heads(x, 2), "five_heads": mha.heads.split_heads(x, 5)}


def split_not_divisible(mha, x, num_heads):
    """{"raised": the exception's type name or None, "message"}: split_heads(x, num_heads) that cannot divide."""
    try:
        mha.heads.split_heads(x, num_heads)
    except NotImplementedError:
        raise  # the TODO is still there: reported as not implemented
    except ValueError:
        return {"raised": "ValueError"}
    except RuntimeError as error:  # what view() raises when nobody checked first
        return {"raised": "RuntimeError", "message": str(error)[:200]}
    return {"raised": None}


def merge(mha, x, transposed=False):
    """{"merged"}: merge_heads(x), of x.transpose(1, 2) (not contiguous) if `transposed`."""
    return {"merged": mha.heads.merge_heads(x.transpose(1, 2) if transposed else x)}


def round_trip(mha, x, num_heads):
    """{"x"}: merge_heads(split_heads(x, num_heads))."""
    return {"x": mha.heads.merge_heads(mha.heads.split_heads(x, num_heads))}


def traced(mha, x, num_heads, heads):
    """Localisation: split_heads(x, num_heads), then merge_heads(heads), each recorded (harness/trace.py)."""
    return traced_calls(mha, [lambda: mha.heads.split_heads(x, num_heads), lambda: mha.heads.merge_heads(heads)])


# ### BEGIN HIDDEN CHECKS (observers only hidden checks use: left out of a student release)


def split_and_merge(mha, x, num_heads, heads):
    """{"split", "merged"}: split_heads(x, num_heads) and merge_heads(heads)."""
    return {"split": mha.heads.split_heads(x, num_heads), "merged": mha.heads.merge_heads(heads)}
