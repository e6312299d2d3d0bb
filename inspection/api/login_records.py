"""What the login throttle remembers: failed and refused password checks per (account, client
address) pair, per address and per account, in bounded memory.

A pair's failures within ``window`` (counted from its first failure) are its budget: at
``max_failures`` its logins are refused until the window ends. Failures and refusals for want
of a turn also make up each key's *pressure*, a count that decays by e to the minus one every
``window`` seconds; it ranks the waiting checks (lowest first). A refused attempt retried with
the same password counts once: a patient client does not lose its place by retrying.
"""

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

#: Keys (pairs, addresses and accounts together) remembered at most; the least recently
#: touched are forgotten first. About 400 bytes each: 25 MB at most.
MAX_KEYS = 65536


class _Record:
    __slots__ = ("failures", "last_refused", "pressure", "since", "stamp")

    def __init__(self, now: float) -> None:
        self.failures = 0
        self.since = now  # start of the failure window
        self.pressure = 0.0
        self.stamp = now  # when pressure was last brought up to date
        self.last_refused = b""


class LoginRecords:
    """Thread-safe; ``account`` is the user name given (known or not), ``address`` the
    client's key (an IPv6 client: its /64)."""

    def __init__(self, window: float, max_failures: int, max_keys: int = MAX_KEYS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.max_failures = max_failures
        self.max_keys = max_keys
        self.clock = clock
        self._records: OrderedDict[tuple[str, ...], _Record] = OrderedDict()
        self._lock = threading.Lock()

    def refusal(self, account: str, address: str) -> int:
        """Seconds the pair must wait (its budget is spent), or 0: check its password."""
        now = self.clock()
        with self._lock:
            record = self._records.get(("pair", account, address))
            if record is None or record.failures < self.max_failures:
                return 0
            left = record.since + self.window - now
            return math.ceil(left) if left > 0 else 0

    def rank(self, account: str, address: str) -> tuple[float, float, float]:
        """Pressure of the pair, of the address, of the account: a pair that never failed
        goes before any that did, whatever its address and account."""
        now = self.clock()
        with self._lock:
            return tuple(self._pressure(key, now) for key in _keys(account, address))

    def failed(self, account: str, address: str) -> int:
        """Note a wrong password; the pair's failures in its window, this one included."""
        now = self.clock()
        with self._lock:
            pair, *others = [self._touch(key, now) for key in _keys(account, address)]
            if now - pair.since >= self.window:
                pair.failures, pair.since = 0, now
            pair.failures += 1
            for record in (pair, *others):
                record.pressure += 1
            return pair.failures

    def refused(self, account: str, address: str, attempt: bytes) -> None:
        """Note a check refused for want of a turn; ``attempt`` (a digest of the user name and
        password) tells a retry of the same attempt, which counts once."""
        now = self.clock()
        with self._lock:
            for key in _keys(account, address):
                record = self._touch(key, now)
                if record.last_refused != attempt:
                    record.last_refused = attempt
                    record.pressure += 1

    def succeeded(self, account: str, address: str) -> None:
        """The pair logged in: its failures and pressure are forgotten."""
        with self._lock:
            self._records.pop(("pair", account, address), None)

    def __len__(self) -> int:
        return len(self._records)

    def _pressure(self, key: tuple[str, ...], now: float) -> float:
        record = self._records.get(key)
        if record is None:
            return 0.0
        return record.pressure * math.exp(-(now - record.stamp) / self.window)

    def _touch(self, key: tuple[str, ...], now: float) -> _Record:
        record = self._records.pop(key, None)
        if record is None:
            record = _Record(now)
        else:
            record.pressure *= math.exp(-(now - record.stamp) / self.window)
            record.stamp = now
        self._records[key] = record
        while len(self._records) > self.max_keys:
            self._records.popitem(last=False)
        return record


def _keys(account: str, address: str) -> tuple[tuple[str, ...], ...]:
    return ("pair", account, address), ("address", address), ("account", account)
