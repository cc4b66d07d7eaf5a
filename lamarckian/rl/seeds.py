"""Seeds of the sampling processes (numpy only: remote workers without torch use them too)."""


def actor_seed(seed: int, index: int, slot: int) -> int:
    """A distinct, reproducible seed per (run seed, actor, environment slot)."""
    return (seed * 1_000_003 + index * 10_007 + slot) % (2**31)
