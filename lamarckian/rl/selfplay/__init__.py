"""Self-play's opponents: pools of frozen snapshots with their choosers (:mod:`.pool`) and running win rates
(:mod:`.window`)."""
