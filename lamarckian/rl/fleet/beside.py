"""Evaluation beside training: an evaluation actor of its own plays the deterministic games while the fleet samples
and the learner updates, so the learner never waits for them.

The learner hands over the weights of one moment (:meth:`BesideEvaluation.start`: the blob, and for
``evaluator.opponent: self`` the newest pool snapshot), then looks between iterations whether the games are over
(:meth:`BesideEvaluation.poll`, which never blocks). One evaluation is in flight at a time. The evaluation actor
is a sampling :class:`~lamarckian.rl.fleet.actor.Actor` like the fleet's (same MDP, same acting network) that is
never asked to sample; it is started at the first evaluation, and one that dies is replaced and given the same
evaluation again. Starting it and replacing it go through :class:`lamarckian.rpc.Replacements`, as the fleet's
actors do (a Ray actor joins once Ray has placed it, without blocking the learner; one that dies while starting is
discarded and another started after a backoff).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping

import numpy as np

from ... import rpc

Spawn = Callable[[], Any]            # a new evaluation actor (a handle All/Any can call)
Pool = tuple[Mapping[int, float], Mapping[int, np.ndarray]]   # probabilities and blobs by snapshot id
Kill = Callable[[Any, bool], None]   # end one: gracefully (True) or at once (a dead one)

POLL_SECONDS = 0.1                   # between looks for the evaluation actor while :meth:`wait` waits for one
TELL_SECONDS = 30.0                  # how often that wait says so

log = logging.getLogger(__name__)


class BesideEvaluation:
    """One evaluation actor and the evaluation it is playing.

    Args:
        spawn: starts a new evaluation actor (the learner's own way of starting actors).
        kill: ends one.
        settings: the RPC settings of the run (timeouts, the node-local channel).
    """

    def __init__(self, spawn: Spawn, kill: Kill, settings: rpc.RpcSettings) -> None:
        self.kill, self.settings = kill, settings
        self.actor: Any = None
        self.caller: rpc.Any | None = None
        self.job: tuple[int, np.ndarray, Pool | None, int, str] | None = None
        self.ticket: tuple[Any, int] | None = None       # the evaluation's call
        self.preparing: list[tuple[Any, int]] = []       # the calls that load its weights (and pool) first
        self.replaced = 0                                # evaluation actors that died and were replaced
        self.replacements = rpc.Replacements(spawn, self._join, lambda actor: kill(actor, False))

    @property
    def busy(self) -> bool:
        """An evaluation is in flight."""
        return self.job is not None

    def start(self, version: int, blob: np.ndarray, episodes: int, opponent: str,
              pool: Pool | None = None) -> None:
        """Evaluate the weights ``blob`` (flat float32, the learner's layout) in ``episodes`` deterministic
        episodes against ``opponent``; ``pool`` (probabilities, blobs by snapshot id) is the opponent pool the
        evaluation actor plays ``self`` from. Returns at once."""
        if self.busy:
            raise RuntimeError("an evaluation is already in flight")
        self.job = (version, blob, pool, episodes, opponent)
        self._submit()

    def _submit(self) -> None:
        """Send the job to the evaluation actor; without one, ask for one (the job is sent when it joins)."""
        assert self.job is not None, "no evaluation to submit"
        caller = self.caller
        if caller is None:
            if not self.replacements:
                self.replacements.request()
            self.replacements.poll()            # a child process or a local object joins (and is sent it) now
            return
        version, blob, pool, episodes, opponent = self.job
        self.preparing = [caller.submit("set_weights", version, blob)]   # one link: the calls run in order
        if pool is not None:
            self.preparing.append(caller.submit("set_pool", pool[0], pool[1]))
        self.ticket = caller.submit("evaluate", episodes, opponent)

    def _join(self, actor: Any) -> None:
        """A started evaluation actor serves: connect it and send it the job (ActorDiedError: it died meanwhile,
        and is discarded by the replacements, which start another)."""
        caller = rpc.Any([actor], settings=self.settings)
        self.actor, self.caller = actor, caller
        try:
            if self.job is not None:
                self._submit()
        except rpc.ActorDiedError:
            caller.close()
            self.actor = self.caller = None
            self.ticket, self.preparing = None, []
            raise

    def _finish(self) -> list[dict[str, Any]]:
        """The evaluation's results, the replies of the calls before it taken too (blocks until they are in)."""
        caller, evaluation = self.caller, self.ticket
        assert caller is not None and evaluation is not None, "no evaluation in flight"
        for ticket in self.preparing:          # answered before the evaluation (one link, in order)
            caller.result(ticket)
        results = caller.result(evaluation)
        self.job = self.ticket = None
        self.preparing = []
        return results

    def poll(self) -> list[dict[str, Any]] | None:
        """The finished evaluation's episode results (wire form), or None while it plays or waits for its actor.
        Never blocks (an evaluation actor that died is replaced and the evaluation started again)."""
        if self.job is None:
            return None
        if self.caller is None or self.ticket is None:
            self.replacements.poll()
            return None
        try:
            return self._finish() if self.caller.ready(self.ticket) else None
        except rpc.ActorDiedError:
            self._replace()
            return None

    def wait(self) -> list[dict[str, Any]] | None:
        """Block until the evaluation in flight (if any) is over; its results (None: there was none). While its
        actor waits for Ray to place it, says so every :data:`TELL_SECONDS`."""
        waiting = told = time.monotonic()
        while self.job is not None:
            if self.caller is None:
                self.replacements.poll()
                if self.caller is None:
                    if time.monotonic() - told >= TELL_SECONDS:
                        told = time.monotonic()
                        log.warning("the evaluation waits %.0f s for its actor (Ray has not placed it yet)",
                                    told - waiting)
                    time.sleep(POLL_SECONDS)
                continue
            try:
                return self._finish()
            except rpc.ActorDiedError:
                self._replace()
        return None

    def _replace(self) -> None:
        self._close_actor(graceful=False)
        self.replaced += 1
        self._submit()

    def _close_actor(self, graceful: bool) -> None:
        if self.caller is not None:
            self.caller.close()
        if self.actor is not None:
            self.kill(self.actor, graceful)
        self.caller = self.actor = None
        self.ticket, self.preparing = None, []

    def close(self) -> None:
        """End the evaluation actor (an evaluation in flight is abandoned, a replacement not joined yet ended)."""
        self.replacements.close()
        self._close_actor(graceful=True)
        self.job = None
