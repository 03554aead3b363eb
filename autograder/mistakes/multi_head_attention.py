"""Known mistakes of step `multi_head_attention`: the reference with one specific error planted.

Instructor-only: the patches quote reference code. Used by the diagnosis (autograder/diagnosis.py)
and by the kit's fairness tests; never imported where student code runs.
"""
from ..check import Mistake

MISTAKES = [
    Mistake("dropout_in_eval", "mha.py", [
        ("weights = self.dropout(weights)", "weights = nn.functional.dropout(weights, self.dropout.p, training=True)")]),
    Mistake("dropout_p_ignored", "mha.py", [("self.dropout = nn.Dropout(dropout)\n", "self.dropout = nn.Dropout(0.0)\n")]),
    Mistake("mha_causal_ignored", "mha.py", [("if self.causal:", "if False:")]),
    Mistake("mha_causal_bottom_right", "mha.py", [
        ("torch.ones_like(blocked).triu(diagonal=1)", "torch.ones_like(blocked).triu(diagonal=1 + Lk - Lq)")]),
    Mistake("mha_pad_mask_ignored", "mha.py", [("if pad_mask is not None:", "if False:")]),
    Mistake("out_missing_bias", "mha.py", [
        ("self.w_o = nn.Linear(d_model, d_model, bias=bias)", "self.w_o = nn.Linear(d_model, d_model, bias=False)")]),
    Mistake("mha_scale_by_d_model", "mha.py", [("/ math.sqrt(q.size(-1))", "/ math.sqrt(self.d_model)")]),
    Mistake("mha_fully_masked_nan", "mha.py", [("torch.finfo(scores.dtype).min)", "float(\"-inf\"))")]),
    Mistake("mha_output_detached", "mha.py", [("return self.w_o(out)", "return self.w_o(out.detach())")]),
]
