"""KV cache and grouped-query attention: a key-value cache, incremental decoding that equals full
causal attention, grouped-query attention, and a cached GQA self-attention module.

What the engine reads of an assignment by name (engine/course/assignment.py): this one adds none
of its own contract failures (CONTRACT_FAILURES) or failures that are no evidence (NOT_EVIDENCE)."""
