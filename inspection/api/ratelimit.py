"""A token bucket per client address on the ramdisk callback (``[api]callback_rate``,
``callback_burst``): beyond it 429 with ``Retry-After``, before the body is read.

Each address may send ``callback_burst`` callbacks at once, then ``callback_rate`` a second.
A machine posts once per inspection, so a rack booting together, each machine from its own
address, never meets the limit; one client posting hundreds does. IPv6 addresses count per
/64 (one host may own all of it). The table of buckets is bounded: full buckets (idle
clients) are forgotten first.
"""

import ipaddress
import math
import threading
import time
from collections import OrderedDict

from flask import Flask, Response, request
from oslo_config import cfg

from inspection import metrics
from inspection.api.addresses import client_address, proxy_headers_parsed
from inspection.api.errors import json_error

CALLBACK_ENDPOINT = "continue_inspection.continue_inspection"
#: Client addresses remembered at most (about 100 bytes each).
MAX_CLIENTS = 65536


def client_key(address: str) -> str:
    """The bucket of ``address``: itself, or its /64 for IPv6."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


class TokenBuckets:
    """Token buckets by key; thread-safe."""

    def __init__(self, rate: float, burst: int, max_clients: int = MAX_CLIENTS,
                 clock=time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self.max_clients = max_clients
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """Take a token for ``key``: 0 if granted, else the seconds until one is due."""
        now = self.clock()
        with self._lock:
            tokens, stamp = self._buckets.pop(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - stamp) * self.rate)
            wait = 0.0
            if tokens >= 1:
                tokens -= 1
            else:
                wait = (1 - tokens) / self.rate
            self._buckets[key] = (tokens, now)
            if len(self._buckets) > self.max_clients:
                self._forget(now)
            return wait

    def _forget(self, now: float) -> None:
        # Full buckets hold nothing worth keeping; then the least recently seen go, an
        # eighth of the table at once, so that the scan is not repeated at every request.
        for key in [k for k, (tokens, stamp) in self._buckets.items()
                    if tokens + (now - stamp) * self.rate >= self.burst]:
            del self._buckets[key]
        if len(self._buckets) > self.max_clients:
            while len(self._buckets) > self.max_clients * 7 // 8:
                self._buckets.popitem(last=False)


def install(app: Flask, conf: cfg.ConfigOpts) -> None:
    """Refuse callbacks over the rate of their client address (0 turns the limit off)."""
    if conf.api.callback_rate <= 0:
        return
    buckets = TokenBuckets(conf.api.callback_rate, conf.api.callback_burst)
    behind_proxy = proxy_headers_parsed(conf)
    metrics.CALLBACK_REFUSALS.labels(reason="rate_limit")

    @app.before_request
    def limit_callbacks() -> Response | None:
        if request.endpoint != CALLBACK_ENDPOINT:
            return None
        wait = buckets.take(client_key(client_address(behind_proxy)))
        if not wait:
            return None
        metrics.CALLBACK_REFUSALS.labels(reason="rate_limit").inc()
        retry = max(1, math.ceil(wait))
        return json_error(429, f"Too many inspection callbacks from this address; retry in "
                               f"{retry} s", {"Retry-After": str(retry)})
