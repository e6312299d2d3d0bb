"""Accepted inspection callbacks: a row is committed before the API answers 202, claimed by
one process at a time, and deleted in the transaction that commits its processing.

A claim is a conditional UPDATE (``owner IS NULL`` -> this host, a fresh token), so two
processes never hold one row; deleting the row is conditional on the token, so a process
whose claim was taken away (judged dead, see :mod:`inspection.worker.heartbeat`) cannot
commit its results. Plain UPDATEs work the same on SQLite, PostgreSQL and MariaDB.
"""

import logging
import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inspection.db.models import InspectionCallback, utcnow

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


def store(engine: Engine, node_uuid: str, data: dict) -> int:
    """Commit accepted data for the node; returns the row id."""
    with engine.begin() as conn:
        return conn.execute(sa.insert(_rows).values(
            node_uuid=node_uuid, data=data, created_at=utcnow(),
            attempts=0)).inserted_primary_key[0]


def claim_next(engine: Engine, host: str, now: datetime | None = None) -> Claim | None:
    """Claim the oldest unowned callback that is due; None if there is none."""
    now = now or utcnow()
    with engine.connect() as conn:
        ids = conn.execute(
            sa.select(_rows.c.id)
            .where(_rows.c.owner.is_(None),
                   sa.or_(_rows.c.retry_at.is_(None), _rows.c.retry_at <= now))
            .order_by(_rows.c.id).limit(_CANDIDATES)).scalars().all()
    random.shuffle(ids)
    for row_id in ids:
        token = str(uuid.uuid4())
        with engine.begin() as conn:
            won = conn.execute(
                sa.update(_rows).where(_rows.c.id == row_id, _rows.c.owner.is_(None))
                .values(owner=host, claim=token, claimed_at=now, retry_at=None,
                        attempts=_rows.c.attempts + 1)).rowcount == 1
            if not won:
                continue  # another process was quicker (or it is done): the next one
            row = conn.execute(sa.select(_rows.c.node_uuid, _rows.c.data, _rows.c.attempts)
                               .where(_rows.c.id == row_id)).one()
        return Claim(row_id, row.node_uuid, row.data, token, row.attempts)
    return None


def unclaim(engine: Engine, claim: Claim, retry_at: datetime | None = None,
            count_attempt: bool = True) -> bool:
    """Give the callback back (to be claimed again from ``retry_at``); False if the claim
    was already taken away. ``count_attempt=False`` when it never really ran."""
    values: dict = {"owner": None, "claim": None, "retry_at": retry_at}
    if not count_attempt:
        values["attempts"] = _rows.c.attempts - 1
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
