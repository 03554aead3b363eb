"""Checks for step `padding`: mha/padding.py, pad_batch(sequences, pad_id=0, max_len=None)."""

import torch

from autograder.assignments.mha.observers import padding as observers
from autograder.engine.checks.check import Check, Fail, compare, raised_verdict, randindex, randsize

FILES = ["padding.py"]  # what the step grades (scanned for forbidden calls)


def padded(rows, pad_id, length):
    """The expected (ids, pad_mask), written out row by row."""
    ids = [list(row[:length]) + [pad_id] * (length - len(row[:length])) for row in rows]
    mask = [[False] * len(row[:length]) + [True] * (length - len(row[:length])) for row in rows]
    return {
        "ids": torch.tensor(ids, dtype=torch.long).reshape(len(rows), length),
        "pad_mask": torch.tensor(mask, dtype=torch.bool).reshape(len(rows), length),
    }


class Values(Check):
    """Right-pads to the longest sequence; ids int64 (B, L), pad_mask bool (B, L), True at padding."""

    id = "values"
    weight = 3
    observer = observers.pad

    def inputs(self, rng):
        return {"sequences": [[5, 7, 9, 3], [4, 2], [8, 1, 6]]}

    def expected(self, sequences):
        return padded(sequences, 0, 4)


class PadId(Check):
    """Writes pad_id (not 0) into the padding positions."""

    id = "pad_id"
    observer = observers.pad

    def inputs(self, rng):
        return {"sequences": [[1, 2], [3, 4, 5, 6, 7]], "pad_id": 9}

    def expected(self, sequences, pad_id):
        return padded(sequences, pad_id, 5)


class MaxLenTruncates(Check):
    """With max_len, L = max_len and longer sequences keep their first max_len tokens."""

    id = "max_len_truncates"
    weight = 2
    observer = observers.pad

    def inputs(self, rng):
        return {"sequences": [[5, 7, 9, 3, 2], [4, 2], [8, 1, 6]], "max_len": 3}

    def expected(self, sequences, max_len):
        return padded(sequences, 0, max_len)


class MaxLenLonger(Check):
    """With max_len longer than every sequence, L = max_len anyway."""

    id = "max_len_longer"
    observer = observers.pad

    def inputs(self, rng):
        return {"sequences": [[5, 7], [4]], "max_len": 4}

    def expected(self, sequences, max_len):
        return padded(sequences, 0, max_len)


class PadIdInSequence(Check):
    """A real token equal to pad_id is a token: pad_mask says where padding was added, not which
    ids equal pad_id (zeros are ordinary token ids with the default pad_id=0)."""

    id = "pad_id_in_sequence"
    observer = observers.pad

    def inputs(self, rng):
        return {"sequences": [[0, 5, 0], [7], [3, 0]]}

    def expected(self, sequences):
        return padded(sequences, 0, 3)


class EmptySequence(Check):
    """An empty sequence in the batch becomes a row of padding."""

    id = "empty_sequence"
    observer = observers.pad

    def inputs(self, rng):
        return {"sequences": [[3, 4, 5], []]}

    def expected(self, sequences):
        return padded(sequences, 0, 3)


class EmptyBatchRaises(Check):
    """An empty batch raises ValueError."""

    id = "empty_batch_raises"
    observer = observers.empty_batch

    def judge(self, inputs, got, expected, tol):
        return raised_verdict(got, "ValueError", "pad_batch([])")


class InputUnchanged(Check):
    """The caller's lists come back exactly as they were."""

    id = "input_unchanged"
    weight = 2
    observer = observers.input_unchanged

    def inputs(self, rng):
        return {"sequences": [[5, 7, 9, 3], [4, 2], [8]]}

    def expected(self, sequences):
        return {"ids": padded(sequences, 0, 4)["ids"]}  # the first call's, judged before the lists are

    def judge(self, inputs, got, expected, tol):
        fail = compare(got["ids"], expected["ids"], tol, name="ids")
        if fail:
            return fail
        if got["sequences"] != inputs["sequences"]:
            return Fail("mutated_input")
        return None


# ### BEGIN HIDDEN CHECKS


class RandomBatches(Check):
    """Random batches (some sequences empty), pad ids and max_len, against the reference."""

    id = "random_batches"
    visibility = "hidden"
    weight = 3
    observer = observers.cases

    def inputs(self, rng):
        cases = []
        # Every case pads (lengths differ) with a non-zero pad id; max_len is absent, shorter
        # than the longest sequence, and longer, so no draw leaves a branch untested.
        for limit in ("none", "shorter", "longer", "none"):
            batch = randsize(rng, 2, 6)
            lengths = torch.randint(0, 9, (batch,), generator=rng).tolist()
            lengths[0], lengths[1] = randindex(rng, 3, 9), 0  # one long, one empty
            longest = max(lengths)
            max_len = {
                "none": None,
                "shorter": randindex(rng, 1, longest),
                "longer": randindex(rng, longest + 1, longest + 4),
            }[limit]
            sequences = [torch.randint(5, 50, (n,), generator=rng).tolist() for n in lengths]
            cases.append({"sequences": sequences, "pad_id": randindex(rng, 1, 4), "max_len": max_len})
        return {"cases": cases}
