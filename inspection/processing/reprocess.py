"""Reprocessing: the hooks and rules run again on a node's stored inventory.

As ironic-inspector's "reapply": no boot, no power action, no PXE allow. The node must be
``manageable`` (or ``enroll`` after auto-discovery) and stays in its state. The run takes
the node's reservation and commits everything or nothing, exactly as processing a callback
does (:meth:`InspectionService.process`); a failed run changes nothing, not even
``last_error``, and its message is returned to the caller.
"""

import logging
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from inspection import locking, states
from inspection.common.untrusted import for_log
from inspection.db.models import MANAGEABLE, Node, NodeInventory
from inspection.errors import BadRequest, InvalidState, NotFound
from inspection.inspect_control import node_ports
from inspection.processing.pipeline import StageFailed
from inspection.processing.service import InspectionService
from inspection.rules import OrmNode, changes

LOG = logging.getLogger(__name__)


class ReprocessFailed(BadRequest):
    """A hook or rule refused the stored data; nothing was changed."""


class NoStoredInventory(InvalidState):
    """The node has no stored inventory to reprocess (409)."""


@dataclass
class Reprocessed:
    """The outcome: the node's state (unchanged) and what changed, secrets masked."""

    node_uuid: str
    provision_state: str | None
    changes: list[dict[str, Any]] = field(default_factory=list)


def reprocessable(node: Node) -> bool:
    """``manageable``, or ``enroll`` for a node that auto-discovery enrolled."""
    return node.provision_state == MANAGEABLE or states.stays_enrolled(node)


def reprocess(service: InspectionService, node_id: int) -> Reprocessed:
    """Run the hooks and rules on the node's stored data under its reservation.

    Raises :class:`InvalidState` (409: wrong state, or :class:`NoStoredInventory`),
    :class:`~inspection.errors.NodeLocked`, :class:`ReprocessFailed` (400) or
    :class:`~inspection.errors.NotFound`.
    """
    result = service._under_reservation(node_id, _run, service)
    if result is None:
        raise NotFound(f"node {node_id} was deleted", message="The node was just deleted")
    outcome, ports = result
    service.notifier.announce(ports)  # never an allow: the node is not being inspected
    return outcome


def _run(session: Session, node: Node, service: InspectionService) -> Any:
    if not reprocessable(node):
        raise InvalidState(f"Node {node.uuid} is in state {node.provision_state!r}: only "
                           f"manageable nodes (or enroll, after auto-discovery) are "
                           f"reprocessed")
    stored = session.scalars(sa.select(NodeInventory).where(NodeInventory.node_id == node.id)
                             .order_by(NodeInventory.id.desc()).limit(1)).first()
    if stored is None or not isinstance(stored.inventory_data, dict) \
            or not stored.inventory_data:
        raise NoStoredInventory(f"Node {node.uuid} has no stored inventory to reprocess: "
                                f"inspect it first")
    inventory = dict(stored.inventory_data)
    plugin_data = dict(stored.plugin_data or {})
    node_id, node_uuid = node.id, node.uuid
    before = changes.view(OrmNode(session, node))
    rules = service.rules.by_phase(session)
    try:
        service.pipeline.run(session, node, inventory, plugin_data, rules, move_on=False)
    except StageFailed as exc:
        session.rollback()
        LOG.warning("Reprocessing node %s failed; nothing was changed: %s", node_uuid,
                    for_log(str(exc)))
        raise ReprocessFailed(f"Reprocessing node {node_uuid} failed, nothing was changed: "
                              f"{exc}") from None
    after = changes.view(OrmNode(session, node))
    ports = node_ports(session, node)
    if not locking.still_held(session, node_id, service.owner):
        session.rollback()
        raise InvalidState(f"Node {node_uuid}: its reservation was taken away while it was "
                           f"reprocessed; nothing was changed")
    session.commit()
    diff = changes.diff(before, after)
    LOG.info("Node %s reprocessed from its stored inventory: %d change(s); state %s kept",
             node_uuid, len(diff), node.provision_state)
    return Reprocessed(node_uuid, node.provision_state, diff), ports
