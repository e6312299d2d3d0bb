"""Finding nodes and ports named in a URL (by UUID or name), inside the caller's session."""

import re

import sqlalchemy as sa
from sqlalchemy.orm import Session

from inspection.api.errors import ApiError
from inspection.api.versions import allows, strips_json_suffix
from inspection.db.idents import canonical_uuid, is_uuid, node_ident_clause
from inspection.db.models import Chassis, Node, NodeInventory, NodeTrait, Port
from inspection.errors import NotFound

#: Ironic's logical names (RFC 3986 unreserved characters), which identify ports from 1.88.
LOGICAL_NAME = re.compile(r"[A-Za-z0-9._~-]{1,255}")
#: The version at which Ironic lets a node be named by its name.
NAMES_MINOR = 5


def without_json_suffix(ident: str) -> str | None:
    """``ident`` without ``.json`` when the request may name a node so (Ironic serves
    ``/v1/nodes/<node>.json`` when the request names a version up to 1.90), else None."""
    if ident.endswith(".json") and strips_json_suffix():
        return ident[:-len(".json")]
    return None


def check_node_ident(ident: str) -> None:
    """:class:`NotFound` for a node named by anything but its UUID below 1.5, where Ironic
    has no node names (``<uuid>.json`` is its UUID where the suffix is stripped)."""
    if allows(NAMES_MINOR) or is_uuid(without_json_suffix(ident) or ident):
        return
    raise NotFound(f"node {ident[:64]} not found",
                   message=f"Node {ident[:64]} could not be found")


def find_node(session: Session, ident: str, for_update: bool = False) -> Node:
    """The node whose UUID or name is ``ident``; :class:`NotFound` (404) otherwise."""
    check_node_ident(ident)
    query = sa.select(Node).where(node_ident_clause(ident))
    if for_update:
        query = query.with_for_update()
    node = session.execute(query).scalar_one_or_none()
    stripped = without_json_suffix(ident) if node is None else None
    if stripped:
        return find_node(session, stripped, for_update)
    if node is None:
        raise NotFound(f"node {ident[:64]} not found",
                       message=f"Node {ident[:64]} could not be found")
    return node


def find_port(session: Session, ident: str) -> Port:
    """The port with this UUID; :class:`NotFound` otherwise, 400 (as Ironic) when
    ``ident`` can be neither a UUID nor a name (a MAC address, say)."""
    port = None
    uuid = canonical_uuid(ident)
    if uuid is None and not LOGICAL_NAME.fullmatch(ident):
        raise ApiError(400, f"Expected a logical name or UUID but received {ident[:64]}")
    if uuid is not None:
        port = session.execute(sa.select(Port).where(Port.uuid == uuid)).scalar_one_or_none()
    if port is None:
        raise NotFound(f"port {ident[:64]} not found",
                       message=f"Port {ident[:64]} could not be found")
    return port


def chassis_id(session: Session, uuid: str | None) -> int | None:
    """The id of the chassis a node names (None for none); 400 for an unknown chassis, as
    Ironic answers on a node request."""
    if not uuid:
        return None
    row = session.execute(sa.select(Chassis.id).where(
        Chassis.uuid == canonical_uuid(uuid))).scalar_one_or_none()
    if row is None:
        raise ApiError(400, f"Chassis {str(uuid)[:64]} could not be found.")
    return row


def stored_inventory(session: Session, node: Node) -> NodeInventory | None:
    """The inventory row of ``node`` (the newest, should there be several)."""
    return session.execute(sa.select(NodeInventory).where(NodeInventory.node_id == node.id)
                           .order_by(NodeInventory.id.desc()).limit(1)).scalar_one_or_none()


def node_uuids(session: Session, node_ids: set[int]) -> dict[int, str]:
    """``id -> uuid`` for the given node ids."""
    ids, uuids = sorted(node_ids), {}
    for start in range(0, len(ids), 1000):  # a page may be longer than one IN list takes
        rows = session.execute(sa.select(Node.id, Node.uuid)
                               .where(Node.id.in_(ids[start:start + 1000])))
        uuids.update((row.id, row.uuid) for row in rows)
    return uuids


def node_traits(session: Session, node_ids: set[int]) -> dict[int, list[str]]:
    """``id -> traits`` for the given node ids (one query per 1000 nodes)."""
    traits: dict[int, list[str]] = {node_id: [] for node_id in node_ids}
    ids = sorted(node_ids)
    # In chunks: [api]max_limit may exceed what a backend takes in one IN list.
    for start in range(0, len(ids), 1000):
        rows = session.execute(sa.select(NodeTrait.node_id, NodeTrait.trait)
                               .where(NodeTrait.node_id.in_(ids[start:start + 1000])))
        for node_id, trait in rows:
            traits[node_id].append(trait)
    return traits
