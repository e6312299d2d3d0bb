"""Starting and aborting in-band inspection of a node.

Starting: resolve the node's BMC addresses into the lookup cache, move it to ``inspect wait``
and open the PXE filters for its MACs. Aborting: ``inspect failed``, cache cleared, filters
closed. Both run under the node's reservation and broadcast only after committing, so a
filter that re-syncs from the database at that moment agrees with the broadcast.
"""

import logging

from oslo_config import cfg
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from inspection import attempts, bmc, process_identity, states
from inspection.common.untrusted import last_error_text
from inspection.db.models import (
    Node,
    Port,
    utcnow,
)
from inspection.power import tasks as power_tasks
from inspection.reservation import reserved_node
from pxe_filter.broadcast import FilterNotifier, NodePorts

LOG = logging.getLogger(__name__)

#: States from which inspection may start (Ironic's "inspect" transition).
ABORTED_MESSAGE = "Inspection was aborted by request."


def node_ports(session: Session, node: Node) -> NodePorts:
    """The node's state and its ports' MACs, for the PXE filters' policy."""
    addresses = sorted(a for a in session.scalars(select(Port.address)
                                                  .where(Port.node_id == node.id)) if a)
    return NodePorts(node.provision_state, node.inspect_interface, tuple(addresses))


def start_inspection(engine: Engine, conf: cfg.ConfigOpts, ident: str,
                     notifier: FilterNotifier, resolver: bmc.Resolver = bmc.system_resolver
                     ) -> Node:
    """Put the node in ``inspect wait`` ready for the ramdisk's data; returns it (detached).

    A node whose BMC this service drives goes to ``inspecting`` instead, until the BMC
    actor has booted it from the network. Raises :class:`NotFound`,
    :class:`~inspection.errors.NodeLocked` or :class:`~inspection.states.TransitionRefused`
    (not ``manageable`` nor ``inspect failed``).
    """
    with reserved_node(engine, process_identity.of(conf), ident, notifier=notifier) as task:
        session, node = task.session, task.node
        if not states.allowed(node.provision_state, states.INSPECT):
            raise states.TransitionRefused(states.INSPECT, node.uuid, node.provision_state)
        managed = power_tasks.start_inspection(node, conf)
        states.apply(node, states.BOOT if managed else states.INSPECT)
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
        task.announce(node_ports(session, node))
    set_committed_value(node, "reservation", None)  # released on leaving the block
    LOG.info("Inspection of node %s started; BMC addresses for lookup: %s", node.uuid,
             ", ".join(addresses) or "none")
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
    power_tasks.end_inspection(node)
    node.last_error = last_error_text(message)
    node.inspection_finished_at = None
    return node_ports(session, node)


def abort_inspection(engine: Engine, conf: cfg.ConfigOpts, ident: str,
                     notifier: FilterNotifier) -> Node:
    """Abort a node's inspection (``inspect wait`` -> ``inspect failed``); returns it."""
    with reserved_node(engine, process_identity.of(conf), ident, notifier=notifier) as task:
        node = task.node
        states.apply(node, states.ABORT)
        attempts.discard_callbacks(task.session, node.uuid)
        task.announce(_record_failure(task.session, node, ABORTED_MESSAGE))
    set_committed_value(node, "reservation", None)
    LOG.info("Inspection of node %s aborted", node.uuid)
    return node
