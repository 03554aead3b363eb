"""The ways student code can miss the contract, as the harness reports them.

Observers (autograder/assignments/<id>/observers/) raise ContractError where the student's code
does not have the shape the contract asks for (a missing layer, a wrong return type); the package
loader raises SubmissionError for a file that cannot be used (missing, a syntax error, an
exception at import). Both are reported to the judge as a "contract" report: a name from the
judge's closed list of failures and its parameters (engine/judge/observation.py), never a verdict.
"""

import torch


class ContractError(Exception):
    """Student code does not have the shape the contract asks for (a name, a layer, a size).
    `what`: the failure's name in the message catalogs; `params`: its parameters."""

    def __init__(self, what: str, **params):
        super().__init__(what)
        self.what, self.params = what, params


class SubmissionError(ContractError):
    """A file of the submission cannot be used: missing, a syntax error, an error at import."""


def describe(value) -> str:
    """Short human description of an observed value, for messages."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"{type(value).__name__} {value!r}"[:80]
