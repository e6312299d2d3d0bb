"""Handing accepted inspection data to processing: a worker over the message bus, or a
small in-process thread pool (all-in-one mode, ``[DEFAULT]transport_url`` unset)."""

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

LOG = logging.getLogger("inspection.api.dispatch")

#: Reconnection attempts of one cast: a dead bus must answer the ramdisk, not hang it.
CAST_RETRY = 2


class DispatchError(Exception):
    """The data could not be handed over (the ramdisk should retry later)."""


class Dispatcher(Protocol):
    """Something that processes ``(node_uuid, data)`` asynchronously."""

    def dispatch(self, node_uuid: str, data: dict[str, Any]) -> None:
        """Queue the processing; raise :class:`DispatchError` if that is impossible."""

    def close(self) -> None:
        """Stop accepting work and wait for what is queued."""


class InProcessDispatcher:
    """Runs ``service.process`` on a thread pool of this process."""

    def __init__(self, service: Any, threads: int = 4) -> None:
        self.service = service
        self._pool = ThreadPoolExecutor(max_workers=threads,
                                        thread_name_prefix="inspection-process")
        self._pending = 0
        self._idle = threading.Condition()

    def _run(self, node_uuid: str, data: dict[str, Any]) -> None:
        try:
            self.service.process(node_uuid, data)
        except Exception:
            # Infrastructure failure: the node stays in 'inspect wait' until the timeout.
            LOG.exception("Processing inspection data of node %s failed", node_uuid)
        finally:
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()

    def dispatch(self, node_uuid: str, data: dict[str, Any]) -> None:
        """Queue ``service.process(node_uuid, data)`` on the pool."""
        with self._idle:
            self._pending += 1
        try:
            self._pool.submit(self._run, node_uuid, data)
        except RuntimeError as exc:  # the pool is shut down: the service is stopping
            with self._idle:
                self._pending -= 1
            raise DispatchError(f"the service is stopping: {exc}") from None

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until nothing is queued or running; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self) -> None:
        """Finish queued work, then stop the threads."""
        self._pool.shutdown(wait=True)

    def backlog(self) -> int:
        """Data queued or being processed (for the metrics)."""
        with self._idle:
            return self._pending


class RpcDispatcher:
    """Casts to the workers with :class:`inspection.worker.rpc.WorkerClient`."""

    def __init__(self, transport: Any) -> None:
        from inspection.worker.rpc import WorkerClient  # noqa: PLC0415 - needs oslo.messaging

        self.transport = transport
        self.client = WorkerClient(transport, retry=CAST_RETRY)

    def dispatch(self, node_uuid: str, data: dict[str, Any]) -> None:
        """Cast the task; a bus failure becomes :class:`DispatchError`."""
        try:
            self.client.process(node_uuid, data)
        except Exception as exc:
            LOG.error("Cannot hand inspection data of node %s to a worker: %s", node_uuid, exc)
            raise DispatchError("the message bus is unavailable") from None

    def close(self) -> None:
        """Release the transport."""
        self.transport.cleanup()
