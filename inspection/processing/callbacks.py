"""Accepted inspection callbacks: a row is committed before the API answers 202, claimed by
one process at a time, and deleted in the transaction that commits its processing.

A node has at most one row: newer data replaces older (Ironic's last write wins; the unique
index on ``node_uuid`` holds it against concurrent stores). Each row carries the inspection
attempt it was accepted for (:mod:`inspection.attempts`).

A claim is a conditional UPDATE (``owner IS NULL`` -> this host, a fresh token), so two
processes never hold one row; deleting the row is conditional on the token, so a process
whose claim was taken away (judged dead, see :mod:`inspection.worker.heartbeat`) cannot
commit its results. Plain UPDATEs work the same on SQLite, PostgreSQL and MariaDB.
"""

import json
import logging
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inspection import metrics
from inspection.db.models import InspectionCallback, utcnow
from inspection.db.vacuum import Vacuum
from inspection.errors import Overloaded

LOG = logging.getLogger(__name__)

_rows = InspectionCallback.__table__
#: Candidates read per claim attempt; trying them in random order keeps processes that claim
#: at the same moment from all racing for the oldest row.
_CANDIDATES = 16


@dataclass
class Claim:
    """A callback held by this process: what to process, and the token that proves it."""

    id: int
    node_uuid: str
    data: dict = field(repr=False)
    token: str
    attempts: int
    #: The node's inspection attempt the data was accepted for (None: any).
    attempt: str | None = None
    settled: bool = False

    def settle(self, session: Session) -> bool:
        """Delete the row in ``session``'s transaction; False if the claim was taken away
        (the caller must roll back: another process owns this callback now).

        ``settled`` turns True once that transaction commits: a run that is rolled back
        and tried again (a transient database error) must not count as settled.
        """
        deleted = session.execute(sa.delete(_rows).where(
            _rows.c.id == self.id, _rows.c.claim == self.token)).rowcount == 1
        if deleted:
            sa.event.listen(session, "after_commit", self._committed, once=True)
        return deleted

    def _committed(self, _session: Session) -> None:
        self.settled = True


#: Every payload stored dies (replaced, or deleted once processed): on PostgreSQL the table is
#: vacuumed every so many bytes stored, so that a replacement flood reuses its space.
CALLBACK_VACUUM = Vacuum(InspectionCallback.__tablename__, 32 * 2**20)
#: Stores of one node racing each other: after a lost race the winner's row is replaced.
_STORE_TRIES = 5

#: Seconds between two log lines about refusals for lack of room (one per refusal would let
#: an attacker fill the disk with the log instead).
_LOG_EVERY = 60.0


def data_size(data: dict) -> int:
    """Bytes ``data`` takes stored (its JSON text, ASCII)."""
    return len(json.dumps(data))


