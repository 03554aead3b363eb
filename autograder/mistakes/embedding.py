"""Known mistakes of step `embedding`: the reference with one specific error planted.

Instructor-only: the patches quote reference code. Used by the diagnosis (autograder/diagnosis.py)
and by the kit's fairness tests; never imported where student code runs.
"""
from ..check import Mistake

MISTAKES = [
    Mistake("embedding_no_padding_idx", "embedding.py", [
        ("nn.Embedding(vocab_size, d_model, padding_idx=pad_id)", "nn.Embedding(vocab_size, d_model)")]),
    Mistake("embedding_padding_idx_zero", "embedding.py", [
        ("nn.Embedding(vocab_size, d_model, padding_idx=pad_id)", "nn.Embedding(vocab_size, d_model, padding_idx=0)")]),
    Mistake("embedding_scaled", "embedding.py", [
        ("return self.embedding(ids)", "return self.embedding(ids) * self.embedding.embedding_dim ** 0.5")]),
]
