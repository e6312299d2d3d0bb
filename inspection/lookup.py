"""Find the one node that the ramdisk's inspection data belongs to.

Inputs: an optional node UUID, the MACs of the inventory's interfaces, the BMC addresses
the ramdisk reports and the machine's hardware identity (:mod:`inspection.identity`). The
UUID and the MACs identify a node in any state; BMC addresses only match nodes in
``inspect wait`` (against the cache written when inspection started); the identity is
tried last, when nothing else matched, against nodes in any state (so that discovery never
enrolls a machine a node already stands for). The node must be in ``inspect wait``. Zero or
several matches raise one generic :class:`~inspection.errors.NotFound`; the reason goes to
the log only.

Queries stay cheap with many waiting nodes: MACs use the unique index on ``ports.address``,
and BMC addresses are matched in SQL on the JSON text of ``driver_internal_info`` (the
quoted address) among waiting nodes, then verified exactly on the few candidates.
"""

import logging
import uuid as uuidlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from sqlalchemy import Text, bindparam, or_, select, type_coerce
from sqlalchemy.orm import Session

from inspection import bmc, identity, metrics
from inspection.db.models import INSPECT_WAIT, Node, Port
from inspection.errors import BadRequest, NotFound, UnknownMachine
from pxe_filter.common.macs import InvalidMAC, normalize_mac

LOG = logging.getLogger(__name__)


@dataclass
class LookupData:
    """What the ramdisk told us about itself, validated and normalised."""

    node_uuid: str | None = None
    macs: list[str] = field(default_factory=list)
    bmc_addresses: list[str] = field(default_factory=list)
    #: Usable hardware identity keys (:func:`inspection.identity.from_inventory`).
    identity: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, node_uuid: object = None, macs: Iterable[object] = (),
              bmc_addresses: Iterable[object] = (),
              inventory: dict | None = None) -> "LookupData":
        """Validate raw input; :class:`BadRequest` if nothing usable is left."""
        uuid_text = None
        if node_uuid not in (None, ""):
            try:
                uuid_text = str(uuidlib.UUID(str(node_uuid)))
            except ValueError:
                raise BadRequest("node_uuid is not a valid UUID") from None
        valid: dict[str, None] = {}  # ordered, and linear for thousands of MACs
        for mac in macs or ():
            try:
                normalized = normalize_mac(mac)
            except InvalidMAC:
                LOG.warning("Lookup: ignoring invalid MAC address %r", mac)
                continue
            valid[normalized] = None
        data = cls(uuid_text, list(valid), bmc.reported_addresses(*(bmc_addresses or ())),
                   identity.from_inventory(inventory))
        if not (data.node_uuid or data.macs or data.bmc_addresses or data.identity):
            raise BadRequest("The inspection data has no valid MAC address in its interfaces, "
                             "no BMC address, no hardware identity and no node UUID to find "
                             "the node by")
        return data

    def describe(self) -> str:
        """For log lines."""
        return (f"node_uuid={self.node_uuid}, MACs={','.join(self.macs) or '-'}, "
                f"BMC={','.join(self.bmc_addresses) or '-'}, "
                f"identity={identity.describe(self.identity)}")


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def nodes_by_bmc(session: Session, addresses: Iterable[str]) -> set[int]:
    """IDs of nodes in ``inspect wait`` whose cached BMC addresses include one of these."""
    wanted = {a for a in addresses if a}
    if not wanted:
        return set()
    # JSON text holds each cached address as a quoted string; the LIKE pre-filter runs in
    # the database, the exact check below only sees the (usually one) candidate.
    text = type_coerce(Node.driver_internal_info, Text)
    patterns = [text.like(f'%"{_like_escape(a)}"%', escape="\\")
                for a in sorted(wanted)]
    rows = session.execute(
        select(Node.id, Node.driver_internal_info)
        .where(Node.provision_state == INSPECT_WAIT, or_(*patterns)))
    return {node_id for node_id, info in rows if bmc.cached_addresses(info) & wanted}


class Match(NamedTuple):
    """The node a lookup found: what callers need, read without loading an ORM object."""

    id: int
    uuid: str
    provision_state: str | None


_NODES, _PORTS = Node.__table__, Port.__table__
_MATCH_COLUMNS = (_NODES.c.id, _NODES.c.uuid, _NODES.c.provision_state)
# Core statements on the tables (not the mapped classes) skip the ORM's per-call compile
# step; the unique index on ports.address and the primary key make this one indexed join.
_BY_MACS = (select(*_MATCH_COLUMNS)
            .select_from(_PORTS.join(_NODES, _PORTS.c.node_id == _NODES.c.id))
            .where(_PORTS.c.address.in_(bindparam("macs", expanding=True))))
