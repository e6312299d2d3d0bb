"""A short priority queue in front of the password checks, so guessers cannot starve a login.

At most ``slots`` checks run at once; up to ``length`` more wait. A freed slot goes to the
best-ranked waiter (lowest rank; ties in arrival order). Each client address has at most one
waiting check. A newcomer that finds the queue full (or its address's place taken) pushes out
the worst waiter (or its address's) if it ranks better, else it is refused: a login that has
not failed lately always gets the next free slot, however many guessers queue.
"""

import contextlib
import itertools
import threading
from collections.abc import Iterator


class QueueFull(Exception):
    """No place in the queue, pushed out by a better-ranked check, or waited too long."""


class _Waiter:
    __slots__ = ("client", "event", "outcome", "rank")

    def __init__(self, rank: tuple, client: str) -> None:
        self.rank = rank
        self.client = client
        self.event = threading.Event()
        self.outcome: str | None = None


class LoginQueue:
    """Thread-safe; use :meth:`slot` around each password check."""

    def __init__(self, slots: int, length: int, timeout: float) -> None:
        self.length = length
        self.timeout = timeout
        self._free = slots
        self._lock = threading.Lock()
        self._waiting: list[_Waiter] = []
        self._arrivals = itertools.count()

    @contextlib.contextmanager
    def slot(self, client: str, priority: tuple) -> Iterator[None]:
        """Hold a check slot while the block runs; QueueFull if none comes."""
        self._acquire(client, priority)
        try:
            yield
        finally:
            self._release()

    def _acquire(self, client: str, priority: tuple) -> None:
        with self._lock:
            if self._free > 0 and not self._waiting:
                self._free -= 1
                return
            waiter = _Waiter((*priority, next(self._arrivals)), client)
            # One waiting check per client address: addresses take turns, and one address
            # never holds more than one of the threads that wait.
            mine = next((w for w in self._waiting if w.client == client), None)
            if mine is not None:
                if mine.rank < waiter.rank:
                    raise QueueFull("a password check from this address is already waiting")
                self._push_out(mine)
            elif len(self._waiting) >= self.length:
                worst = max(self._waiting, key=lambda w: w.rank, default=None)
                if worst is None or worst.rank < waiter.rank:
                    raise QueueFull("too many password checks waiting")
                self._push_out(worst)
            self._waiting.append(waiter)
        granted = waiter.event.wait(self.timeout)
        with self._lock:
            if not granted and waiter.outcome is None:
                self._waiting.remove(waiter)
                raise QueueFull("waited too long for a password check")
        if waiter.outcome != "granted":
            raise QueueFull("pushed out of the queue by other password checks")

    def _push_out(self, waiter: _Waiter) -> None:
        self._waiting.remove(waiter)
        waiter.outcome = "pushed out"
        waiter.event.set()

    def _release(self) -> None:
        with self._lock:
            if self._waiting:
                best = min(self._waiting, key=lambda w: w.rank)
                self._waiting.remove(best)
                best.outcome = "granted"  # the slot passes straight to it
                best.event.set()
            else:
                self._free += 1
