"""KV cache and grouped-query attention: a key-value cache, incremental decoding that equals full
causal attention, grouped-query attention, and a cached GQA self-attention module."""
