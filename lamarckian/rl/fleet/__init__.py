"""The actor-fleet back end: Ray actors (:mod:`.actor`) run asyncio environments with one batched forward per round
(:mod:`.inference`) and stream segments to a learner of the algorithm's kind (:mod:`.factory`): on-policy
(:mod:`.learner`), A3C's gradients (:mod:`.a3c_learner`) or replay (:mod:`.replay_learner`); the update can span
several GPUs (:mod:`.update_ranks`)."""

#: what the warm fork server of actor processes imports (``ray.launch: processes``), so each actor starts at once
ACTOR_MODULES = ("lamarckian.rl.fleet.actor",)
