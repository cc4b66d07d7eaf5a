"""``All``, ``Any`` and ``Gather``: call decorated actors (Ray actor handles or local objects).

    actors = [ray.remote(Actor).remote() for _ in range(4)]
    with All(actors) as everyone:
        everyone("set_weights", blob)              # on every actor; results in actor order
        everyone.broadcast("set_weights", blob)    # fire-and-check: returns at once, errors surface later
    with Any(actors) as someone:
        someone("evaluate", seed)                  # one free actor
        for result in someone.map(("evaluate", s) for s in seeds): ...
    with Gather(All(actors)) as gather, gather.gathering("sample"):
        segment = gather()                          # next result any actor streamed
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any as Value
from typing import Iterable, Iterator, Sequence

from .connection import Connection
from .errors import ActorDiedError, RemoteError, RPCError
from .link import Link, raise_remote
from .settings import RpcSettings
from .wire import Kind

log = logging.getLogger(__name__)

Settings = RpcSettings | dict | None


class _Caller:
    """Membership and closing shared by All and Any."""

    pattern = ""

    def __init__(self, actors: Iterable[Value], *, settings: Settings = None, secret: bytes | None = None) -> None:
        self.link = Link(actors, self.pattern, settings, secret)

    @property
    def actors(self) -> list[Value]:
        """The actors' handles (or local objects), in order."""
        return [connection.handle for connection in self.link.connections]

    def __len__(self) -> int:
        return len(self.link.connections)

    def add(self, actor: Value) -> None:
        """Append a (replacement) actor."""
        self.link.add([actor])

    def remove(self, actor: Value) -> None:
        """Drop an actor (by handle, or by index): a dead one, or one no longer wanted."""
        self.link.detach(self._connection(actor))

    def hosts(self) -> list[str]:
        """Where each actor serves, in order: the host of its TCP address (``tcp://HOST:PORT``)."""
        return [str(connection.endpoint["address"]).removeprefix("tcp://").rsplit(":", 1)[0]
                for connection in self.link.connections]

    def handle(self, actor: Value) -> Value:
        """The handle of an actor given by name (as in :class:`ActorDiedError`), index or handle."""
        return self._connection(actor).handle

    def _connection(self, actor: Value) -> Connection:
        if isinstance(actor, int):
            return self.link.connections[actor]
        for connection in self.link.connections:
            if connection.handle is actor or connection.name == actor:
                return connection
        raise ValueError(f"{actor!r} is not one of this {type(self).__name__}'s actors")

    def close(self) -> None:
        """Close every socket; the actors keep serving other callers."""
        self.link.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: Value) -> None:
        self.close()


class All(_Caller):
    """Call a method on every actor (``@all``)."""

    pattern = "all"

    def __init__(self, actors: Iterable[Value], *, settings: Settings = None, secret: bytes | None = None) -> None:
        super().__init__(actors, settings=settings, secret=secret)
        self._unchecked: collections.deque[int] = collections.deque()

    def __call__(self, name: str, *args: Value, **kwargs: Value) -> list[Value]:
        """Run ``name(*args, **kwargs)`` on every actor; block until all return; results in actor order.
        The payload is encoded and signed once; remote nodes get one copy each through a relay."""
        self.check()
        connections = list(self.link.connections)
        request_id = self.link.request(connections, Kind.CALL, [name, list(args), kwargs], relay=True)
        replies = self.link.wait(request_id)
        return [self.link.value(connection, replies[connection]) for connection in connections]

    def broadcast(self, name: str, *args: Value, **kwargs: Value) -> None:
        """Fire-and-check: send the call to every actor and return at once. A failure (remote exception
        or a dead actor) is raised by the next call, :meth:`check` or :meth:`wait`. Do not modify arrays
        passed here until :meth:`wait` returns: they are sent without copying."""
        self.check()
        connections = list(self.link.connections)
        self._unchecked.append(self.link.request(connections, Kind.CALL, [name, list(args), kwargs], relay=True))

    def scatter(self, name: str, arguments: Sequence[Sequence[Value]], **kwargs: Value) -> None:
        """Fire-and-check as :meth:`broadcast`, each actor with its own positional arguments (``arguments[i]`` for
        actor ``i``, in actor order; ``kwargs`` go to all): each gets only its own payload, so nothing is relayed.
        ValueError when there are not as many argument lists as actors."""
        self.check()
        connections = list(self.link.connections)
        if len(arguments) != len(connections):
            raise ValueError(f"scatter of {name!r}: {len(arguments)} argument lists for {len(connections)} actors")
        for connection, own in zip(connections, arguments):
            self._unchecked.append(self.link.request([connection], Kind.CALL, [name, list(own), kwargs]))

    def check(self) -> None:
        """Raise the first error of finished broadcasts, without blocking."""
        self.link.pump(0)
        while self._unchecked:
            request_id = self._unchecked[0]
            try:
                self.link.check_alive(request_id)
            except ActorDiedError:
                self._unchecked.popleft()  # the link forgot it; the caller mends the group and goes on
                raise
            if not self.link.done(request_id):
                return
            self._finish(self._unchecked.popleft())

    def wait(self) -> None:
        """Block until every broadcast finished; raise the first error."""
        while self._unchecked:
            self._finish(self._unchecked.popleft())

    def _finish(self, request_id: int) -> None:
        for connection, message in self.link.wait(request_id).items():
            self.link.value(connection, message)


