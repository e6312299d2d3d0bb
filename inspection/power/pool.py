"""Bounded BMC work: at most ``[bmc]max_sessions`` sessions open at once in this process,
each request retried with exponential backoff, every failure counted in the metrics."""

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TypeVar

from oslo_config import cfg

from inspection import metrics
from inspection.power import drivers
from inspection.power.errors import BmcError

LOG = logging.getLogger(__name__)


class Stopping(Exception):
    """The service stops: BMC work not done yet stays recorded for the next start."""


T = TypeVar("T")


class SessionPool:
    """Runs work against a node's BMC in one of a bounded number of sessions."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        group = conf.bmc
        self.size = group.max_sessions
        self.timeout = group.call_timeout
        self.retries = group.call_retries
        self.interval = group.retry_interval
        self._slots = threading.BoundedSemaphore(self.size)
        #: Set when the service stops: no new attempt starts and backoffs end at once.
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self.open_now = 0
        self.most_open = 0  # the highest number of sessions open at once, for tests

    def run(self, driver: str | None, driver_info: Mapping | None,
            work: Callable[[drivers.BmcClient], T], what: str = "BMC request") -> T:
        """``work(client)`` in a fresh session, retried while the failure may pass;
        :class:`BmcError` after the last attempt."""
        label = driver or "none"
        for attempt in range(self.retries + 1):
            if self.stopping.is_set():
                raise Stopping(what)
            try:
                result = self._once(driver, driver_info, work)
            except BmcError as exc:
                metrics.BMC_FAILURES.labels(driver=label, kind=exc.kind).inc()
                if not exc.retryable or attempt == self.retries:
                    metrics.BMC_REQUESTS.labels(driver=label, outcome="failed").inc()
                    raise
                delay = self.interval * 2 ** attempt
                LOG.info("%s failed (%s); retry %d of %d in %.1f s", what, exc, attempt + 1,
                         self.retries, delay)
                if self.stopping.wait(delay):
                    raise Stopping(what) from None
            else:
                metrics.BMC_REQUESTS.labels(driver=label, outcome="ok").inc()
                return result
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _once(self, driver: str | None, driver_info: Mapping | None,
              work: Callable[[drivers.BmcClient], T]) -> T:
        with self._slots:
            self._opened(1)
            try:
                client = drivers.open_client(driver, driver_info, self.timeout)
                try:
                    return work(client)
                finally:
                    client.close()
            finally:
                self._opened(-1)

    def _opened(self, delta: int) -> None:
        with self._lock:
            self.open_now += delta
            self.most_open = max(self.most_open, self.open_now)
            metrics.BMC_SESSIONS.set(self.open_now)
