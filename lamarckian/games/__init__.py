"""Games that run elsewhere (docs/games.md): the game-server protocol, the MDP that plays many episodes over a few
connections (``mdp.create: game``), the reference server with injected latency and faults, and the conformance
checker: ``python -m lamarckian.games serve | check | secret``."""
