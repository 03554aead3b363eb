"""Checks for step `embedding`: mha/embedding.py, TokenEmbedding(vocab_size, d_model, pad_id=0)."""

import torch

from autograder.assignments.mha.observers import embedding as observers
from autograder.engine.checks.check import Check, Fail, randindex, randint, randn, randsize

FILES = ["embedding.py"]  # what the step grades (scanned for forbidden calls)


class Layer(Check):
    """Has `embedding`, an nn.Embedding(vocab_size, d_model, padding_idx=pad_id)."""

    id = "layer"
    observer = observers.layer

    def expected(self):
        return {"num_embeddings": 11, "embedding_dim": 6, "padding_idx": 3}


class Lookup(Check):
    """forward(ids (B, L)) returns the rows of the embedding table: (B, L, d_model)."""

    id = "lookup"
    weight = 2
    observer = observers.lookup

    def inputs(self, rng):
        table = randn(rng, 11, 6)
        table[3] = 0.0  # the pad row, as a correct layer keeps it
        ids = randint(rng, 0, 11, 2, 7)
        ids[0, -2:] = 3
        return {"table": table, "ids": ids}

    def expected(self, table, ids):
        return {"vectors": table[ids]}


class PadVectorZero(Check):
    """A new TokenEmbedding maps pad_id to the zero vector."""

    id = "pad_vector_zero"
    observer = observers.pad_vector

    def judge(self, inputs, got, expected, tol):
        vectors = got["vectors"]
        if not isinstance(vectors, torch.Tensor) or tuple(vectors.shape) != (1, 3, 6):
            return Fail(
                "shape", {"name": "forward(ids)", "expected": (1, 3, 6), "got": getattr(vectors, "shape", vectors)}
            )
        largest = vectors[0, [0, 2]].abs().max().item()
        if largest != 0:
            return Fail("pad_vector_nonzero", {"pad_id": 3, "value": largest})
        return None


class PadVectorNoGrad(Check):
    """The pad vector receives no gradient, the others do."""

    id = "pad_vector_no_grad"
    observer = observers.pad_gradient

    def judge(self, inputs, got, expected, tol):
        grad = got["grad"]
        if grad is None or grad[1].abs().max() == 0:
            return Fail("grad_missing", {"name": "embedding.weight"})
        if grad[3].abs().max() != 0:
            return Fail("pad_vector_gets_grad", {"pad_id": 3, "value": grad[3].abs().max().item()})
        return None


# ### BEGIN HIDDEN CHECKS


class RandomLookup(Check):
    """Random sizes, pad ids and tables, against the reference."""

    id = "random_lookup"
    visibility = "hidden"
    weight = 2
    observer = observers.lookup

    def inputs(self, rng):
        vocab, d_model = randsize(rng, 5, 40), randsize(rng, 2, 17)
        pad_id = randindex(rng, 1, vocab)  # not 0: padding_idx=0 must not pass by chance
        table = randn(rng, vocab, d_model)
        table[pad_id] = 0.0
        ids = randint(rng, 0, vocab, 3, randsize(rng, 2, 9))
        ids[:, 0] = (pad_id + 1) % vocab  # every row has a real token ...
        ids[:, -1] = pad_id  # ... and a pad
        return {"vocab": vocab, "d_model": d_model, "pad_id": pad_id, "table": table, "ids": ids}
