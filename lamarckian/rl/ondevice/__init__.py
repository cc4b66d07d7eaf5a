"""The vectorized back end: one process steps thousands of environments of a VecTask per call and trains on the
same device (:mod:`.learner`), evaluates in deterministic games (:mod:`.evaluation`), spans Ray ranks
(:mod:`.ray_ranks`) and trains a population in one batched update (:mod:`.population`)."""
