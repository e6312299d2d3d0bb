"""Processing accepted callbacks from the database, in a worker or in the API all-in-one.

A few threads claim stored callbacks (:mod:`inspection.processing.callbacks`), process
them, and delete each in the transaction that commits its outcome. They wake when told
(a message-bus wake-up, or the API of the same process) and otherwise sleep; a housekeeping
thread runs a pass of :mod:`inspection.worker.recovery` and wakes the threads whenever
callbacks are due, every ``[processing]heartbeat_interval`` seconds, so a lost wake-up
delays a callback by at most one interval; another thread writes this process's heartbeat
as often.
"""

import logging
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from oslo_config import cfg
from sqlalchemy.engine import Engine

from inspection import process_identity
from inspection.db import retry
from inspection.db.models import utcnow
from inspection.errors import NodeLocked
from inspection.processing import callbacks
from inspection.processing.callbacks import Claim
from inspection.worker import heartbeat, recovery
from pxe_filter.common.database import DatabaseError, error_reason

LOG = logging.getLogger(__name__)

#: Seconds an idle thread sleeps at most without being woken (the housekeeping thread wakes
#: it when work is due; this only bounds the damage of a bug in that).
_IDLE_WAIT = 60.0
#: Heartbeats in a row this process must have written before it judges others dead: after
#: a database outage, the first one only says that this process is back, not that the
#: others had a chance to write theirs.
_FRESH_BEATS = 2


@dataclass(frozen=True)
class _GiveBack:
    """A give-back the database refused, retried by the housekeeping thread as it was."""

    claim: Claim
    retry_at: datetime | None
    count_attempt: bool


