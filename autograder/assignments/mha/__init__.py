"""Multi-head attention from scratch: padding, embedding, Q/K/V projections, heads, attention,
masking, the output projection, the whole module, and running it on a CUDA device."""
