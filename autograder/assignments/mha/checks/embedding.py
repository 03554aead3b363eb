"""Checks for step `embedding`: mha/embedding.py, TokenEmbedding(vocab_size, d_model, pad_id=0)."""

import torch

from autograder.engine.check import Check, ContractError, Fail, randindex, randint, randn, randsize

FILES = ["embedding.py"]  # what the step grades (scanned for forbidden calls)


def embedding_layer(module):
    layer = getattr(module, "embedding", None)
    if not isinstance(layer, torch.nn.Embedding):
        raise ContractError("missing_attribute", owner="TokenEmbedding", name="embedding", expected="an nn.Embedding")
    return layer


class Layer(Check):
    """Has `embedding`, an nn.Embedding(vocab_size, d_model, padding_idx=pad_id)."""

    id = "layer"

    def observe(self, mha):
        layer = embedding_layer(mha.embedding.TokenEmbedding(11, 6, pad_id=3))
        return {
            "num_embeddings": layer.num_embeddings,
            "embedding_dim": layer.embedding_dim,
            "padding_idx": layer.padding_idx,
        }

    def expected(self):
        return {"num_embeddings": 11, "embedding_dim": 6, "padding_idx": 3}


class Lookup(Check):
    """forward(ids (B, L)) returns the rows of the embedding table: (B, L, d_model)."""

    id = "lookup"
    weight = 2

    def inputs(self, rng):
        table = randn(rng, 11, 6)
        table[3] = 0.0  # the pad row, as a correct layer keeps it
        ids = randint(rng, 0, 11, 2, 7)
        ids[0, -2:] = 3
        return {"table": table, "ids": ids}

    def observe(self, mha, table, ids):
        module = mha.embedding.TokenEmbedding(11, 6, pad_id=3).double()
        with torch.no_grad():
            embedding_layer(module).weight.copy_(table)
        return {"vectors": module(ids)}

    def expected(self, table, ids):
        return {"vectors": table[ids]}


class PadVectorZero(Check):
    """A new TokenEmbedding maps pad_id to the zero vector."""

    id = "pad_vector_zero"

    def observe(self, mha):
        module = mha.embedding.TokenEmbedding(11, 6, pad_id=3)
        return {"vectors": module(torch.tensor([[3, 1, 3]])).detach()}

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

    def observe(self, mha):
        module = mha.embedding.TokenEmbedding(11, 6, pad_id=3)
        module(torch.tensor([[3, 1, 3, 5]])).pow(2).sum().backward()
        grad = embedding_layer(module).weight.grad
        return {"grad": None if grad is None else grad.detach()}

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

    def inputs(self, rng):
        vocab, d_model = randsize(rng, 5, 40), randsize(rng, 2, 17)
        pad_id = randindex(rng, 1, vocab)  # not 0: padding_idx=0 must not pass by chance
        table = randn(rng, vocab, d_model)
        table[pad_id] = 0.0
        ids = randint(rng, 0, vocab, 3, randsize(rng, 2, 9))
        ids[:, 0] = (pad_id + 1) % vocab  # every row has a real token ...
        ids[:, -1] = pad_id  # ... and a pad
        return {"vocab": vocab, "d_model": d_model, "pad_id": pad_id, "table": table, "ids": ids}

    def observe(self, mha, vocab, d_model, pad_id, table, ids):
        module = mha.embedding.TokenEmbedding(vocab, d_model, pad_id=pad_id).double()
        with torch.no_grad():
            embedding_layer(module).weight.copy_(table)
        return {"vectors": module(ids), "padding_idx": embedding_layer(module).padding_idx}
