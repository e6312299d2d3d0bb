"""The one way to change a node, in the spirit of Ironic's TaskManager.

``with reserved_node(engine, owner, node) as task:`` takes the node's reservation, reads the
node again in a fresh session (so every check made in the block sees the state under the
reservation), and on leaving the block re-asserts the reservation in the same transaction
before committing (:func:`inspection.locking.still_held`): a holder judged dead meanwhile
commits nothing. The reservation is then released, and only after the commit are the PXE
filters told what the task recorded with :meth:`NodeTask.announce` and :meth:`NodeTask.deny`,
so a filter that re-reads the database at that moment agrees with the broadcast.

``hold_session=False`` keeps the reservation without a session: the block opens short ones
with :meth:`NodeTask.change`, so no database session is held across BMC or network I/O.
"""

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from inspection import locking
from inspection.db import retry
from inspection.db.engine import session_scope
from inspection.db.idents import node_ident_clause
from inspection.db.models import Node
from inspection.errors import NotFound, ReservationLost
from pxe_filter.broadcast import FilterNotifier, NodePorts
from pxe_filter.common.database import error_reason

LOG = logging.getLogger(__name__)

#: Longest time (seconds) spent retrying a reservation the database failed to take with a
#: transient error (a dropped connection, a failover); a refused one (NodeLocked) is not
#: retried here.
_ACQUIRE_BUDGET = 5.0


def find_node_id(engine: Engine, ident: str) -> int:
    """The id of the node whose UUID or name is ``ident``; :class:`NotFound` otherwise."""
    with engine.connect() as conn:
        node_id = conn.execute(select(Node.id).where(node_ident_clause(ident))).scalar()
    if node_id is None:
        raise NotFound(f"node {ident[:64]} not found",
                       message=f"Node {ident[:64]} could not be found")
    return node_id


class NodeTask:
    """A node held under ``owner``'s reservation, and what to announce once committed."""

    def __init__(self, engine: Engine, owner: str, node_id: int, ident: str) -> None:
        self.engine, self.owner, self.node_id, self.ident = engine, owner, node_id, ident
        self.sessions = sessionmaker(engine, expire_on_commit=False)
        self.session: Session | None = None
        self.node: Node | None = None
        self.held: list[int] = [node_id]
        self.deleted: set[int] = set()
        self.announcements: list[NodePorts] = []
        self.denied: list[str] = []

    def reserve(self, node_id: int) -> Node:
        """Reserve another node this change touches (a port's destination); the node as
        read under that reservation, in the task's session. NodeLocked, NotFound."""
        if node_id not in self.held:
            locking.acquire(self.engine, node_id, self.owner)
            self.held.append(node_id)
        node = self.session.get(Node, node_id, populate_existing=True) if self.session \
            else None
        if node is None:
            raise NotFound(f"node {node_id} vanished", message="The node could not be found")
        return node

    def announce(self, ports: NodePorts) -> None:
        """Tell the PXE filters about these ports once the change is committed."""
        self.announcements.append(ports)

    def deny(self, addresses: Iterable[str]) -> None:
        """Close these MACs in the PXE filters once the change is committed."""
        self.denied.extend(a for a in addresses if a)

    def deleting(self, node_id: int | None = None) -> None:
        """The change deletes this node (default: the task's): nothing to fence or release."""
        self.deleted.add(self.node_id if node_id is None else node_id)

    def fence(self, session: Session) -> None:
        """Re-assert every reservation of the task in ``session`` before it commits."""
        for node_id in self.held:
            if node_id not in self.deleted and \
                    not locking.still_held(session, node_id, self.owner):
                LOG.warning("Node %s: change not committed, its reservation by %s was taken "
                            "away meanwhile (judged dead, or the inspect-wait timeout); the "
                            "client may try again", node_id, self.owner)
                raise ReservationLost(node_id)

    @contextmanager
    def change(self) -> Iterator[Node]:
        """A short session on the node under the reservation, fenced and committed on exit."""
        with session_scope(self.sessions) as session:
            node = session.get(Node, self.node_id)
            if node is None:
                raise NotFound(f"node {self.ident} vanished",
                               message=f"Node {self.ident[:64]} could not be found")
            self.session, self.node = session, node
            try:
                yield node
                self.fence(session)
            finally:
                self.session = None

    def publish(self, notifier: FilterNotifier | None) -> None:
        """Send what the task recorded (after the commit)."""
        if notifier is None:
            return
        if self.denied:
            notifier.update(deny=self.denied)
        for ports in self.announcements:
            notifier.announce(ports)

    def release(self) -> None:
        """Release every reservation of the task (a deleted node's: nothing to release)."""
        for node_id in reversed(self.held):
            if node_id in self.deleted:
                locking.forget(node_id, self.owner)
                continue
            try:
                locking.release(self.engine, node_id, self.owner)  # retries transient errors
            except sa.exc.SQLAlchemyError as exc:
                # Raising would hide what happened (a committed change, or the error that
                # ended the block). The leftover is known to this process, whose
                # housekeeping clears it once the database answers.
                LOG.error("Node %s: its reservation by %s could not be released (%s); this "
                          "process clears it within [processing]heartbeat_interval once the "
                          "database answers", node_id, self.owner, error_reason(exc))


@contextmanager
def reserved_node(engine: Engine, owner: str, node: int | str, *,
                  notifier: FilterNotifier | None = None,
                  hold_session: bool = True) -> Iterator[NodeTask]:
    """Hold ``node`` (id, or UUID or name) under ``owner``'s reservation for the block.

    Raises NotFound, :class:`~inspection.errors.NodeLocked`, or
    :class:`~inspection.errors.ReservationLost` when the commit could not be fenced.
    """
    node_id = node if isinstance(node, int) else find_node_id(engine, node)
    ident = str(node)
    retry.call(locking.acquire, engine, node_id, owner, what=f"reserving node {ident[:64]}",
               budget=_ACQUIRE_BUDGET)
    task = NodeTask(engine, owner, node_id, ident)
    try:
        if hold_session:
            with task.change():
                yield task
        else:
            yield task
    except BaseException:
        task.deleted.clear()  # a delete rolled back: the reservation is still there
        raise
    finally:
        task.release()
    task.publish(notifier)