_BY_UUID = select(*_MATCH_COLUMNS).where(_NODES.c.uuid == bindparam("uuid"))
_BY_ID = select(*_MATCH_COLUMNS).where(_NODES.c.id == bindparam("id"))


def lookup_node(session: Session, data: LookupData) -> Match:
    """The one node in ``inspect wait`` matching ``data``.

    By MAC alone (the usual callback) this is one indexed query. Raises
    :class:`UnknownMachine` when nothing at all matches (the only case in which a machine may
    be auto-discovered), :class:`NotFound` for conflicts or a node in another state; both
    with the same generic message.
    """
    conn = session.connection()
    decided: Match | None = None
    if data.node_uuid:
        decided = conn.execute(_BY_UUID, {"uuid": data.node_uuid}).first()
        if decided is None:
            raise _not_found(data, "no node has this UUID")

    by_mac = {row.id: row for row in conn.execute(_BY_MACS, {"macs": sorted(set(data.macs))})} \
        if data.macs else {}
    if len(by_mac) > 1:
        raise _not_found(data, f"the MACs belong to {len(by_mac)} different nodes "
                               f"({_uuids(session, set(by_mac))})", level=logging.WARNING)
    if by_mac:
        (mac_node,) = by_mac.values()
        if decided is not None and decided.id != mac_node.id:
            raise _not_found(data, f"the UUID and the MACs designate different nodes "
                                   f"({_uuids(session, {decided.id, mac_node.id})})",
                             level=logging.WARNING)
        decided = mac_node

    by_bmc = nodes_by_bmc(session, data.bmc_addresses)
    if decided is not None:
        # The UUID or a MAC decides among nodes sharing a BMC address, but a BMC address
        # cached only on other nodes contradicts it.
        if by_bmc and decided.id not in by_bmc:
            raise _not_found(data, f"the BMC address belongs to other waiting node(s) "
                                   f"({_uuids(session, by_bmc)})", level=logging.WARNING)
    elif len(by_bmc) > 1:
        raise _not_found(data, f"the BMC address is cached on {len(by_bmc)} waiting nodes "
                               f"({_uuids(session, by_bmc)})", level=logging.WARNING)
    elif by_bmc:
        (bmc_node,) = by_bmc
        decided = conn.execute(_BY_ID, {"id": bmc_node}).first()
        if decided is None:  # deleted between the queries
            raise _not_found(data, "the matching node was just deleted")
    else:
        decided = _by_identity(session, data)
        if decided is None:
            LOG.info("Lookup: no node matches %s", data.describe())
            raise UnknownMachine("no node matches")

    node = Match(*decided)
    method = "uuid" if data.node_uuid else "mac" if by_mac else "bmc" if by_bmc else "identity"
    if node.provision_state != INSPECT_WAIT and method == "identity":
        # Not an error when the machine is known; if it is another machine whose firmware
        # reports the same identity, the operator must be able to tell.
        raise _not_found(data, f"its hardware identity is node {node.uuid}'s, which is in "
                               f"state {node.provision_state!r}, not {INSPECT_WAIT!r}; not "
                               f"enrolling it again. If this is another machine reporting "
                               f"the same identity, enroll it with a port for one of its "
                               f"MACs", level=logging.WARNING)
    if node.provision_state != INSPECT_WAIT:
        raise _not_found(data, f"node {node.uuid} matches but is in state "
                               f"{node.provision_state!r}, not {INSPECT_WAIT!r}")
    LOG.info("Lookup: %s is node %s", data.describe(), node.uuid)
    metrics.LOOKUPS.labels(method=method).inc()
    return node


def _by_identity(session: Session, data: LookupData) -> Match | None:
    """The one node with the machine's hardware identity; None when no node has it."""
    rows = identity.matching_nodes(session.connection(), data.identity)
    if len(rows) > 1:
        # Two nodes claim one machine: an operator must decide which one is right.
        raise _not_found(data, f"its hardware identity is recorded on {len(rows)} nodes "
                               f"({', '.join(sorted(r[1] for r in rows))}); remove "
                               f"extra/{identity.EXTRA_KEY} from the wrong one(s)",
                         level=logging.WARNING)
    return Match(*rows[0]) if rows else None


def _uuids(session: Session, ids: set[int]) -> str:
    return ", ".join(sorted(session.scalars(select(Node.uuid).where(Node.id.in_(ids)))))


def _not_found(data: LookupData, reason: str, level: int = logging.INFO) -> NotFound:
    LOG.log(level, "Lookup: no single node for %s: %s", data.describe(), reason)
    return NotFound(reason)
