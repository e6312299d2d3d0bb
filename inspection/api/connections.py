"""Slow or greedy clients cannot starve the ramdisk callback of connections.

waitress bounds the open connections in total (``connection_limit``) and closes idle ones
(``channel_timeout``), but one client may take every connection, and a client trickling a
header line every few seconds is never idle. So every waitress server of the API gets a
channel class that (1) closes a new connection at once when its address already holds
``[api]connections_per_client``, and (2) closes a connection whose request (headers and
body) is still incomplete ``[api]request_deadline`` seconds after its first byte. A client
that sends nothing at all is closed by ``channel_timeout`` as before.
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

LOG = logging.getLogger("inspection.api.connections")
#: Seconds between two log lines about connections closed at the deadline.
_LOG_INTERVAL = 60.0


class ConnectionGuard:
    """Open connections per client address, and the limits; thread-safe."""

    def __init__(self, per_client: int, deadline: float) -> None:
        self.per_client = per_client
        self.deadline = deadline
        self._lock = threading.Lock()
        self._open: collections.Counter[str] = collections.Counter()
        self._warned: set[str] = set()
        self._late = 0  # deadline closures not logged yet
        self._late_logged = 0.0

    def admit(self, address: str) -> bool:
        """Count a new connection from ``address``; False if it must be closed."""
        with self._lock:
            if self.per_client and self._open[address] >= self.per_client:
                first = address not in self._warned
                self._warned.add(address)
            else:
                self._open[address] += 1
                return True
        metrics.CONNECTIONS_CLOSED.labels("per_client_limit").inc()
        if first:
            LOG.warning("%s holds %d connections ([api]connections_per_client): closing its "
                        "new ones until it closes some. Behind a proxy, raise the limit or "
                        "set it to 0 and limit clients at the proxy", address,
                        self.per_client)
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

    def release(self, address: str) -> None:
        """A connection admitted for ``address`` is closed."""
        with self._lock:
            self._open[address] -= 1
            if self._open[address] <= 0:
                del self._open[address]
                self._warned.discard(address)


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
    """waitress's channel, with the per-client limit and the request deadline."""

    error_task_class = JsonErrorTask

    def __init__(self, server: BaseWSGIServer, sock: Any, addr: Any, adj: Any,
                 map: Any = None) -> None:
        super().__init__(server, sock, addr, adj, map=map)
        self.guard: ConnectionGuard = server.connection_guard
        self.client = addr[0] if isinstance(addr, tuple) else str(addr)
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


def install(server: Any, per_client: int, deadline: float) -> ConnectionGuard:
    """Guard every listening socket of ``server`` (what ``waitress.create_server``
    returned: one server, or several sharing one map)."""
    guard = ConnectionGuard(per_client, deadline)
    sockets = getattr(server, "map", None) or getattr(server, "_map", {})
    for dispatcher in list(sockets.values()):
        if isinstance(dispatcher, BaseWSGIServer):
            dispatcher.connection_guard = guard
            dispatcher.channel_class = GuardedChannel
    return guard
