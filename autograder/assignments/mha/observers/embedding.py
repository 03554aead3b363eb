"""Observers of step `embedding`: the student's TokenEmbedding(vocab_size, d_model, pad_id=0)."""

import torch

from autograder.harness.contract import ContractError


def embedding_layer(module):
    layer = getattr(module, "embedding", None)
    if not isinstance(layer, torch.nn.Embedding):
        raise ContractError("missing_attribute", owner="TokenEmbedding", name="embedding", expected="an nn.Embedding")
    return layer


def layer(mha):
    """The sizes and padding_idx of TokenEmbedding(11, 6, pad_id=3)'s table."""
    table = embedding_layer(mha.embedding.TokenEmbedding(11, 6, pad_id=3))
    return {
        "num_embeddings": table.num_embeddings,
        "embedding_dim": table.embedding_dim,
        "padding_idx": table.padding_idx,
    }


def lookup(mha, table, ids, vocab=11, d_model=6, pad_id=3):
    """{"vectors", "padding_idx"}: forward(ids) of a TokenEmbedding holding `table`."""
    module = mha.embedding.TokenEmbedding(vocab, d_model, pad_id=pad_id).double()
    with torch.no_grad():
        embedding_layer(module).weight.copy_(table)
    return {"vectors": module(ids), "padding_idx": embedding_layer(module).padding_idx}


def pad_vector(mha):
    """{"vectors"}: a new TokenEmbedding(11, 6, pad_id=3) on [[3, 1, 3]]."""
    module = mha.embedding.TokenEmbedding(11, 6, pad_id=3)
    return {"vectors": module(torch.tensor([[3, 1, 3]])).detach()}


def pad_gradient(mha):
    """{"grad"}: the table's gradient after a backward through [[3, 1, 3, 5]] (pad_id=3)."""
    module = mha.embedding.TokenEmbedding(11, 6, pad_id=3)
    module(torch.tensor([[3, 1, 3, 5]])).pow(2).sum().backward()
    grad = embedding_layer(module).weight.grad
    return {"grad": None if grad is None else grad.detach()}
