"""Slow or greedy clients cannot starve the ramdisk callback of connections.

waitress bounds the open connections in total (``connection_limit``; past it, it stops
accepting and everyone waits) and closes idle ones (``channel_timeout``), but a few clients
may take every connection, and a client trickling a header line every few seconds is never
idle. So every waitress server of the API gets a channel class that

1. counts connections per client, an IPv6 client by its /64 (one host may own all of it);
2. closes a new connection at once when its client already holds
   ``[api]connections_per_client``;
3. keeps waitress accepting: a connection that would reach ``connection_limit`` is closed at
   once instead, and the last ``[api]connection_reserve`` connections go only to light
   clients (fewer than a tenth of ``connections_per_client`` open, at least 1), such as a
   ramdisk's callback or an admin, while heavy holders keep what they have;
4. closes a connection whose request (headers and body) is still incomplete
   ``[api]request_deadline`` seconds after its first byte. A client that sends nothing at
   all is closed by ``channel_timeout`` as before.
"""

import collections
import logging
import threading
import time
from typing import Any

from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer
from waitress.task import ErrorTask

from inspection import metrics
from inspection.api import rejections
from inspection.api.errors import error_body
from inspection.api.ratelimit import client_key

LOG = logging.getLogger("inspection.api.connections")
#: Seconds between two log lines about connections closed at the deadline.
_LOG_INTERVAL = 60.0


class ConnectionGuard:
    """Open connections per client (an address, or an IPv6 /64) and in total, and the
    limits; thread-safe. ``capacity`` 0: no total (waitress's alone)."""

    def __init__(self, per_client: int, deadline: float, capacity: int = 0,
                 reserve: int = 0) -> None:
        self.per_client = per_client
        self.deadline = deadline
        self.capacity = capacity
        # Without a per-client limit (behind a proxy) every connection is one client's.
        self.reserve = min(reserve, capacity) if per_client else 0
        self.light = max(1, per_client // 10)
        self._lock = threading.Lock()
        self._open: collections.Counter[str] = collections.Counter()
        self._total = 0
        self._warned: set[str] = set()
        self._late = 0  # deadline closures not logged yet
        self._late_logged = 0.0

    def _refusal(self, client: str) -> str | None:
        held = self._open[client]
        if self.per_client and held >= self.per_client:
            return "per_client_limit"
        if self.capacity and self._total >= self.capacity:
            return "connection_limit"
        if self.reserve and self._total >= self.capacity - self.reserve \
                and held >= self.light:
            return "connection_reserve"
        return None

    def admit(self, client: str) -> bool:
        """Count a new connection of ``client``; False if it must be closed."""
        with self._lock:
            reason = self._refusal(client)
            if reason is None:
                self._open[client] += 1
                self._total += 1
                return True
            first = client not in self._warned
            self._warned.add(client)
        metrics.CONNECTIONS_CLOSED.labels(reason).inc()
        if not first:
            return False
        if reason == "per_client_limit":
            LOG.warning("%s holds %d connections ([api]connections_per_client): closing "
                        "its new ones until it closes some. Behind a proxy, raise the limit "
                        "or set it to 0 and limit clients at the proxy", client,
                        self.per_client)
        else:
            LOG.warning("%d connections are open, %s holds %d: closing its new ones while "
                        "the last [api]connection_reserve (%d) of [api]connection_limit are "
                        "kept for clients holding fewer than %d. If these are real clients, "
                        "raise connection_limit", self._total, client, self._open[client],
                        self.reserve, self.light)
        return False

    def too_late(self, address: str) -> None:
        """A connection of ``address`` missed the deadline: counted, logged once a minute."""
        metrics.CONNECTIONS_CLOSED.labels("request_deadline").inc()
        now = time.monotonic()
        with self._lock:
            self._late += 1
            if now - self._late_logged < _LOG_INTERVAL:
                return
            count, self._late, self._late_logged = self._late, 0, now
        LOG.warning("Closed %d connection(s) whose request was not complete within "
                    "[api]request_deadline (%g s), the last from %s", count, self.deadline,
                    address)

    def release(self, client: str) -> None:
        """A connection admitted for ``client`` is closed."""
        with self._lock:
            self._total -= 1
            self._open[client] -= 1
            if self._open[client] <= 0:
                del self._open[client]
                self._warned.discard(client)


class JsonErrorTask(ErrorTask):
    """What waitress answers itself (a body over its limit, a malformed request) in
    Ironic's JSON error body instead of plain text; a rejected callback is logged."""

    def execute(self) -> None:
        """Write the error as JSON and close the connection, as waitress does."""
        error = self.request.error
        message = {413: "The request body is too large"}.get(error.code, error.reason)
        body = error_body(error.code, f"{message}: {error.body}").encode()
        self.status = f"{error.code} {error.reason}"
        self.response_headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)
        if (getattr(self.request, "path", None) or "").rstrip("/") == "/v1/continue_inspection":
            rejections.DEFAULT.rejected(getattr(self.channel, "client", "?"), error.code,
                                        f"{message}: {error.body}")


class GuardedChannel(HTTPChannel):
    """waitress's channel, with the connection limits and the request deadline."""

    error_task_class = JsonErrorTask

    def __init__(self, server: BaseWSGIServer, sock: Any, addr: Any, adj: Any,
                 map: Any = None) -> None:
        super().__init__(server, sock, addr, adj, map=map)
        self.guard: ConnectionGuard = server.connection_guard
        self.client = client_key(addr[0] if isinstance(addr, tuple) else str(addr))
        self.admitted = self.guard.admit(self.client)
        self.request_started: float | None = None
        if not self.admitted:
            self.handle_close()

    def received(self, data: bytes) -> bool:
        """Feed waitress's parser; close once the current request is over its deadline."""
        now = time.monotonic()
        if self.request_started is not None and now - self.request_started > \
                self.guard.deadline:
            self.guard.too_late(self.client)
            self.will_close = True
            return False
        before = self.request
        result = super().received(data)
        if self.request is None:
            self.request_started = None
        elif self.request is not before:
            self.request_started = now
        return result

    def del_channel(self, map: Any = None) -> None:
        """Stop counting this connection against its address (once)."""
        if self.admitted:
            self.admitted = False
            self.guard.release(self.client)
        super().del_channel(map)


def install(server: Any, per_client: int, deadline: float, connection_limit: int = 0,
            reserve: int = 0) -> ConnectionGuard:
    """Guard every listening socket of ``server`` (what ``waitress.create_server``
    returned: one server, or several sharing one map) with ``connection_limit`` (waitress's)
    and ``reserve``."""
    sockets = getattr(server, "map", None) or getattr(server, "_map", {})
    # waitress stops accepting once its map (listeners and its trigger included) holds
    # connection_limit entries: the guard closes connections one before that.
    capacity = max(1, connection_limit - len(sockets) - 1) if connection_limit else 0
    guard = ConnectionGuard(per_client, deadline, capacity, reserve)
    for dispatcher in list(sockets.values()):
        if isinstance(dispatcher, BaseWSGIServer):
            dispatcher.connection_guard = guard
            dispatcher.channel_class = GuardedChannel
    return guard
