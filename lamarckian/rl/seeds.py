"""Seeds of the sampling processes (numpy only: remote workers without torch use them too), and every offset that
tells one random stream of a run from another, named here once."""

# the streams of one actor: the ``slot`` of :func:`actor_seed`
NETWORK_SLOT = 0             # its network's initialization and its process's torch stream
CHOICES_SLOT = 1             # its numpy stream: opponent draws, seats, the mean-action share
FIRST_ENVIRONMENT_SLOT = 2   # environment ``k`` of the actor: slot ``FIRST_ENVIRONMENT_SLOT + k``
ACTIONS_SLOT = 2**20         # the torch generator its policy samples actions with
EXPLORATION_SLOT = 2**21     # the acting policy's own stream (DQN's ε draws)
EVALUATION_SEED_OFFSET = 7919   # evaluation environments: actor_seed(seed + this, ...), apart from training's
VEC_EVALUATION_SEED_OFFSET = 1  # a vectorized task's evaluation spawns replay the stream of seed + this


def actor_seed(seed: int, index: int, slot: int) -> int:
    """A distinct, reproducible seed per (run seed, actor, stream slot)."""
    return (seed * 1_000_003 + index * 10_007 + slot) % (2**31)
