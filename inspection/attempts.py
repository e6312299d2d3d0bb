"""Inspection attempts: accepted data belongs to the inspection that was waiting for it.

Each ``inspect`` gives the node a new attempt id (in ``driver_internal_info``, which Ironic's
schema already has); a callback row stores the attempt it was accepted for. Abort, a new
inspect, a timeout and a node delete discard the node's rows in their own transaction, and
processing skips a row whose attempt is not the node's current one (stored after an abort
and a new inspect raced it), so data from an earlier inspection never completes a later one.
"""

import uuid

import sqlalchemy as sa
from sqlalchemy.orm import Session

from inspection.db.models import InspectionCallback, Node

#: driver_internal_info key of the node's current inspection attempt.
KEY = "inspection_attempt"


def begin(node: Node) -> str:
    """Give ``node`` a new attempt (in its session, not committed); returns it."""
    attempt = str(uuid.uuid4())
    node.driver_internal_info = {**(node.driver_internal_info or {}), KEY: attempt}
    return attempt


def current(node: Node) -> str | None:
    """The node's current attempt (None for a node never inspected by this service)."""
    value = (node.driver_internal_info or {}).get(KEY)
    return value if isinstance(value, str) else None


def is_current(node: Node, attempt: str | None) -> bool:
    """Whether data accepted for ``attempt`` belongs to the node's current inspection.

    No attempt is no wildcard: it matches only a node that has none either (a node
    discovered from this very data, or put in ``inspect wait`` by another tool).
    """
    return attempt == current(node)


def discard_callbacks(session: Session, node_uuid: str) -> int:
    """Delete the node's accepted callbacks in ``session``'s transaction; returns how many."""
    return session.execute(sa.delete(InspectionCallback)
                           .where(InspectionCallback.node_uuid == node_uuid)).rowcount
