"""Observers of step `embedding`: the student's TokenEmbedding(vocab_size, d_model, pad_id=0).

The table is found by what forward does, not by its name (embedding_table): the parameter that
forward looks the ids up in, through an nn.Embedding of any name (a subclass, TokenEmbedding
itself being one, one inside an nn.Sequential) or F.embedding on a module's parameter."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from autograder.harness.contract import ContractError

DESCRIPTION_LIMIT = 240  # characters of the lookups seen, in a message


@dataclass
class Table:
    """The embedding table a TokenEmbedding looks ids up in."""

    weight: torch.nn.Parameter  # (vocab_size, d_model)
    padding_idx: int = None  # the row the lookup treats as padding (None: none)


class _Lookups(TorchFunctionMode):
    """Records every embedding lookup: (the table, the ids, padding_idx)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        output = func(*args, **kwargs)
        if func is F.embedding:
            named = dict(zip(("input", "weight", "padding_idx"), args, strict=False))
            named.update(kwargs)
            self.calls.append((named.get("weight"), named.get("input"), padding_row(named.get("padding_idx"), named)))
        elif func is torch.embedding:  # torch.embedding(weight, indices, padding_idx=-1): -1 is none
            named = dict(zip(("weight", "indices", "padding_idx"), args, strict=False))
            named.update(kwargs)
            padding_idx = named.get("padding_idx", -1)
            self.calls.append((named.get("weight"), named.get("indices"), None if padding_idx == -1 else padding_idx))
        return output


def padding_row(padding_idx, named):
    """F.embedding's padding_idx as a row (a negative one counts from the end, as F.embedding does)."""
    weight = named.get("weight")
    if isinstance(padding_idx, int) and padding_idx < 0 and isinstance(weight, torch.Tensor) and weight.dim():
        return weight.shape[0] + padding_idx
    return padding_idx


def owning_parameter(tensor, parameters):
    """The parameter `tensor` is, or is a view of (its rows as they are: a view of the whole table)."""
    if not isinstance(tensor, torch.Tensor):
        return None
    for candidate in (tensor, tensor._base):
        if (
            candidate is not None
            and id(candidate) in parameters
            and (candidate is tensor or (tensor.shape == candidate.shape and tensor.stride() == candidate.stride()))
        ):
            return parameters[id(candidate)]
    return None


def embedding_table(module, vocab_size) -> Table:
    """The table `module` (a TokenEmbedding) looks ids up in, found by one run on every id
    0..vocab_size-1: the module's parameter that an embedding lookup of those ids used (a tie:
    the one of vocab_size rows, then the one named `embedding`). Where the run raises or makes no
    lookup, the module's nn.Embedding (any subclass, the module itself included) of vocab_size
    rows, then the one called `embedding`. ContractError embedding_not_found says what was seen."""
    parameters = {id(p): (name, p) for name, p in module.named_parameters()}
    ids = torch.arange(vocab_size).reshape(1, vocab_size)
    failure, seen = None, []
    try:
        mode = _Lookups()
        with torch.no_grad(), mode:
            module(ids)
        found = {}
        for weight, indices, padding_idx in mode.calls:
            owner = owning_parameter(weight, parameters)
            seen.append(f"{owner[0] if owner else 'a tensor that is not a parameter'} ({describe_ids(indices, ids)})")
            if owner is not None and same_ids(indices, ids):
                found.setdefault(owner[0], Table(owner[1], padding_idx))
        if len(found) > 1:  # a tie: the table of vocab_size rows, then the contract's name
            found = {name: t for name, t in found.items() if t.weight.shape[0] == vocab_size} or found
        if len(found) > 1 and "embedding.weight" in found:
            found = {"embedding.weight": found["embedding.weight"]}
        if len(found) == 1:
            return next(iter(found.values()))
    except Exception as error:  # noqa: BLE001 - student code; the layers may still do
        failure = error
    layers = [(path, layer) for path, layer in module.named_modules() if isinstance(layer, torch.nn.Embedding)]
    fitting = [(path, layer) for path, layer in layers if layer.num_embeddings == vocab_size]
    chosen = fitting[0][1] if len(fitting) == 1 else getattr(module, "embedding", None)
    if isinstance(chosen, torch.nn.Embedding) and not seen:
        return Table(chosen.weight, chosen.padding_idx)
    if failure is not None:
        raise failure
    layers_seen = [f"{path or type(module).__name__} (nn.Embedding, never looked up)" for path, _ in layers]
    text = ", ".join(seen + layers_seen) or "none"
    text = (text[: DESCRIPTION_LIMIT - 3] + "...") if len(text) > DESCRIPTION_LIMIT else text
    raise ContractError("embedding_not_found", owner=type(module).__name__, found=text)


def same_ids(indices, ids) -> bool:
    """Whether a lookup's indices are the ids forward was given (any integer dtype, any device)."""
    return (
        isinstance(indices, torch.Tensor)
        and indices.shape == ids.shape
        and not indices.dtype.is_floating_point
        and bool((indices.detach().cpu().long() == ids).all())
    )


def describe_ids(indices, ids) -> str:
    return "the ids" if same_ids(indices, ids) else "other indices"


def layer(mha):
    """The sizes and padding_idx of TokenEmbedding(11, 6, pad_id=3)'s table."""
    table = embedding_table(mha.embedding.TokenEmbedding(11, 6, pad_id=3), 11)
    return {
        "num_embeddings": table.weight.shape[0],
        "embedding_dim": table.weight.shape[1] if table.weight.dim() == 2 else None,
        "padding_idx": table.padding_idx,
    }


def lookup(mha, table, ids, vocab=11, d_model=6, pad_id=3):
    """{"vectors", "padding_idx"}: forward(ids) of a TokenEmbedding holding `table`."""
    module = mha.embedding.TokenEmbedding(vocab, d_model, pad_id=pad_id).double()
    found = embedding_table(module, vocab)
    if tuple(found.weight.shape) != tuple(table.shape):
        raise ContractError(
            "bad_attribute",
            owner="TokenEmbedding",
            name="embedding.weight",
            expected=f"shape {tuple(table.shape)}",
            got=f"shape {tuple(found.weight.shape)}",
        )
    with torch.no_grad():
        found.weight.copy_(table)
    return {"vectors": module(ids), "padding_idx": found.padding_idx}


def pad_vector(mha):
    """{"vectors"}: a new TokenEmbedding(11, 6, pad_id=3) on [[3, 1, 3]]."""
    module = mha.embedding.TokenEmbedding(11, 6, pad_id=3)
    return {"vectors": module(torch.tensor([[3, 1, 3]])).detach()}


def pad_gradient(mha):
    """{"grad"}: the table's gradient after a backward through [[3, 1, 3, 5]] (pad_id=3)."""
    module = mha.embedding.TokenEmbedding(11, 6, pad_id=3)
    table = embedding_table(module, 11)
    module(torch.tensor([[3, 1, 3, 5]])).pow(2).sum().backward()
    grad = table.weight.grad
    return {"grad": None if grad is None else grad.detach()}
