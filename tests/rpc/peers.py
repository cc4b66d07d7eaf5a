"""Decorated classes the RPC tests call (module-level so Ray can import them in its workers)."""

from __future__ import annotations

import os
import time

import numpy as np

from lamarckian.rpc import all, any, gather


@gather
@all
@any
class Echo:
    """Echoes values, raises on demand, streams a counter, sleeps."""

    def __init__(self, tag: int = 0) -> None:
        self.tag = tag
        self.produced = 0

    def echo(self, *args, **kwargs):
        return {"args": args, "kwargs": kwargs, "tag": self.tag}

    def add(self, x, y=1):
        return x + y + self.tag

    def checksum(self, array: np.ndarray) -> float:
        return float(array.sum(dtype=np.float64)) if array.size else 0.0

    def nbytes(self, array: np.ndarray) -> int:
        return int(array.nbytes)

    def fail(self, message: str) -> None:
        raise ValueError(message)

    def sleep(self, seconds: float) -> int:
        time.sleep(seconds)
        return self.tag

    def count(self) -> tuple:
        self.produced += 1
        return (self.tag, self.produced)

    def slow_count(self) -> tuple:
        time.sleep(0.05)
        return self.count()

    def produced_so_far(self) -> int:
        return self.produced

    def pid(self) -> int:
        return os.getpid()

    def environment(self, name: str) -> str | None:
        return os.environ.get(name)

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def unsendable(self):
        return {1, 2}

    def _private(self) -> str:
        return "secret"


@all
class OnlyAll:
    def ping(self) -> str:
        return "pong"


@gather
@all
@any
class SeedActor:
    """The actor of the original Lamarckian README's RPC examples: set_blob, describe, evaluate, gather."""

    def __init__(self, index: int = 0) -> None:
        self.index, self.blob, self.iteration = index, None, 0

    def set_blob(self, blob):
        self.blob = blob

    def describe(self):
        return {"actor": self.index}

    def evaluate(self, opponent):
        return [{"fitness": float(opponent), "actor": self.index}]

    def gather(self):
        self.iteration += 1
        return 16, {"obs": np.full(4, self.index, np.float32), "blob": self.blob}, [{"fitness": 1.0}], self.iteration


class Flaky(Echo):
    """An Echo whose process dies while it is built the first time (no ``flag`` file yet: it makes one)."""

    def __init__(self, flag: str, tag: int = 0) -> None:
        if not os.path.exists(flag):
            open(flag, "w").close()
            os._exit(3)
        super().__init__(tag)


class ClosesToFile(Echo):
    """An Echo whose ``close`` writes ``path`` (to see whether it ran)."""

    def __init__(self, path: str, tag: int = 0) -> None:
        super().__init__(tag)
        self.path = path

    def close(self) -> None:
        with open(self.path, "w") as stream:
            stream.write("closed")


@gather
@all
class Holder:
    """Keeps the last array it was sent (a view of the sender's shared memory, on one node) and checks, when the
    next one comes, that the kept one still holds what it held when it came."""

    def __init__(self, size: int = 1 << 18) -> None:
        self.kept: np.ndarray | None = None
        self.kept_sum = 0.0
        self.made = 0
        self.size = size

    def hold(self, array: np.ndarray) -> bool:
        intact = self.kept is None or float(self.kept.sum(dtype=np.float64)) == self.kept_sum
        self.kept, self.kept_sum = array, float(array.sum(dtype=np.float64))
        return intact

    def held(self) -> float:
        """The sum of the array it keeps (0 before the first)."""
        return self.kept_sum

    def version(self) -> np.ndarray:
        """The next of a stream of large arrays, each filled with its own number."""
        self.made += 1
        return np.full(self.size, self.made, np.float32)
