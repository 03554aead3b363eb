"""Correct submissions written differently from the reference. Each must get full marks and no
diagnosis: the grader measures behaviour, not style. Each variant is a Mistake-like patch set on
the reference (file -> [(old, new)]), so it stays in step with the reference."""
from autograder.check import Mistake


def variant(name, file, patches):
    return Mistake(name, file, patches)


ATT_SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)"
ATT_OUT = "out = weights @ v  # (..., Lq, d_v)"
SOFTMAX = "weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)"
FILL = "scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)  # (..., Lq, Lk)"

VARIANTS = [
    variant("fused_chunk", "projection.py", [
        ("q, k, v = qkv.split(self.d_model, dim=-1)", "q, k, v = qkv.chunk(3, dim=-1)")]),
    variant("fused_slices", "projection.py", [
        ("q, k, v = qkv.split(self.d_model, dim=-1)",
         "D = self.d_model\n        q, k, v = qkv[..., :D], qkv[..., D:2 * D], qkv[..., 2 * D:]")]),
    variant("attention_einsum", "attention.py", [
        (ATT_SCORES, "scores = torch.einsum('...qd,...kd->...qk', q, k) / math.sqrt(d_k)"),
        (ATT_OUT, "out = torch.einsum('...qk,...kd->...qd', weights, v)")]),
    variant("attention_baddbmm", "attention.py", [
        (ATT_SCORES,
         "lead, lq, lk = q.shape[:-2], q.shape[-2], k.shape[-2]\n"
         "    q3, k3 = q.reshape(-1, lq, d_k), k.reshape(-1, lk, d_k)\n"
         "    zeros = torch.zeros(q3.shape[0], lq, lk, dtype=q.dtype, device=q.device)\n"
         "    scores = torch.baddbmm(zeros, q3, k3.transpose(1, 2), beta=0.0, alpha=1 / math.sqrt(d_k))\n"
         "    scores = scores.reshape(*lead, lq, lk)")]),
    variant("attention_scale_query_first", "attention.py", [
        (ATT_SCORES, "scores = (q / d_k ** 0.5) @ k.transpose(-2, -1)")]),
    variant("softmax_method", "attention.py", [(SOFTMAX, "weights = scores.softmax(dim=-1)")]),
    variant("softmax_by_hand", "attention.py", [
        (SOFTMAX, "exp = (scores - scores.amax(dim=-1, keepdim=True)).exp()\n"
                  "    weights = exp / exp.sum(dim=-1, keepdim=True)")]),
    variant("mask_fill_minus_1e9", "attention.py", [(FILL, "scores = scores.masked_fill(mask, -1e9)")]),
    variant("mask_additive_float", "attention.py", [
        (FILL, "scores = scores + torch.zeros_like(scores).masked_fill(mask, -1e9)")]),
    variant("mask_minus_inf_with_nan_guard", "attention.py", [
        (FILL, "scores = scores.masked_fill(mask, float('-inf'))"),
        (SOFTMAX, "weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)")]),
    variant("mask_where", "attention.py", [
        (FILL, "scores = torch.where(mask, torch.full_like(scores, -1e30), scores)")]),
    variant("heads_unflatten_flatten", "heads.py", [
        ("    x = x.view(B, L, num_heads, d_k)  # (B, L, H, d_k)\n    return x.transpose(1, 2)",
         "    return x.unflatten(-1, (num_heads, d_k)).transpose(1, 2)"),
        ("    x = x.transpose(1, 2).contiguous()  # (B, L, H, d_k)\n    return x.view(B, L, H * d_k)",
         "    return x.transpose(1, 2).flatten(2)")]),
    variant("merge_reshape", "heads.py", [
        ("    x = x.transpose(1, 2).contiguous()  # (B, L, H, d_k)\n    return x.view(B, L, H * d_k)",
         "    return x.transpose(1, 2).reshape(B, L, H * d_k)")]),
    variant("output_permute_reshape", "output.py", [
        ("heads.transpose(1, 2).contiguous().view(B, L, H * d_k)", "heads.permute(0, 2, 1, 3).reshape(B, L, H * d_k)")]),
    variant("causal_not_tril", "masking.py", [
        ("return torch.triu(ones, diagonal=1)", "return ~torch.tril(ones)")]),
    variant("padding_mask_unsqueeze", "masking.py", [
        ("(ids == pad_id)[:, None, None, :]", "ids.eq(pad_id).unsqueeze(1).unsqueeze(2)")]),
    variant("pad_lists_then_tensor", "padding.py", [
        ("    ids = torch.full((len(sequences), L), pad_id, dtype=torch.long)  # (B, L)\n"
         "    pad_mask = torch.ones(len(sequences), L, dtype=torch.bool)  # (B, L)\n"
         "    for b, (seq, n) in enumerate(zip(sequences, lengths)):\n"
         "        ids[b, :n] = torch.tensor(list(seq[:n]), dtype=torch.long)  # (n,)\n"
         "        pad_mask[b, :n] = False\n",
         "    rows = [list(seq[:n]) + [pad_id] * (L - n) for seq, n in zip(sequences, lengths)]\n"
         "    ids = torch.tensor(rows, dtype=torch.long).reshape(len(sequences), L)  # (B, L)\n"
         "    pad_mask = torch.arange(L)[None, :] >= torch.tensor(lengths)[:, None]  # (B, L)\n")]),
    variant("embedding_functional", "embedding.py", [
        ("return self.embedding(ids)  # (B, L, d_model)",
         "return nn.functional.embedding(ids, self.embedding.weight, padding_idx=self.embedding.padding_idx)")]),
    variant("mha_causal_buffer", "mha.py", [
        ("        self.dropout = nn.Dropout(dropout)\n",
         "        self.dropout = nn.Dropout(dropout)\n"
         "        self.register_buffer('future', torch.triu(torch.ones(256, 256, dtype=torch.bool), diagonal=1),\n"
         "                             persistent=False)\n"),
        ("blocked = torch.ones_like(blocked).triu(diagonal=1)  # (Lq, Lk)", "blocked = self.future[:Lq, :Lk]")]),
    variant("mha_loop_over_heads", "mha.py", [
        ("        weights = torch.softmax(scores, dim=-1)  # (B, H, Lq, Lk)\n"
         "        weights = self.dropout(weights)  # (B, H, Lq, Lk)\n"
         "        out = merge_heads(weights @ v)  # (B, Lq, D)\n",
         "        heads = []\n"
         "        for h in range(self.num_heads):\n"
         "            w = self.dropout(torch.softmax(scores[:, h], dim=-1))  # (B, Lq, Lk)\n"
         "            heads.append(w @ v[:, h])  # (B, Lq, d_k)\n"
         "        out = torch.cat(heads, dim=-1)  # (B, Lq, D)\n")]),
    variant("mha_additive_mask_minus_inf", "mha.py", [
        ("scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)",
         "scores = scores + torch.zeros_like(scores).masked_fill(blocked, float('-inf'))\n"
         "        scores = scores.nan_to_num(neginf=torch.finfo(scores.dtype).min)")]),
]
