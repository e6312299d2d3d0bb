"""Starting and aborting in-band inspection of a node.

Starting: resolve the node's BMC addresses into the lookup cache, move it to ``inspect wait``
and open the PXE filters for its MACs. Aborting: ``inspect failed``, cache cleared, filters
closed. Both run under the node's reservation and broadcast only after committing, so a
filter that re-syncs from the database at that moment agrees with the broadcast.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from oslo_config import cfg
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.attributes import set_committed_value

from inspection import attempts, bmc, locking, states
from inspection.common.untrusted import last_error_text
from inspection.db.engine import session_scope
from inspection.db.idents import node_ident_clause
from inspection.db.models import (
    Node,
    Port,
    utcnow,
)
from inspection.errors import NotFound
from pxe_filter.broadcast import FilterNotifier, NodePorts

LOG = logging.getLogger(__name__)

#: States from which inspection may start (Ironic's "inspect" transition).
ABORTED_MESSAGE = "Inspection was aborted by request."


def find_node_id(engine: Engine, ident: str) -> int:
    """The id of the node whose UUID or name is ``ident``; :class:`NotFound` otherwise."""
    with engine.connect() as conn:
        node_id = conn.execute(select(Node.id).where(node_ident_clause(ident))).scalar()
    if node_id is None:
        raise NotFound(f"node {ident} not found", message=f"Node {ident} could not be found")
    return node_id


@contextmanager
def _reserved_node(engine: Engine, conf: cfg.ConfigOpts,
                   ident: str) -> Iterator[tuple[Session, Node]]:
    """The node by UUID or name, reserved by this host, in a session that commits on exit."""
    node_id = find_node_id(engine, ident)
    with (locking.reserved(engine, node_id, conf.host),
          session_scope(sessionmaker(engine, expire_on_commit=False)) as session):
        node = session.get(Node, node_id)
        if node is None:
            raise NotFound(f"node {ident} vanished", message=f"Node {ident} could not "
                                                             f"be found")
        yield session, node


def node_ports(session: Session, node: Node) -> NodePorts:
    """The node's state and its ports' MACs, for the PXE filters' policy."""
    addresses = sorted(a for a in session.scalars(select(Port.address)
                                                  .where(Port.node_id == node.id)) if a)
    return NodePorts(node.provision_state, node.inspect_interface, tuple(addresses))


def start_inspection(engine: Engine, conf: cfg.ConfigOpts, ident: str,
                     notifier: FilterNotifier, resolver: bmc.Resolver = bmc.system_resolver
                     ) -> Node:
    """Put the node in ``inspect wait`` ready for the ramdisk's data; returns it (detached).

    Raises :class:`NotFound`, :class:`~inspection.errors.NodeLocked` or
    :class:`~inspection.states.TransitionRefused` (not ``manageable`` nor ``inspect failed``).
    """
    with _reserved_node(engine, conf, ident) as (session, node):
        states.apply(node, states.INSPECT)
        addresses = bmc.bmc_addresses(node.driver_info, resolver)
        if not addresses:
            LOG.info("Node %s has no usable BMC address: the ramdisk can only find it "
                     "by MAC or UUID", node.uuid)
        node.driver_internal_info = {**(node.driver_internal_info or {}),
                                     bmc.CACHE_KEY: addresses}
        attempts.begin(node)
        # Data accepted for an earlier inspection must never complete this one.
        attempts.discard_callbacks(session, node.uuid)
        node.inspection_started_at = utcnow()
        node.inspection_finished_at = None
        node.last_error = None
        ports = node_ports(session, node)
    set_committed_value(node, "reservation", None)  # released on leaving the block
    LOG.info("Inspection of node %s started; BMC addresses for lookup: %s", node.uuid,
             ", ".join(addresses) or "none")
    notifier.announce(ports)
    return node


def fail_inspection(session: Session, node: Node, message: str) -> NodePorts:
    """Move ``node`` to ``inspect failed`` (a discovered node stays ``enroll``) with
    ``message`` (uncommitted); returns its ports.

    The caller holds the reservation, commits, then announces the ports to the filters.
    ``message`` may quote the ramdisk: it is made storable (no NUL, bounded) first.
    """
    states.fail(node)
    return _record_failure(session, node, message)


def _record_failure(session: Session, node: Node, message: str) -> NodePorts:
    """What failing and aborting share: lookup cache cleared, ``last_error`` stored."""
    info = dict(node.driver_internal_info or {})
    info.pop(bmc.CACHE_KEY, None)
    node.driver_internal_info = info
    node.last_error = last_error_text(message)
    node.inspection_finished_at = None
    return node_ports(session, node)


def abort_inspection(engine: Engine, conf: cfg.ConfigOpts, ident: str,
                     notifier: FilterNotifier) -> Node:
    """Abort a node's inspection (``inspect wait`` -> ``inspect failed``); returns it."""
    with _reserved_node(engine, conf, ident) as (session, node):
        states.apply(node, states.ABORT)
        attempts.discard_callbacks(session, node.uuid)
        ports = _record_failure(session, node, ABORTED_MESSAGE)
    set_committed_value(node, "reservation", None)
    LOG.info("Inspection of node %s aborted", node.uuid)
    notifier.announce(ports)
    return node
