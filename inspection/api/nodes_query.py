"""Finding nodes and ports named in a URL (by UUID or name), inside the caller's session."""

import uuid as uuidlib

import sqlalchemy as sa
from sqlalchemy.orm import Session

from inspection.db.models import Node, NodeInventory, Port
from inspection.errors import NotFound


def is_uuid(value: str) -> bool:
    """True if ``value`` is a UUID in any spelling Python accepts."""
    try:
        uuidlib.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def find_node(session: Session, ident: str, for_update: bool = False) -> Node:
    """The node whose UUID or name is ``ident``; :class:`NotFound` (404) otherwise."""
    if is_uuid(ident):
        column, value = Node.uuid, str(uuidlib.UUID(ident))
    else:
        column, value = Node.name, ident
    query = sa.select(Node).where(column == value)
    if for_update:
        query = query.with_for_update()
    node = session.execute(query).scalar_one_or_none()
    if node is None:
        raise NotFound(f"node {ident[:64]} not found",
                       message=f"Node {ident[:64]} could not be found")
    return node


def find_port(session: Session, ident: str) -> Port:
    """The port with this UUID; :class:`NotFound` otherwise."""
    port = None
    if is_uuid(ident):
        port = session.execute(sa.select(Port).where(
            Port.uuid == str(uuidlib.UUID(ident)))).scalar_one_or_none()
    if port is None:
        raise NotFound(f"port {ident[:64]} not found",
                       message=f"Port {ident[:64]} could not be found")
    return port


def stored_inventory(session: Session, node: Node) -> NodeInventory | None:
    """The inventory row of ``node`` (the newest, should there be several)."""
    return session.execute(sa.select(NodeInventory).where(NodeInventory.node_id == node.id)
                           .order_by(NodeInventory.id.desc()).limit(1)).scalar_one_or_none()


def node_uuids(session: Session, node_ids: set[int]) -> dict[int, str]:
    """``id -> uuid`` for the given node ids."""
    if not node_ids:
        return {}
    rows = session.execute(sa.select(Node.id, Node.uuid).where(Node.id.in_(node_ids)))
    return {row.id: row.uuid for row in rows}