class PendingCap:
    """``[processing]max_pending_callbacks`` and ``max_pending_bytes``: accepted callbacks
    not processed yet, beyond which new ones are refused (503) before anything is stored."""

    def __init__(self, max_rows: int, max_bytes: int) -> None:
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._logged_at = -_LOG_EVERY
        self._unlogged = 0

    def check(self, engine: Engine, size: int) -> None:
        """Raise :class:`Overloaded` if a callback of ``size`` bytes would go over a cap.

        Processes accepting at the same moment may each pass: the caps bound the total to
        within one callback per concurrent request, which is what they are for.
        """
        with engine.connect() as conn:
            rows, stored = conn.execute(sa.select(
                sa.func.count(), sa.func.coalesce(sa.func.sum(_rows.c.data_size), 0))).one()
        if rows + 1 <= self.max_rows and stored + size <= self.max_bytes:
            return
        reason = "rows" if rows + 1 > self.max_rows else "bytes"
        metrics.CALLBACK_REFUSALS.labels(reason=f"pending_{reason}").inc()
        self._log(rows, stored, reason)
        raise Overloaded("Too much inspection data is waiting to be processed; try again "
                         "later", retry_after=60)

    def _log(self, rows: int, stored: int, reason: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._unlogged += 1
            if now - self._logged_at < _LOG_EVERY:
                return
            refused, self._unlogged, self._logged_at = self._unlogged, 0, now
        option = "max_pending_callbacks" if reason == "rows" else "max_pending_bytes"
        LOG.warning("Refused %d ramdisk callback(s) in the last %d s: %d accepted callbacks "
                    "(%d bytes) wait to be processed, at [processing]%s = %d. Check that "
                    "ironic-inspection-worker runs and keeps up (metric "
                    "ironic_inspection_processing_backlog); raise the limit only if the "
                    "database has room", refused, int(_LOG_EVERY), rows, stored, option,
                    getattr(self, f"max_{reason}"))


def store(engine: Engine, node_uuid: str, data: dict, attempt: str | None = None) -> int:
    """Commit accepted data for the node's inspection ``attempt``, replacing any data of
    the node not processed yet (a run of it in progress then cannot commit); returns the
    row id."""
    values = {"data": data, "created_at": utcnow(), "attempts": 0, "attempt": attempt,
              "owner": None, "claim": None, "retry_at": None, "data_size": data_size(data)}
    for tries_left in reversed(range(_STORE_TRIES)):
        try:
            with engine.begin() as conn:
                # Read first, then write by primary key: a write by a missing node_uuid
                # would take gap locks on MariaDB that deadlock concurrent inserts.
                row_id = conn.execute(sa.select(_rows.c.id).where(
                    _rows.c.node_uuid == node_uuid)).scalar()
                replaced = row_id is not None and conn.execute(
                    sa.update(_rows).where(_rows.c.id == row_id).values(**values)
                ).rowcount == 1
                if not replaced:
                    row_id = conn.execute(sa.insert(_rows).values(
                        node_uuid=node_uuid, **values)).inserted_primary_key[0]
            break
        except sa.exc.IntegrityError:
            if not tries_left:  # another store of this node committed first: replace it
                raise
    CALLBACK_VACUUM.written(engine, values["data_size"])
    if replaced:
        LOG.info("Node %s: newer inspection data replaced the data accepted earlier and not "
                 "processed yet", node_uuid)
    return row_id


def claim_next(engine: Engine, host: str, now: datetime | None = None,
               token: str | None = None) -> Claim | None:
    """Claim the oldest unowned callback that is due; None if there is none.

    ``token``: the claim token to use, known to the caller before the claim commits (so a
    claim whose commit fails after all is recognised as nobody's, see :func:`release_unknown`).
    """
    now = now or utcnow()
    token = token or str(uuid.uuid4())
    with engine.connect() as conn:
        ids = conn.execute(
            sa.select(_rows.c.id)
            .where(_rows.c.owner.is_(None),
                   sa.or_(_rows.c.retry_at.is_(None), _rows.c.retry_at <= now))
            .order_by(_rows.c.id).limit(_CANDIDATES)).scalars().all()
    random.shuffle(ids)
    for row_id in ids:
        with engine.begin() as conn:
            won = conn.execute(
                sa.update(_rows).where(_rows.c.id == row_id, _rows.c.owner.is_(None))
                .values(owner=host, claim=token, retry_at=None,
                        attempts=_rows.c.attempts + 1)).rowcount == 1
            if not won:
                continue  # another process was quicker (or it is done): the next one
            row = conn.execute(sa.select(_rows.c.node_uuid, _rows.c.data, _rows.c.attempts,
                                         _rows.c.attempt)
                               .where(_rows.c.id == row_id)).one()
        return Claim(row_id, row.node_uuid, row.data, token, row.attempts, row.attempt)
    return None


def unclaim(engine: Engine, claim: Claim, retry_at: datetime | None = None,
            count_attempt: bool = True) -> bool:
    """Give the callback back (to be claimed again from ``retry_at``); False if the claim
    was already taken away. ``count_attempt=False`` when it never really ran."""
    values: dict = {"owner": None, "claim": None, "retry_at": retry_at}
    if not count_attempt:
        values["attempts"] = _uncounted()
    with engine.begin() as conn:
        return conn.execute(sa.update(_rows).where(_rows.c.id == claim.id,
                                                   _rows.c.claim == claim.token)
                            .values(**values)).rowcount == 1


def discard(engine: Engine, claim: Claim) -> bool:
    """Delete a claimed callback that needs no processing; False if the claim was lost."""
    with engine.begin() as conn:
        return conn.execute(sa.delete(_rows).where(
            _rows.c.id == claim.id, _rows.c.claim == claim.token)).rowcount == 1


def release_owner(engine: Engine, owner: str) -> int:
    """Give back every callback claimed by ``owner`` (dead, or this host after a crash)."""
    with engine.begin() as conn:
        return conn.execute(sa.update(_rows).where(_rows.c.owner == owner)
                            .values(owner=None, claim=None)).rowcount


def release_unknown(engine: Engine, owner: str, known: set[str]) -> int:
    """Give back the callbacks claimed by ``owner`` under a token not in ``known`` (a claim
    whose commit failed after all): they never ran, so their attempt does not count."""
    query = sa.update(_rows).where(_rows.c.owner == owner)
    if known:
        query = query.where(sa.or_(_rows.c.claim.is_(None), _rows.c.claim.not_in(known)))
    with engine.begin() as conn:
        return conn.execute(query.values(owner=None, claim=None,
                                         attempts=_uncounted())).rowcount


def _uncounted():
    return sa.case((_rows.c.attempts > 0, _rows.c.attempts - 1), else_=0)


def due(engine: Engine, now: datetime | None = None) -> int:
    """Unowned callbacks that may be claimed now."""
    now = now or utcnow()
    with engine.connect() as conn:
        return conn.execute(
            sa.select(sa.func.count()).select_from(_rows)
            .where(_rows.c.owner.is_(None),
                   sa.or_(_rows.c.retry_at.is_(None), _rows.c.retry_at <= now))).scalar()


def count(engine: Engine) -> int:
    """Accepted callbacks not finished yet (claimed or not)."""
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(_rows)).scalar()
