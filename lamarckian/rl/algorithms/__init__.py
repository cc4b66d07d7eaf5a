"""The algorithms of the actor fleet behind one interface (:class:`.base.Algorithm`), named by ``rl.algorithm``:
``ppo | impala | a3c | dqn | sac`` or a user's own ``package.module:ClassName``.

Names are imported on first use (PEP 562): the torch-free settings modules beside the algorithms
(:mod:`.ppo_settings`, :mod:`.dqn_settings`, :mod:`.sac_settings`, :mod:`.replay_settings`) are read by ``load()``
without importing torch."""

from __future__ import annotations

from ...lazy import lazy_exports

_WHERE = {"KINDS": "base", "Algorithm": "base", "UpdateRule": "base", "algorithm_of": "build",
          "build_model": "build"}

__all__ = sorted(_WHERE)
__getattr__ = lazy_exports(__name__, _WHERE)
