"""The one way hooks and rules change a stored node: fields, capabilities, traits, ports.

Every change goes through the node's SQLAlchemy session and is NOT committed here: the
pipeline commits all changes of one inspection together, or rolls them all back. JSON columns
(``properties``, ``extra``...) are not mutation-tracked, so a change always assigns a new value
and flags the column. Ports are found by MAC (compared normalised) or by UUID.
"""

import re
import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import flag_modified

from inspection.common import capabilities as caps
from inspection.db.models import Node, NodeTrait, Port, Portgroup
from pxe_filter.common.macs import InvalidMAC, normalize_mac

#: Ironic's trait syntax: an upper-case os-traits name or CUSTOM_..., at most 255 characters.
_TRAIT = re.compile(r"[A-Z][A-Z0-9_]{0,254}")
UUID_PATTERN = re.compile(r"[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}")
JSON_FIELDS = frozenset({"driver_info", "driver_internal_info", "properties", "extra",
                         "instance_info", "local_link_connection", "internal_info"})
PORT_DICT_FIELDS = ("extra", "local_link_connection", "internal_info")


class InvalidChange(ValueError):
    """A change Ironic would refuse (a bad trait name, a port column that is no dict...)."""


def check_trait(name: object) -> str:
    """Return ``name`` if it is a valid trait; raise :class:`InvalidChange` otherwise."""
    if not isinstance(name, str) or not _TRAIT.fullmatch(name):
        raise InvalidChange(f"invalid trait {str(name)[:64]!r}: a trait is an upper-case name "
                            f"such as CUSTOM_GPU or HW_CPU_X86_AVX2 (letters, digits, '_'; "
                            f"at most 255 characters)")
    return name


def port_mac(port: Port) -> str | None:
    """The port's MAC normalised, or None when the stored value is not a MAC."""
    try:
        return normalize_mac(port.address)
    except InvalidMAC:
        return None


class NodeEditor:
    """Changes to ``node`` and its ports, pending in ``session``."""

    def __init__(self, session: Session, node: Node, ports: list[Port] | None = None) -> None:
        self.session = session
        self.node = node
        self._ports = ports

    # --- fields and properties ---

    def write(self, field: str, value: Any) -> None:
        """Assign a node column, flagging JSON columns so the commit writes them."""
        setattr(self.node, field, value)
        if field in JSON_FIELDS:
            flag_modified(self.node, field)

    def set_property(self, key: str, value: Any) -> None:
        """Set ``node.properties[key]``."""
        self.write("properties", {**(self.node.properties or {}), key: value})

    def remove_property(self, key: str) -> None:
        """Remove ``node.properties[key]`` if present."""
        props = dict(self.node.properties or {})
        if key in props:
            del props[key]
            self.write("properties", props)

    def capabilities(self) -> dict[str, str]:
        """The node's capabilities; raises CapabilitiesError if they are malformed."""
        return caps.parse_capabilities((self.node.properties or {}).get("capabilities"))

    def update_capabilities(self, new: dict[str, Any], remove: tuple[str, ...] = ()) -> None:
        """Set and remove capabilities in place, never duplicating a key."""
        current = (self.node.properties or {}).get("capabilities")
        self.set_property("capabilities", caps.update_capabilities(current, new, remove))

    # --- traits ---

    def traits(self) -> list[str]:
        """The node's traits, sorted (as stored plus changes pending in the session)."""
        if self.node.id is None:
            return []
        self.session.flush()
        return sorted(self.session.scalars(select(NodeTrait.trait)
                                           .where(NodeTrait.node_id == self.node.id)))

    def add_trait(self, name: str) -> None:
        """Add a trait (idempotent); raises :class:`InvalidChange` on a name Ironic refuses."""
        check_trait(name)
        self._ensure_node_id()
        if self.session.get(NodeTrait, (self.node.id, name)) is None:
            self.session.add(NodeTrait(node_id=self.node.id, trait=name))
            self.session.flush()

    def remove_trait(self, name: str) -> None:
        """Remove a trait if the node has it."""
        if self.node.id is None or not isinstance(name, str):
            return
        existing = self.session.get(NodeTrait, (self.node.id, name))
        if existing is not None:
            self.session.delete(existing)
            self.session.flush()

    # --- ports ---

    @property
    def ports(self) -> list[Port]:
        """The node's ports (loaded once, then kept in step with changes made here)."""
        if self._ports is None:
            self._ports = [] if self.node.id is None else list(self.session.scalars(
                select(Port).where(Port.node_id == self.node.id).order_by(Port.id)))
        return self._ports

    def port_groups(self) -> list[Portgroup]:
        """The node's port groups."""
        if self.node.id is None:
            return []
        return list(self.session.scalars(select(Portgroup).where(
            Portgroup.node_id == self.node.id).order_by(Portgroup.id)))

    def port_by_address(self, mac: str) -> Port | None:
        """This node's port with MAC ``mac`` (compared normalised), or None."""
        try:
            wanted = normalize_mac(mac)
        except InvalidMAC:
            return None
        return next((port for port in self.ports if port_mac(port) == wanted), None)

    def find_port(self, ident: object) -> Port | None:
        """This node's port by MAC address or by UUID (any spelling), or None."""
        if not isinstance(ident, str):
            return None
        port = self.port_by_address(ident)
        if port is not None or not UUID_PATTERN.fullmatch(ident):
            return port
        wanted = ident.lower().replace("-", "")
        return next((p for p in self.ports
                     if str(p.uuid or "").lower().replace("-", "") == wanted), None)

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
        ports = self.ports  # loaded before the new row can be autoflushed into the query
        port = Port(uuid=str(uuid.uuid4()), address=normalize_mac(address),
                    node_id=self.node.id, pxe_enabled=bool(pxe_enabled),
                    extra=dict(extra or {}), local_link_connection={}, internal_info={},
                    **fields)
        self.session.add(port)
        ports.append(port)
        return port

    def delete_port(self, port: Port) -> None:
        """Delete one of the node's ports."""
        self.session.delete(port)
        # Flushing now orders the DELETE before any INSERT of the same MAC later in the run.
        self.session.flush()
        self._ports = [p for p in self.ports if p is not port]

    def write_port(self, port: Port, field: str, value: Any) -> None:
        """Assign a port column, flagging JSON columns so the commit writes them."""
        setattr(port, field, value)
        if field in JSON_FIELDS:
            flag_modified(port, field)

    def update_port_dict(self, port: Port, column: str, updates: dict[str, Any]) -> None:
        """Merge ``updates`` into a port's JSON column (``extra``, ``local_link_connection``...)."""
        if column not in PORT_DICT_FIELDS:
            raise InvalidChange(f"port column {column!r} is not a JSON dictionary")
        self.write_port(port, column, {**(getattr(port, column) or {}), **updates})

    def _ensure_node_id(self) -> None:
        # A freshly discovered node has no id until it is flushed; flushing is not committing.
        if self.node.id is None:
            self.session.add(self.node)
            self.session.flush()
