"""The processing task protocol between the API (sender) and the workers (receivers).

The API casts ``process(context, node_uuid, data)`` on the plain topic
``ironic-inspection.worker`` of exchange ``ironic``: RabbitMQ hands each message to ONE of the
workers consuming the topic (round-robin), and keeps it queued while no worker runs. Never a
fanout: every inspection must be processed exactly once.
"""

import logging
import threading
from collections.abc import Callable
from typing import Any

from pxe_filter.common import messaging as common_messaging
from pxe_filter.common.messaging import oslo_messaging_module

messaging = oslo_messaging_module()

EXCHANGE = "ironic"
TOPIC = "ironic-inspection.worker"
VERSION = "1.0"
METHOD = "process"

#: Inspections processed at once by one worker. oslo.messaging's threading executor runs up
#: to 64 handlers; more than the database pool (5 + 10 overflow) would only queue on it.
MAX_CONCURRENT = 8

LOG = logging.getLogger(__name__)


def target(server: str | None = None):
    """The oslo.messaging target of the processing tasks (server side: pass ``server``)."""
    return messaging.Target(exchange=EXCHANGE, topic=TOPIC, version=VERSION, server=server)


class WorkerClient:
    """Casts processing tasks to whichever worker takes them next."""

    def __init__(self, transport, retry: int | None = None) -> None:
        # retry bounds reconnection attempts when the bus is down (None: forever, which would
        # hang the API request; the caller chooses).
        self._client = messaging.get_rpc_client(transport, target(), retry=retry)

    def process(self, node_uuid: str, data: dict[str, Any]) -> None:
        """Queue the processing of ``data`` for node ``node_uuid`` (returns at once)."""
        self._client.cast({}, METHOD, node_uuid=node_uuid, data=data)
        LOG.debug("Cast %s for node %s", METHOD, node_uuid)


class WorkerEndpoint:
    """Runs ``process`` with a callable such as ``InspectionService.process``."""

    target = messaging.Target(version=VERSION)

    def __init__(self, process: Callable[[str, dict], None],
                 max_concurrent: int = MAX_CONCURRENT) -> None:
        self._process = process
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._busy = 0
        self._busy_lock = threading.Lock()

    @property
    def busy(self) -> int:
        """Inspections being processed right now."""
        return self._busy

    @messaging.expose
    def process(self, context, node_uuid=None, data=None, **kwargs) -> None:
        """Process one inspection; failures are logged (the node records its own)."""
        if kwargs:
            LOG.warning("Task for node %s: ignoring unknown argument(s) %s", node_uuid,
                        ", ".join(sorted(kwargs)))
        if not isinstance(node_uuid, str) or not isinstance(data, dict):
            LOG.error("Dropping a malformed processing task (node_uuid=%r, data of type %s)",
                      node_uuid, type(data).__name__)
            return
        with self._slots:
            with self._busy_lock:
                self._busy += 1
            try:
                self._process(node_uuid, data)
            except Exception:
                # An infrastructure failure (database down...): the node stays in
                # 'inspect wait' and the inspect-wait timeout fails it later.
                LOG.exception("Processing node %s failed; the inspect-wait timeout will "
                              "fail it unless it is retried", node_uuid)
            finally:
                with self._busy_lock:
                    self._busy -= 1


def start_server(transport, host: str, endpoint: WorkerEndpoint):
    """Start consuming processing tasks as server ``host``; returns the running server."""
    return common_messaging.start_rpc_server(transport, target(server=host), [endpoint])


def stop_server(server) -> None:
    """Stop consuming and wait for in-flight handlers to finish."""
    common_messaging.stop_rpc_server(server)
