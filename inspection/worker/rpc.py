"""The wake-up protocol between the API (sender) and the workers (receivers).

The API commits each accepted callback to the database, then casts ``wake(context)`` on the
plain topic ``ironic-inspection.worker`` of exchange ``ironic``: RabbitMQ hands each message
to ONE of the workers consuming the topic (round-robin), which then claims stored callbacks
(:mod:`inspection.worker.runner`). The message carries no data: a lost wake-up only delays a
callback until the next poll. ``process(context, node_uuid, data)``, the task of API
versions that cast the data itself, is still accepted during an upgrade: it is stored, then
processed like any callback.
"""

import logging
from collections.abc import Callable
from typing import Any

from pxe_filter.common import messaging as common_messaging
from pxe_filter.common.messaging import oslo_messaging_module

messaging = oslo_messaging_module()

EXCHANGE = "ironic"
TOPIC = "ironic-inspection.worker"
VERSION = "1.1"  # 1.1: wake
METHOD = "wake"

#: Inspections processed at once by one worker: more than the database pool (5 + 10
#: overflow) would only queue on it.
MAX_CONCURRENT = 8

LOG = logging.getLogger(__name__)


def target(server: str | None = None):
    """The oslo.messaging target of the processing tasks (server side: pass ``server``)."""
    return messaging.Target(exchange=EXCHANGE, topic=TOPIC, version=VERSION, server=server)


class WorkerClient:
    """Casts wake-ups to whichever worker takes them next."""

    def __init__(self, transport, retry: int | None = None) -> None:
        # retry bounds reconnection attempts when the bus is down (None: forever).
        self._client = messaging.get_rpc_client(transport, target(), retry=retry)

    def wake(self) -> None:
        """Tell one worker that a callback is stored (returns at once)."""
        self._client.cast({}, METHOD)
        LOG.debug("Cast %s", METHOD)


class WorkerEndpoint:
    """Receives wake-ups (and older APIs' tasks) for a :class:`~inspection.worker.runner.
    CallbackRunner`."""

    target = messaging.Target(version=VERSION)

    def __init__(self, wake: Callable[[], None],
                 store: Callable[[str, dict], Any]) -> None:
        self._wake = wake
        self._store = store

    @messaging.expose
    def wake(self, context, **kwargs) -> None:
        """Wake one processing thread."""
        self._wake()

    @messaging.expose
    def process(self, context, node_uuid=None, data=None, **kwargs) -> None:
        """A task of an older API, with the data: store it, then process it as any other."""
        if kwargs:
            LOG.warning("Task for node %s: ignoring unknown argument(s) %s", node_uuid,
                        ", ".join(sorted(kwargs)))
        if not isinstance(node_uuid, str) or not isinstance(data, dict):
            LOG.error("Dropping a malformed processing task (node_uuid=%r, data of type %s)",
                      node_uuid, type(data).__name__)
            return
        try:
            self._store(node_uuid, data)
        except Exception:
            # The message is already taken from the bus: only the inspect-wait timeout
            # can end this node's inspection now.
            LOG.exception("Could not store the inspection data of node %s sent by an older "
                          "API; the ramdisk must post it again", node_uuid)
            return
        self._wake()


def start_server(transport, host: str, endpoint: WorkerEndpoint):
    """Start consuming processing tasks as server ``host``; returns the running server."""
    return common_messaging.start_rpc_server(transport, target(server=host), [endpoint])


def stop_server(server) -> None:
    """Stop consuming and wait for in-flight handlers to finish."""
    server.stop()
    server.wait()
