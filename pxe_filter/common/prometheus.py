"""Serving a Prometheus registry on its own port (the filter daemon and the worker).

Each process keeps a registry of its own (never prometheus_client's global one), so that
only the metrics that process produces are exported, and tests can run several in one
interpreter.
"""

import logging

from prometheus_client import (
    CollectorRegistry,
    ProcessCollector,
    disable_created_metrics,
    start_http_server,
)

LOG = logging.getLogger(__name__)


def new_registry() -> CollectorRegistry:
    """A registry with the process's CPU, memory and file-descriptor figures in it."""
    # The *_created series double every counter for what only OpenMetrics scrapers use.
    disable_created_metrics()
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    return registry


class MetricsServer:
    """``GET /metrics`` (Prometheus text format) over HTTP on ``host:port``, in a thread;
    nothing at all with port 0 (metrics off)."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._server = None

    def start(self) -> None:
        """Listen; raises OSError (address in use, not an address of this machine)."""
        if not self.port:
            return
        self._server, _thread = start_http_server(self.port, addr=self.host,
                                                  registry=self.registry)
        LOG.info("Prometheus metrics on http://%s:%d/metrics",
                 f"[{self.host}]" if ":" in self.host else self.host,
                 self._server.server_port)

    def stop(self) -> None:
        """Stop listening (shutdown() returns once the serving thread's loop has); never
        raises."""
        if self._server is None:
            return
        try:
            self._server.shutdown()
            self._server.server_close()
        except OSError as exc:
            LOG.warning("Stopping the metrics server: %s", exc)
        self._server = None
