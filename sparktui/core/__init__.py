"""Pure, synchronous models and logic: recipes, clusters, plans, checks.

Nothing here touches the network; file access is limited to reading recipe and cluster files
and (for lints) local safetensors headers.
"""
