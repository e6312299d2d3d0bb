"""Handing accepted inspection data to processing: the data is committed to the database
first (what a 202 promises), then a worker is woken over the message bus, or a thread of
this process (all-in-one mode, ``[DEFAULT]transport_url`` unset)."""

import logging
import queue
import threading
from typing import Any, Protocol

import sqlalchemy as sa
from oslo_config import cfg
from sqlalchemy.engine import Engine

from inspection.db import retry
from inspection.power.actor import PowerActor
from inspection.processing import callbacks
from inspection.processing.out_of_band import OutOfBandInspector
from inspection.timeouts import TimeoutTask
from inspection.worker.runner import CallbackRunner
from pxe_filter.common.database import error_reason

LOG = logging.getLogger("inspection.api.dispatch")

#: Reconnection attempts of one wake-up cast: the workers find stored callbacks by
#: themselves within [processing]heartbeat_interval, so a dead bus is not waited for.
CAST_RETRY = 2
#: Seconds after which a transient database error is no longer retried within a request:
#: the ramdisk retries the callback itself, and a dead server must not hold the request.
API_RETRY_BUDGET = 2.0


class DispatchError(Exception):
    """The data could not be stored (the ramdisk should retry later)."""


class Dispatcher(Protocol):
    """Something that makes ``(node_uuid, data)`` durable, then processes it."""

    def dispatch(self, node_uuid: str, data: dict[str, Any], stored: int | None = None,
                 attempt: str | None = None) -> None:
        """Commit the data for the node's inspection ``attempt`` (unless already ``stored``,
        a row id) and wake a processor; raise :class:`DispatchError` if it could not be
        committed."""

    def close(self) -> None:
        """Stop accepting work."""

    def wake_power(self) -> None:
        """Have BMC work recorded on nodes done soon."""


def store(engine: Engine, node_uuid: str, data: dict[str, Any],
          attempt: str | None = None) -> int:
    """Commit the callback; :class:`DispatchError` when the database refuses it."""
    try:
        return retry.call(callbacks.store, engine, node_uuid, data, attempt,
                          budget=API_RETRY_BUDGET,
                          what=f"storing the inspection data of node {node_uuid}")
    except sa.exc.SQLAlchemyError as exc:
        LOG.error("Cannot store the inspection data of node %s, so it was not accepted (the "
                  "ramdisk retries): %s", node_uuid, error_reason(exc))
        raise DispatchError("the database is unavailable") from None


class InProcessDispatcher:
    """Stores the data, then wakes the :class:`CallbackRunner` of this process.

    All-in-one, the API is the only process that processes callbacks, so it runs every
    periodic task a worker runs: the inspect-wait timeout first (nothing else closes the
    PXE filters of a node whose ramdisk never calls back), then the runner's heartbeat and
    recovery housekeeping.
    """

    def __init__(self, service: Any, conf: cfg.ConfigOpts, threads: int = 4) -> None:
        self.engine = service.engine
        inspector = OutOfBandInspector.from_service(service)  # ConfigError before starting
        self.timeout_task = TimeoutTask.from_conf(self.engine, conf, service.notifier)
        self.timeout_task.start()
        self.runner = CallbackRunner(self.engine, service, conf, threads)
        try:
            self.runner.start()
        except BaseException:
            self.timeout_task.stop(timeout=10)
            raise
        # BMC work runs where processing runs: here, all-in-one.
        self.power = PowerActor(self.engine, conf, service.notifier, inspector=inspector)
        self.power.start()

    def dispatch(self, node_uuid: str, data: dict[str, Any], stored: int | None = None,
                 attempt: str | None = None) -> None:
        """Store the data (unless already ``stored``) and wake a processing thread."""
        if stored is None:
            store(self.engine, node_uuid, data, attempt)
        self.runner.wake()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until nothing is stored or running; False on timeout."""
        return self.runner.wait_idle(timeout)

    def wake_power(self) -> None:
        """Look for BMC work now."""
        self.power.wake()

    def close(self) -> None:
        """Finish running callbacks and BMC steps (stored work waits for the next start),
        stop the timeout task."""
        self.runner.stop()
        self.power.stop()
        self.timeout_task.stop(timeout=10)


class RpcDispatcher:
    """Stores the data, then casts a wake-up to one worker from a thread of its own, so
    that a slow or dead message bus never holds up the ramdisk's request."""

    def __init__(self, engine: Engine, transport: Any, repair: Any = None) -> None:
        from inspection.worker.rpc import WorkerClient  # noqa: PLC0415 - needs oslo.messaging

        self.engine = engine
        # Leftover reservations of this API's aborts and inspects (recovery.ReservationRepair)
        self.repair = repair
        self.transport = transport
        self.client = WorkerClient(transport, retry=CAST_RETRY)
        self._wakeups: queue.SimpleQueue = queue.SimpleQueue()
        self._bus_down = False
        self._sender = threading.Thread(target=self._send, name="worker-wakeups", daemon=True)
        self._sender.start()

    def dispatch(self, node_uuid: str, data: dict[str, Any], stored: int | None = None,
                 attempt: str | None = None) -> None:
        """Store the data (unless already ``stored``), then queue a wake-up cast."""
        self._wakeups.put(stored if stored is not None
                          else store(self.engine, node_uuid, data, attempt))

    def wake_power(self) -> None:
        """Wake a worker, whose BMC actor looks for recorded work (0: no callback row)."""
        self._wakeups.put(0)

    def _send(self) -> None:
        while (row_id := self._wakeups.get()) is not None:
            try:
                self.client.wake()
            except Exception as exc:
                if not self._bus_down:
                    LOG.warning("Cannot wake a worker over the message bus (%s); accepted "
                                "callbacks are safe in the database and the workers find "
                                "them within [processing]heartbeat_interval", exc)
                self._bus_down = True
                self._drop_queued()
                continue
            if self._bus_down:
                LOG.info("The message bus carries wake-ups again (callback %s)", row_id)
                self._bus_down = False

    def _drop_queued(self) -> None:
        # Every worker polls anyway: a backlog of casts to a dead bus is not worth sending.
        try:
            while True:
                if self._wakeups.get_nowait() is None:
                    self._wakeups.put(None)
                    return
        except queue.Empty:
            return

    def close(self) -> None:
        """Stop the sender and release the transport."""
        self._wakeups.put(None)
        self._sender.join(10)
        if self.repair is not None:
            self.repair.stop(10)
        self.transport.cleanup()