class Any(_Caller):
    """Call a method on one free actor (``@any``)."""

    pattern = "any"

    def __init__(self, actors: Iterable[Value], *, settings: Settings = None, secret: bytes | None = None) -> None:
        super().__init__(actors, settings=settings, secret=secret)
        self._busy: collections.Counter[Connection] = collections.Counter()
        self._turn = 0

    def _pick(self) -> Connection:
        """The live actor with the fewest calls in flight; ties go round-robin."""
        connections = self.link.connections
        count = len(connections)
        self._turn += 1
        best, fewest = None, 0
        for offset in range(count):
            connection = connections[(self._turn + offset) % count]
            if connection.alive and (best is None or self._busy[connection] < fewest):
                best, fewest = connection, self._busy[connection]
        if best is None:
            dead = connections[0] if connections else None
            raise ActorDiedError(dead.name if dead else "every actor", 0 if dead else None, "no live actor left")
        return best

    def _settled(self, connection: Connection) -> None:
        """One call of ``connection`` ended; a connection with none in flight leaves the count (so that a removed
        one is not kept alive, with its process handle and pipes, by a zero entry)."""
        left = self._busy[connection] - 1
        if left > 0:
            self._busy[connection] = left
        else:
            self._busy.pop(connection, None)

    def submit(self, name: str, *args: Value, **kwargs: Value) -> tuple[Connection, int]:
        """Send a call to the least busy actor; returns a ticket for :meth:`result`."""
        connection = self._pick()
        request_id = self.link.request([connection], Kind.CALL, [name, list(args), kwargs])
        self._busy[connection] += 1
        return connection, request_id

    def result(self, ticket: tuple[Connection, int]) -> Value:
        """Block for a submitted call's result."""
        connection, request_id = ticket
        try:
            reply = self.link.wait(request_id)[connection]
        finally:
            self._settled(connection)
        return self.link.value(connection, reply)

    def ready(self, ticket: tuple[Connection, int]) -> bool:
        """Whether a submitted call's reply is in (:meth:`result` then returns at once), without blocking;
        ActorDiedError when its actor died meanwhile (the call is then forgotten)."""
        connection, request_id = ticket
        self.link.pump(0)
        if self.link.done(request_id):
            return True
        try:
            self.link.check_alive(request_id)
        except ActorDiedError:
            self._settled(connection)
            raise
        return False

    def __call__(self, name: str, *args: Value, **kwargs: Value) -> Value:
        """Run ``name(*args, **kwargs)`` on one free actor and return its result."""
        if self.link.idle():
            return self.link.call(self._pick(), [name, list(args), kwargs])
        return self.result(self.submit(name, *args, **kwargs))

    def map(self, calls: Iterable[Sequence[Value]], *, ordered: bool = True, depth: int = 1) -> Iterator[Value]:
        """Run each ``(name, *args)`` of ``calls`` on some actor, keeping every actor busy with up to
        ``depth`` calls; yields results in submission order (``ordered``) or as they complete."""
        pending = iter(calls)
        in_flight: collections.deque[tuple[Connection, int]] = collections.deque()
        exhausted = False
        try:
            while True:
                while not exhausted and len(in_flight) < depth * sum(c.alive for c in self.link.connections):
                    call = next(pending, None)
                    if call is None:
                        exhausted = True
                        break
                    in_flight.append(self.submit(call[0], *call[1:]))
                if not in_flight:
                    return
                yield from self._harvest(in_flight, ordered)
        finally:
            for connection, request_id in in_flight:  # abandoned by an error or a closed generator
                self._settled(connection)
                self.link.forget(request_id)

    def as_completed(self, calls: Iterable[Sequence[Value]], *, depth: int = 1, idle: float | None = None
                     ) -> Iterator[tuple[Sequence[Value], Value | BaseException] | None]:
        """Like ``map(calls, ordered=False)``, but one failure does not end the stream: yields ``(call,
        outcome)`` as calls finish, ``outcome`` being the result, the :class:`RemoteError` the method raised, or
        :class:`ActorDiedError` when its actor died. Calls on other actors keep running; a dead actor gets no
        more calls (:meth:`add` a replacement and it is kept busy from the next call on). ``idle`` (seconds):
        yields None when nothing finished for that long (the caller's clock and replacements go on; with no live
        actor left it then waits for one to be added instead of raising ActorDiedError)."""
        pending = iter(calls)
        in_flight: dict[tuple[Connection, int], Sequence[Value]] = {}
        exhausted = False
        try:
            while True:
                while not exhausted and len(in_flight) < depth * sum(c.alive for c in self.link.connections):
                    call = next(pending, None)
                    if call is None:
                        exhausted = True
                        break
                    in_flight[self.submit(call[0], *call[1:])] = call
                if not in_flight:
                    if exhausted:
                        return
                    if idle is None:
                        self._pick()  # raises ActorDiedError: calls are left but no actor is alive
                        return
                    time.sleep(idle)
                    yield None
                    continue
                finished, died = self._wait_some(in_flight, idle)
                if not finished and not died:
                    yield None
                for ticket in finished:
                    call = in_flight.pop(ticket)
                    try:
                        outcome: Value | BaseException = self.result(ticket)
                    except RemoteError as error:
                        outcome = error
                    yield call, outcome
                for ticket, death in died:
                    self._settled(ticket[0])
                    yield in_flight.pop(ticket), death
        finally:
            for connection, request_id in in_flight:
                self._settled(connection)
                self.link.forget(request_id)

    def _wait_some(self, in_flight: Iterable[tuple[Connection, int]], idle: float | None = None
                   ) -> tuple[list[tuple[Connection, int]], list[tuple[tuple[Connection, int], ActorDiedError]]]:
        """Block until some of ``in_flight`` finished or lost their actor, ``idle`` seconds at most (None: no
        limit): (finished, [(ticket, error)]), both empty after ``idle`` seconds without either."""
        deadline = None if idle is None else time.monotonic() + idle
        while True:
            finished, died = [], []
            for ticket in in_flight:
                if self.link.done(ticket[1]):
                    finished.append(ticket)
                    continue
                try:
                    self.link.check_alive(ticket[1])
                except ActorDiedError as error:
                    died.append((ticket, error))
            if finished or died:
                return finished, died
            if deadline is None:
                self.link.pump(None)
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                return [], []
            self.link.pump(max(1, int(left * 1000)))

    def _harvest(self, in_flight: "collections.deque[tuple[Connection, int]]", ordered: bool) -> Iterator[Value]:
        """Wait for at least one reply; yield what can be yielded in the requested order."""
        while True:
            finished = [t for t in in_flight if self.link.done(t[1])]
            if ordered:
                finished = finished[:1] if finished and finished[0] is in_flight[0] else []
            if finished:
                for ticket in finished:
                    in_flight.remove(ticket)
                    yield self.result(ticket)
                return
            for _, request_id in in_flight:
                self.link.check_alive(request_id)
            self.link.pump(None)


