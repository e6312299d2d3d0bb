"""Processing accepted callbacks from the database, in a worker or in the API all-in-one.

A few threads claim stored callbacks (:mod:`inspection.processing.callbacks`), process
them, and delete each in the transaction that commits its outcome. They wake when told
(a message-bus wake-up, or the API of the same process) and otherwise sleep; a housekeeping
thread takes over the work of dead processes (:mod:`inspection.worker.heartbeat`) and
wakes the threads whenever callbacks are due, every ``[processing]heartbeat_interval``
seconds, so a lost wake-up delays a callback by at most one interval; another thread writes
this process's heartbeat as often.
"""

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from oslo_config import cfg
from sqlalchemy.engine import Engine

from inspection import locking
from inspection.db import retry
from inspection.db.models import utcnow
from inspection.errors import NodeLocked
from inspection.processing import callbacks
from inspection.processing.callbacks import Claim
from inspection.worker import heartbeat
from pxe_filter.common.database import DatabaseError, error_reason

LOG = logging.getLogger(__name__)

#: Seconds an idle thread sleeps at most without being woken (the housekeeping thread wakes
#: it when work is due; this only bounds the damage of a bug in that).
_IDLE_WAIT = 60.0


class CallbackRunner:
    """Claims and processes stored callbacks with ``threads`` threads."""

    def __init__(self, engine: Engine, service: Any, conf: cfg.ConfigOpts,
                 threads: int) -> None:
        self.engine, self.service = engine, service
        self.host = conf.host
        self.interval = conf.processing.heartbeat_interval
        self.timeout = conf.processing.heartbeat_timeout
        self.max_attempts = conf.processing.max_attempts
        self.threads = threads
        self._cond = threading.Condition()
        self._wakeups = 0  # bumped by every wake(): a thread that saw no work rechecks
        self._stopping = threading.Event()
        self._busy = 0
        self._claims_failing = False
        self._unreleased: list[Claim] = []  # claims to give back once the database answers
        self._workers: list[threading.Thread] = []
        self._housekeepers: list[threading.Thread] = []

    @property
    def busy(self) -> int:
        """Callbacks being processed by this process right now."""
        return self._busy

    def start(self) -> None:
        """Register (taking back this host's work left by a crash), then start the threads;
        :class:`DatabaseError` if the database refuses."""
        try:
            locking.clear_stale(self.engine, self.host)
            heartbeat.register(self.engine, self.host)
        except sa.exc.SQLAlchemyError as exc:
            raise DatabaseError(f"cannot register this process for processing inspection "
                                f"data: {error_reason(exc)}") from None
        self._housekeepers = [
            threading.Thread(target=self._heartbeat, daemon=True, name="callbacks-heartbeat"),
            threading.Thread(target=self._housekeeping, daemon=True, name="callbacks-poll")]
        for thread in self._housekeepers:
            thread.start()
        for i in range(self.threads):
            thread = threading.Thread(target=self._work, daemon=True,
                                      name=f"callbacks-{i}")
            thread.start()
            self._workers.append(thread)
        self.wake(self.threads)  # whatever is already waiting

    def wake(self, count: int = 1) -> None:
        """Tell ``count`` idle threads that callbacks may be waiting."""
        with self._cond:
            self._wakeups += 1
            self._cond.notify(count)

    def stop(self, timeout: float = 30.0) -> None:
        """Let running callbacks finish (up to ``timeout`` s), then leave the process table."""
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        for thread in [*self._workers, *self._housekeepers]:
            thread.join(max(0.0, deadline - time.monotonic()))
        try:
            heartbeat.deregister(self.engine, self.host)
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("Could not leave the process table (%s); other processes take over "
                        "this host's callbacks after [processing]heartbeat_timeout",
                        error_reason(exc))

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no callback is stored or running; False on timeout (for tests)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._busy or callbacks.count(self.engine):
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    # --- threads ---

    def _work(self) -> None:
        while not self._stopping.is_set():
            seen = self._wakeups
            try:
                claim = callbacks.claim_next(self.engine, self.host)
            except sa.exc.SQLAlchemyError as exc:
                with self._cond:
                    if not self._claims_failing:  # once per outage, not once per thread
                        LOG.warning("Cannot claim accepted callbacks: %s; retrying every "
                                    "%s s and at every wake-up", error_reason(exc),
                                    self.interval)
                    self._claims_failing = True
                    if self._wakeups == seen and not self._stopping.is_set():
                        self._cond.wait(self.interval)
                continue
            if self._claims_failing:
                with self._cond:
                    self._claims_failing = False
            if claim is None:
                with self._cond:
                    if self._wakeups == seen and not self._stopping.is_set():
                        self._cond.wait(_IDLE_WAIT)
                continue
            with self._cond:
                self._busy += 1
            try:
                self._run(claim)
            finally:
                with self._cond:
                    self._busy -= 1

    def _run(self, claim: Claim) -> None:
        if claim.attempts > self.max_attempts:
            self._give_up(claim)
            return
        LOG.info("Processing accepted callback %s of node %s (attempt %s)", claim.id,
                 claim.node_uuid, claim.attempts)
        retry_at = utcnow() + timedelta(seconds=self.interval)
        try:
            self.service.process(claim.node_uuid, claim.data, settle=claim.settle)
        except NodeLocked as exc:
            LOG.info("Node %s is reserved by %s: its callback %s is retried in %s s",
                     claim.node_uuid, exc.holder or "another process", claim.id,
                     self.interval)
            self._give_back(claim, retry_at, count_attempt=False)
            return
        except sa.exc.SQLAlchemyError as exc:
            if retry.is_transient(exc):
                # The database's trouble (its retries ran out): no attempt is used up.
                LOG.warning("Database error while processing callback %s of node %s: %s; "
                            "retried in %s s", claim.id, claim.node_uuid, error_reason(exc),
                            self.interval)
                self._give_back(claim, retry_at, count_attempt=False)
            else:
                # Not known to pass: counted, so that max_attempts ends it.
                LOG.error("Database error while processing callback %s of node %s "
                          "(attempt %s of %s): %s; retried in %s s", claim.id,
                          claim.node_uuid, claim.attempts, self.max_attempts,
                          error_reason(exc), self.interval)
                self._give_back(claim, retry_at)
            return
        except Exception:
            LOG.exception("Processing callback %s of node %s failed (attempt %s of %s)",
                          claim.id, claim.node_uuid, claim.attempts, self.max_attempts)
            self._give_back(claim, retry_at)
            return
        if not claim.settled:
            # Nothing was committed (node gone, or its reservation taken by the timeout).
            self._call_db(callbacks.discard, claim)

    def _give_up(self, claim: Claim) -> None:
        message = (f"Processing the inspection data was interrupted {claim.attempts - 1} "
                   f"time(s) (the processing process died or failed each time, "
                   f"[processing]max_attempts = {self.max_attempts}); the data was dropped")
        LOG.error("Callback %s of node %s: %s", claim.id, claim.node_uuid, message)
        try:
            self.service.give_up(claim.node_uuid, message, settle=claim.settle)
        except NodeLocked:
            self._give_back(claim, utcnow() + timedelta(seconds=self.interval),
                            count_attempt=False)
            return
        except sa.exc.SQLAlchemyError as exc:
            if not retry.is_transient(exc):
                LOG.exception("Could not record the failure of node %s", claim.node_uuid)
            else:  # recorded at the next try, not dropped with the data
                LOG.warning("Could not record the failure of node %s: %s; retried in %s s",
                            claim.node_uuid, error_reason(exc), self.interval)
                self._give_back(claim, utcnow() + timedelta(seconds=self.interval),
                                count_attempt=False)
                return
        except Exception:
            LOG.exception("Could not record the failure of node %s", claim.node_uuid)
        if not claim.settled:
            self._call_db(callbacks.discard, claim)

    def _give_back(self, claim: Claim, retry_at, count_attempt: bool = True) -> None:
        try:
            retry.call(callbacks.unclaim, self.engine, claim, retry_at, count_attempt,
                       what=f"giving back callback {claim.id}")
        except sa.exc.SQLAlchemyError:
            with self._cond:
                self._unreleased.append(claim)  # the housekeeping thread retries

    def _call_db(self, func, claim: Claim) -> None:
        try:
            retry.call(func, self.engine, claim, what=f"callback {claim.id}")
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("Callback %s of node %s: %s", claim.id, claim.node_uuid,
                        error_reason(exc))
            self._give_back(claim, None)

    def _heartbeat(self) -> None:
        # A thread of its own: a takeover stuck on a row lock must not delay the heartbeat.
        late = False
        while not self._stopping.wait(self.interval):
            try:
                if not heartbeat.beat(self.engine, self.host):
                    LOG.warning("This process (%s) was judged dead by the others (no "
                                "heartbeat for [processing]heartbeat_timeout = %s s): its "
                                "work was taken over; it registered again", self.host,
                                self.timeout)
            except sa.exc.SQLAlchemyError as exc:
                if not late:
                    LOG.warning("Cannot write the heartbeat of %s: %s; retrying every %s s",
                                self.host, error_reason(exc), self.interval)
                late = True
                continue
            if late:
                LOG.info("The heartbeat of %s is written again", self.host)
                late = False

    def _housekeeping(self) -> None:
        failing = False
        while not self._stopping.wait(self.interval):
            try:
                heartbeat.take_over_dead(self.engine, self.host, self.timeout)
                with self._cond:
                    pending, self._unreleased = self._unreleased, []
                for claim in pending:
                    self._give_back(claim, None)
                due = callbacks.due(self.engine)
            except sa.exc.SQLAlchemyError as exc:
                if not failing:  # the heartbeat thread reports the outage as well
                    LOG.warning("Cannot look for dead processes and due callbacks: %s; "
                                "retrying every %s s", error_reason(exc), self.interval)
                failing = True
                continue
            failing = False
            if due:
                self.wake(due)