class CallbackRunner:
    """Claims and processes stored callbacks with ``threads`` threads."""

    def __init__(self, engine: Engine, service: Any, conf: cfg.ConfigOpts,
                 threads: int) -> None:
        self.engine, self.service = engine, service
        self.host = process_identity.of(conf)  # this process, not just its machine
        self.interval = conf.processing.heartbeat_interval
        self.timeout = conf.processing.heartbeat_timeout
        self.max_attempts = conf.processing.max_attempts
        self.inspect_wait_timeout = conf.inspector.inspect_wait_timeout
        self.threads = threads
        self._cond = threading.Condition()
        self._wakeups = 0  # bumped by every wake(): a thread that saw no work rechecks
        self._stopping = threading.Event()
        self._busy = 0
        self._claims_failing = False
        self._unreleased: list[_GiveBack] = []  # to retry once the database answers
        # Tokens of the claims this process is taking or processing: a claim of this host
        # under any other token is a leftover (recovery.own_leftovers).
        self._tokens: set[str] = set()
        self._claims_lock = threading.Lock()
        self._good_beats = 0  # heartbeats written in a row
        self._late = False
        self._workers: list[threading.Thread] = []
        self._housekeepers: list[threading.Thread] = []

    def start(self) -> None:
        """Register (taking back this host's work left by a crash), then start the threads;
        :class:`DatabaseError` if the database refuses."""
        try:
            recovery.at_start(self.engine, self.host)
            self._good_beats = 1
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
            recovery.at_stop(self.engine, self.host)
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
            token = str(uuid.uuid4())
            with self._claims_lock:
                self._tokens.add(token)
            try:
                claim = callbacks.claim_next(self.engine, self.host, token=token)
            except sa.exc.SQLAlchemyError as exc:
                self._forget(token)  # if its commit went through after all: a leftover
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
                self._forget(token)
                with self._cond:
                    if self._wakeups == seen and not self._stopping.is_set():
                        self._cond.wait(_IDLE_WAIT)
                continue
            with self._cond:
                self._busy += 1
            try:
                self._run(claim)
            finally:
                self._forget(token)
                with self._cond:
                    self._busy -= 1

    def _forget(self, token: str) -> None:
        with self._claims_lock:
            self._tokens.discard(token)

    def _run(self, claim: Claim) -> None:
        if claim.attempts > self.max_attempts:
            self._give_up(claim)
            return
        LOG.info("Processing accepted callback %s of node %s (attempt %s)", claim.id,
                 claim.node_uuid, claim.attempts)
        retry_at = utcnow() + timedelta(seconds=self.interval)
        try:
            self.service.process(claim.node_uuid, claim.data, settle=claim.settle,
                                 attempt=claim.attempt)
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
            self.service.give_up(claim.node_uuid, message, settle=claim.settle,
                                 attempt=claim.attempt)
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

    def _give_back(self, claim: Claim, retry_at: datetime | None,
                   count_attempt: bool = True) -> None:
        try:
            retry.call(callbacks.unclaim, self.engine, claim, retry_at, count_attempt,
                       what=f"giving back callback {claim.id}")
        except sa.exc.SQLAlchemyError:
            # The housekeeping thread retries it as it was; its token stays known meanwhile.
            with self._claims_lock:
                self._unreleased.append(_GiveBack(claim, retry_at, count_attempt))

    def _call_db(self, func, claim: Claim) -> None:
        try:
            retry.call(func, self.engine, claim, what=f"callback {claim.id}")
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("Callback %s of node %s: %s", claim.id, claim.node_uuid,
                        error_reason(exc))
            self._give_back(claim, None, count_attempt=False)

    def _heartbeat(self) -> None:
        # A thread of its own: a takeover stuck on a row lock must not delay the heartbeat.
        while not self._stopping.wait(self.interval):
            self.beat()

    def beat(self) -> bool:
        """Write this process's heartbeat; False if the database refused."""
        try:
            # A previous heartbeat older than two intervals: this process (or the database)
            # was away, and so may the others have been; the count starts again. (+1 s:
            # MariaDB stores the heartbeat to the second.)
            steady = heartbeat.is_fresh(self.engine, self.host, 2 * self.interval + 1)
            written = heartbeat.beat(self.engine, self.host)
        except sa.exc.SQLAlchemyError as exc:
            if not self._late:  # once per outage
                LOG.warning("Cannot write the heartbeat of %s: %s; retrying every %s s",
                            self.host, error_reason(exc), self.interval)
            self._good_beats, self._late = 0, True
            return False
        self._good_beats = self._good_beats + 1 if written and steady else 1
        if not written:
            LOG.warning("This process (%s) was judged dead by the others (no heartbeat for "
                        "[processing]heartbeat_timeout = %s s): its work was taken over; it "
                        "registered again", self.host, self.timeout)
        if self._late:
            LOG.info("The heartbeat of %s is written again", self.host)
            self._late = False
        return True

    def _housekeeping(self) -> None:
        failing = False
        while not self._stopping.wait(self.interval):
            try:
                due = self.housekeep()
            except sa.exc.SQLAlchemyError as exc:
                if not failing:  # the heartbeat thread reports the outage as well
                    LOG.warning("Cannot look for dead processes and due callbacks: %s; "
                                "retrying every %s s", error_reason(exc), self.interval)
                failing = True
                continue
            failing = False
            if due:
                self.wake(due)

    def housekeep(self, now: datetime | None = None) -> int:
        """One recovery pass: retry refused give-backs, repair this process's leftovers,
        then (heartbeat fresh) take over dead processes; returns the callbacks due."""
        with self._claims_lock:
            pending, self._unreleased = self._unreleased, []
        for item in pending:
            self._give_back(item.claim, item.retry_at, item.count_attempt)
        with self._claims_lock:
            # Under the lock: a claim taken meanwhile is known before it commits.
            known = self._tokens | {item.claim.token for item in self._unreleased}
            recovery.own_leftovers(self.engine, self.host, known)
        if self._good_beats >= _FRESH_BEATS:
            recovery.take_over_dead(self.engine, self.host, self.timeout)
        recovery.release_unregistered(self.engine, self.inspect_wait_timeout, now)
        return callbacks.due(self.engine)
