"""Multi-head attention from scratch: padding, embedding, Q/K/V projections, heads, attention,
masking, the output projection, the whole module, and running it on a CUDA device.

CONTRACT_FAILURES and NOT_EVIDENCE are what the engine reads of this assignment
(engine/course/assignment.py); each id is a message of its own catalog (locale/)."""

# The ways a student's code can miss this assignment's contract that its observers report
# (ContractError): the judge accepts them from a worker beside the engine's own (observation.py).
CONTRACT_FAILURES = frozenset(
    {
        "projections_not_found",  # observers/_projections.py: no q, k, v, output projections found
        "qkv_layers_not_found",
        "embedding_not_found",  # observers/embedding.py
        "device_mismatch",  # observers/cuda.py: a CPU tensor met a device one
    }
)
# Failures of its checks that say nothing about the computation (engine/mistakes/evidence.py):
# no known mistake is diagnosed from them.
NOT_EVIDENCE = frozenset(
    {
        "mask_needs_attention",  # checks/masking.py: masking waits for step attention's mistake
        "failed_on_both_devices",  # checks/cuda.py: diagnosed where it is raised, in its own step
    }
)
