"""The per-inspection context that hooks (and rules) receive, with helpers to change the node.

Every change goes through the context's SQLAlchemy session and is NOT committed here: the
pipeline commits all changes of one inspection together, or rolls them all back. JSON columns
(``properties``, ``extra``...) are not mutation-tracked, so the helpers always assign a new
value instead of mutating the stored dict in place.
"""

import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from oslo_config import cfg
from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import flag_modified

from inspection.common import capabilities as caps
from inspection.db.models import Node, NodeInventory, NodeTrait, Port, Portgroup
from pxe_filter.common.macs import InvalidMAC, normalize_mac

LOG = logging.getLogger(__name__)

# Ironic's trait syntax: a standard os-traits name or CUSTOM_ followed by [A-Z0-9_].
_TRAIT = re.compile(r"[A-Z][A-Z0-9_]{0,254}")


def port_mac(port: Port) -> str | None:
    """The port's MAC normalised, or None when the stored value is not a MAC."""
    try:
        return normalize_mac(port.address)
    except InvalidMAC:
        return None


@dataclass
class InspectionContext:
    """Everything one inspection run works on: node, ports, inventory, plugin data, config.

    ``inventory`` must not be modified by hooks; ``plugin_data`` may be. ``previous_inventory``
    is the inventory stored by the previous inspection of the node (None if there was none).
    """

    session: Session
    node: Node
    inventory: dict
    plugin_data: dict
    conf: cfg.ConfigOpts
    ports: list[Port] = field(default_factory=list)
    port_groups: list[Portgroup] = field(default_factory=list)
    previous_inventory: dict | None = None

    @classmethod
    def load(cls, session: Session, node: Node, inventory: dict, plugin_data: dict,
             conf: cfg.ConfigOpts) -> "InspectionContext":
        """Build a context for ``node``, loading its ports, port groups and stored inventory."""
        ports: list[Port] = []
        groups: list[Portgroup] = []
        previous = None
        if node.id is not None:
            ports = list(session.scalars(select(Port).where(Port.node_id == node.id)
                                         .order_by(Port.id)))
            groups = list(session.scalars(select(Portgroup).where(Portgroup.node_id == node.id)
                                          .order_by(Portgroup.id)))
            stored = session.scalars(select(NodeInventory.inventory_data)
                                     .where(NodeInventory.node_id == node.id)
                                     .order_by(NodeInventory.id.desc()).limit(1)).first()
            previous = stored if isinstance(stored, dict) else None
        return cls(session=session, node=node, inventory=inventory, plugin_data=plugin_data,
                   conf=conf, ports=ports, port_groups=groups, previous_inventory=previous)

    @property
    def node_ident(self) -> str:
        """How log lines and errors name the node."""
        return self.node.uuid or "<new node>"

    # --- node properties and capabilities ---

    def set_property(self, key: str, value: Any) -> None:
        """Set ``node.properties[key]`` (a new dict, so the change is persisted)."""
        props = dict(self.node.properties or {})
        props[key] = value
        self.node.properties = props

    def remove_property(self, key: str) -> None:
        """Remove ``node.properties[key]`` if present."""
        props = dict(self.node.properties or {})
        if key in props:
            del props[key]
            self.node.properties = props

    def get_capabilities(self) -> dict[str, str]:
        """The node's capabilities as a dict; raises CapabilitiesError if they are malformed."""
        return caps.parse_capabilities((self.node.properties or {}).get("capabilities"))

    def update_capabilities(self, new: dict[str, Any], remove: tuple[str, ...] = ()) -> None:
        """Set and remove capabilities in place, never duplicating a key."""
        current = (self.node.properties or {}).get("capabilities")
        self.set_property("capabilities", caps.update_capabilities(current, new, remove))

    # --- traits ---

    def traits(self) -> set[str]:
        """The node's traits (as stored plus changes made in this session)."""
        if self.node.id is None:
            return set()
        self.session.flush()
        return set(self.session.scalars(select(NodeTrait.trait)
                                        .where(NodeTrait.node_id == self.node.id)))

    def add_trait(self, trait: str) -> None:
        """Add a trait (idempotent); raises ValueError on a name Ironic would refuse."""
        if not isinstance(trait, str) or not _TRAIT.fullmatch(trait):
            raise ValueError(f"invalid trait {trait!r}: expected an upper-case name such as "
                             f"CUSTOM_GPU (letters, digits, '_'; at most 255 characters)")
        self._ensure_node_id()
        if self.session.get(NodeTrait, (self.node.id, trait)) is None:
            self.session.add(NodeTrait(node_id=self.node.id, trait=trait))

    def remove_trait(self, trait: str) -> None:
        """Remove a trait if the node has it."""
        if self.node.id is None:
            return
        existing = self.session.get(NodeTrait, (self.node.id, trait))
        if existing is not None:
            self.session.delete(existing)

    # --- ports ---

    def port_by_address(self, mac: str) -> Port | None:
        """This node's port with MAC ``mac`` (compared normalised), or None."""
        try:
            wanted = normalize_mac(mac)
        except InvalidMAC:
            return None
        return next((port for port in self.ports if port_mac(port) == wanted), None)

    def find_port(self, ident: str) -> Port | None:
        """This node's port by MAC address or by UUID."""
        return self.port_by_address(ident) or next(
            (port for port in self.ports if port.uuid == ident), None)

    def port_owner(self, mac: str) -> Node | None:
        """The node (this one or another) that has a port with MAC ``mac``, or None."""
        address = normalize_mac(mac)
        if self.port_by_address(address) is not None:
            return self.node
        port = self.session.scalars(select(Port).where(Port.address == address)).first()
        if port is None or port.node_id is None:
            return None
        return self.session.get(Node, port.node_id)

    def create_port(self, address: str, pxe_enabled: bool = True,
                    extra: dict | None = None, **fields: Any) -> Port:
        """Add a port with MAC ``address`` (normalised) to the node; raises InvalidMAC."""
        self._ensure_node_id()
        port = Port(uuid=str(uuid.uuid4()), address=normalize_mac(address),
                    node_id=self.node.id, pxe_enabled=bool(pxe_enabled),
                    extra=dict(extra or {}), local_link_connection={}, internal_info={},
                    **fields)
        self.session.add(port)
        self.ports.append(port)
        return port

    def delete_port(self, port: Port) -> None:
        """Delete one of the node's ports."""
        self.session.delete(port)
        # Flushing now orders the DELETE before any INSERT of the same MAC later in the run.
        self.session.flush()
        self.ports = [p for p in self.ports if p is not port]

    def update_port_dict(self, port: Port, column: str, updates: dict[str, Any]) -> None:
        """Merge ``updates`` into a port's JSON column (``extra``, ``local_link_connection``...)."""
        if column not in ("extra", "local_link_connection", "internal_info"):
            raise ValueError(f"port column {column!r} is not a JSON dictionary")
        merged = dict(getattr(port, column) or {})
        merged.update(updates)
        setattr(port, column, merged)

    @staticmethod
    def mark_modified(obj: Any, column: str) -> None:
        """Tell SQLAlchemy a JSON column was changed in place (for callers that mutate)."""
        flag_modified(obj, column)

    def _ensure_node_id(self) -> None:
        # A freshly discovered node has no id until it is flushed; flushing is not committing.
        if self.node.id is None:
            self.session.add(self.node)
            self.session.flush()