class Gather:
    """Stream results from every actor of an :class:`All` (``@gather``).

    ``gathering(name)`` makes each actor call ``self.name()`` in a loop and send every result;
    ``gather()`` returns the next one. Each actor has at most ``credits`` results in flight: it makes the
    next one when the caller takes one (back-pressure; the caller returns credits in batches of
    ``max(1, credits // 2)``, one message per batch). ``gathering(None)`` stops the loops.

    While :attr:`holding`, a taken result's credit is kept back until :meth:`release` (the caller decides when
    an actor may make its next result: after new weights reached it, say); :meth:`in_flight` counts the results
    the actors are making.
    """

    def __init__(self, everyone: All, credits: int = 1) -> None:  # noqa: A002 - the documented keyword
        if credits < 1:
            raise ValueError(f"credits must be at least 1, got {credits}")
        for connection in everyone.link.connections:
            if "gather" not in connection.endpoint["patterns"]:
                raise TypeError(f"{connection.name} is not decorated with @gather")
        self.all = everyone
        self.link = everyone.link
        self.credits = credits
        self.credit_batch = max(1, credits // 2)
        self.last_index: int | None = None
        self._owed: collections.Counter[Connection] = collections.Counter()
        self._held: collections.Counter[Connection] = collections.Counter()
        self.holding = False
        self.stop_timeout: float | None = None      # seconds the loops' end waits for a busy actor (None: for ever)
        self._call: list[Value] | None = None

    def gathering(self, name: str | None, *args: Value, **kwargs: Value) -> "_Stopper":
        """Start (or, with None, stop) every actor's loop of ``name(*args, **kwargs)``. The loops run
        from this call on; the returned object stops them on ``close()`` or at the end of a ``with`` block
        (``with gather.gathering(...)``; the original Lamarckian's ``contextlib.closing(gather.gathering(...))``
        works too)."""
        self._stop()
        if name is not None:
            self._call = [name, list(args), kwargs]
            for connection in self.link.connections:
                self._start(connection)
        return _Stopper(self)

    def _start(self, connection: Connection) -> None:
        generation = self.link.next_id()
        self.link.generations[connection] = generation
        self._owed[connection] = self._held[connection] = 0
        assert self._call is not None               # gathering
        self.link.post(connection, Kind.GATHER_START, generation, [*self._call, self.credits])

    def _stop(self) -> None:
        if self._call is None:
            return
        self._call = None
        live = [c for c in self.link.connections if c.alive]
        for connection in live:
            self.link.generations.pop(connection, None)
        if live:
            # answered after the step in progress; a dead actor raises ActorDiedError, and one still busy after
            # stop_timeout is left to its owner to end (its later results are dropped as stale)
            try:
                self.link.wait(self.link.request(live, Kind.GATHER_STOP), self.stop_timeout, "the end of its loop")
            except ActorDiedError:
                raise
            except RPCError as error:
                log.warning("gather: %s", error)
        self.link.items.clear()

    def receive(self, timeout: float | None = None) -> tuple[int | None, Value]:
        """The next ``(actor index, result)`` (index None: an actor removed since it sent it); raises
        ActorDiedError if a gathering actor dies, TimeoutError after ``timeout`` seconds, RemoteError if the actor's
        method raised (its loop then stops)."""
        if self._call is None:
            raise RuntimeError("not gathering: call gathering('method') first")
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.link.items:
            for connection in self.link.generations:
                if not connection.alive:
                    del self.link.generations[connection]
                    raise ActorDiedError(connection.name, self.link.index(connection), connection.death)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"no gathered result within {timeout}s")
            self.link.pump(None if remaining is None else max(1, int(remaining * 1000)))
        connection, message = self.link.items.popleft()
        self.last_index = self.link.index(connection)
        if message.kind == Kind.ERROR:
            self.link.generations.pop(connection, None)
            raise_remote(message.value, connection.name)
        if self.holding:
            self._held[connection] += 1
        else:
            self._credit(connection, 1)
        return self.last_index, message.value

    def _credit(self, connection: Connection, count: int) -> None:
        self._owed[connection] += count
        if self._owed[connection] >= self.credit_batch and connection in self.link.generations:
            self.link.post(connection, Kind.CREDIT, self.link.generations[connection], self._owed[connection])
            self._owed[connection] = 0

    def release(self, actor: int | None = None, count: int | None = None) -> None:
        """Return the credits kept back while :attr:`holding` (of the actor at index ``actor``, or of all; ``count``
        of them at most, None: all)."""
        connections = list(self._held) if actor is None else [self.link.connections[actor]]
        for connection in connections:
            held = self._held[connection]
            returned = held if count is None else min(count, held)
            self._held[connection] = held - returned
            if returned and connection.alive:
                self._credit(connection, returned)

    def in_flight(self, actor: int | None = None) -> int:
        """Results the live gathering actors (the one at index ``actor``, or all) are making or sending now (their
        credits not yet used)."""
        connections = self.link.generations if actor is None else \
            [c for c in [self.link.connections[actor]] if c in self.link.generations]
        return sum(self.credits - self._owed[c] - self._held[c] for c in connections if c.alive)

    def __call__(self, timeout: float | None = None) -> Value:
        """The next gathered result (see :meth:`receive`)."""
        return self.receive(timeout)[1]

    def add(self, actor: Value) -> None:
        """Add a (replacement) actor to the All; it starts gathering at once if a loop is running."""
        connection = self.link.add([actor])[0]
        if self._call is not None:
            self._start(connection)

    def remove(self, actor: Value) -> None:
        """Drop an actor (a dead one, typically); its queued results are discarded."""
        connection = self.all._connection(actor)
        self.link.items = collections.deque(item for item in self.link.items if item[0] is not connection)
        self._owed.pop(connection, None)
        self._held.pop(connection, None)
        self.all.remove(actor)

    def close(self) -> None:
        """Stop the loops (if the actors are alive) and close the All."""
        try:
            self._stop()
        finally:
            self.all.close()

    def __enter__(self) -> "Gather":
        return self

    def __exit__(self, *exc_info: Value) -> None:
        self.close()


class _Stopper:
    """Stops a :class:`Gather`'s loops on ``close()`` or when its ``with`` block ends."""

    def __init__(self, gather: Gather) -> None:
        self.gather = gather

    def close(self) -> None:
        self.gather.gathering(None)

    def __enter__(self) -> "_Stopper":
        return self

    def __exit__(self, kind: Value, error: Value, traceback: Value) -> None:
        if kind is None:
            self.close()
            return
        try:        # the block's own exception (a Ctrl-C, a failure) is what the caller sees, not a death found now
            self.close()
        except ActorDiedError as died:
            log.warning("gather: while stopping after %s: %s", kind.__name__, died)
