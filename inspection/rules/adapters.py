"""The narrow view of a node (and its ports) that rules read and change.

The engine only talks to :class:`NodeAdapter`; :class:`InMemoryNode` keeps plain dicts (tests,
``explain``), :mod:`inspection.rules.orm_adapter` works on ORM objects in a session.
"""

import abc
from typing import Any, Protocol, runtime_checkable

from inspection import node_edit
from inspection.common.capabilities import (
    CapabilitiesError,
    parse_capabilities,
    update_capabilities,
)
from inspection.rules import paths
from inspection.rules.errors import ActionError, TemplateError
from pxe_filter.common.macs import InvalidMAC, normalize_mac

#: Node fields templates may read (``{node.<field>}``); driver_internal_info stays private.
READ_FIELDS = ("uuid", "name", "driver", "driver_info", "properties", "extra", "instance_info",
               "resource_class", "conductor_group", "maintenance", "provision_state",
               "auto_discovered", "inspect_interface", "traits")
#: Node fields actions may change, with the type each top-level value must have.
WRITE_FIELDS: dict[str, tuple[type, ...]] = {
    "driver_info": (dict,), "properties": (dict,), "extra": (dict,), "instance_info": (dict,),
    "name": (str, type(None)), "resource_class": (str, type(None)),
    "driver": (str,), "conductor_group": (str,), "maintenance": (bool,),
}
PORT_READ_FIELDS = ("uuid", "address", "pxe_enabled", "extra", "local_link_connection",
                    "physical_network")
PORT_WRITE_FIELDS: dict[str, tuple[type, ...]] = {
    "extra": (dict,), "local_link_connection": (dict,), "physical_network": (str, type(None)),
    "pxe_enabled": (bool,),
}


@runtime_checkable
class NodeAdapter(Protocol):
    """What rules may do to a node; every change raises :class:`ActionError` on bad input."""

    @property
    def uuid(self) -> str: ...
    def read_field(self, name: str) -> Any: ...
    def snapshot(self) -> dict: ...
    def export(self) -> dict: ...
    def get(self, path: str) -> Any: ...
    def set(self, path: str, value: Any) -> None: ...
    def extend(self, path: str, value: Any, unique: bool = False) -> None: ...
    def delete(self, path: str) -> None: ...
    def capabilities(self) -> dict[str, str]: ...
    def set_capability(self, name: str, value: Any) -> None: ...
    def unset_capability(self, name: str) -> None: ...
    def traits(self) -> list[str]: ...
    def add_trait(self, name: str) -> None: ...
    def remove_trait(self, name: str) -> None: ...
    def ports(self) -> list[dict]: ...
    def port_groups(self) -> list[dict]: ...
    def port_set(self, port_id: str, path: str, value: Any) -> None: ...
    def port_extend(self, port_id: str, path: str, value: Any, unique: bool = False) -> None: ...
    def port_delete(self, port_id: str, path: str) -> None: ...


def check_trait(name: object) -> str:
    """Return a valid trait name or raise :class:`ActionError` (the editor's rule)."""
    try:
        return node_edit.check_trait(name)
    except node_edit.InvalidChange as exc:
        raise ActionError(str(exc)) from None


def _check_type(field: str, value: Any, types: tuple[type, ...]) -> None:
    if not isinstance(value, types):
        names = " or ".join("null" if t is type(None) else
                            {"dict": "an object"}.get(t.__name__, t.__name__) for t in types)
        raise ActionError(f"{field} must be {names}")


def _edit(field: str, current: Any, parts: list[str], edit) -> Any:
    if not isinstance(current, dict):
        current = {} if current is None else current
        if not isinstance(current, dict):
            raise ActionError(f"{field} is not an object: cannot change {'/'.join(parts)}")
    # A fresh value: ORM JSON columns only notice reassignment, and callers may roll back.
    # Only the containers the edit changes are copied; the values written are copies already.
    new = paths.copied_along(current, parts)
    edit(new, parts)
    return new


class NodeAdapterBase(abc.ABC):
    """Path, capability and port logic over a few primitives that subclasses implement."""

    @abc.abstractmethod
    def _read(self, field: str) -> Any: ...
    @abc.abstractmethod
    def _write(self, field: str, value: Any) -> None: ...
    @abc.abstractmethod
    def _port_handles(self) -> list: ...
    @abc.abstractmethod
    def _port_read(self, handle: Any, field: str) -> Any: ...
    @abc.abstractmethod
    def _port_write(self, handle: Any, field: str, value: Any) -> None: ...
    @abc.abstractmethod
    def traits(self) -> list[str]: ...
    @abc.abstractmethod
    def add_trait(self, name: str) -> None: ...
    @abc.abstractmethod
    def remove_trait(self, name: str) -> None: ...
    @abc.abstractmethod
    def port_groups(self) -> list[dict]: ...

    @property
    def uuid(self) -> str:
        """The node's UUID."""
        return self._read("uuid")

    def read_field(self, name: str) -> Any:
        """One readable node field, for ``{node.<name>}``."""
        if name not in READ_FIELDS:
            raise TemplateError(f"node has no readable field {name!r}; readable: "
                                f"{', '.join(READ_FIELDS)}")
        return self.traits() if name == "traits" else self._read(name)

    def snapshot(self) -> dict:
        """Every readable field (``{node}`` as a whole)."""
        return {name: self.read_field(name) for name in READ_FIELDS}

    def export(self) -> dict:
        """A deep copy of everything rules can see, to build an :class:`InMemoryNode` from."""
        return paths.copied({"node": {k: v for k, v in self.snapshot().items() if k != "traits"},
                             "ports": self.ports(), "port_groups": self.port_groups(),
                             "traits": self.traits()})

    @staticmethod
    def _split(path: str, writable: dict) -> tuple[str, list[str]]:
        parts = paths.split_path(path)
        if parts[0] not in writable:
            raise ActionError(f"{parts[0]!r} cannot be changed by rules; allowed: "
                              f"{', '.join(writable)}")
        return parts[0], parts[1:]

    def get(self, path: str) -> Any:
        """The value at a node path, None when missing."""
        parts = paths.split_path(path)
        if parts[0] not in READ_FIELDS:
            raise ActionError(f"node has no field {parts[0]!r}")
        return paths.get_in(self.read_field(parts[0]), parts[1:])

    def set(self, path: str, value: Any) -> None:
        """Set a node path such as ``/driver_info/ipmi_address``."""
        field, rest = self._split(path, WRITE_FIELDS)
        if not rest:
            _check_type(field, value, WRITE_FIELDS[field])
            self._write(field, paths.copied(value))
            return
        new = _edit(field, self._read(field), rest,
                    lambda data, parts: paths.set_in(data, parts, paths.copied(value)))
        self._write(field, new)

    def extend(self, path: str, value: Any, unique: bool = False) -> None:
        """Append ``value`` to the list at a node path (created when missing)."""
        field, rest = self._split(path, WRITE_FIELDS)
        if not rest:
            raise ActionError(f"{field} is not a list")
        new = _edit(field, self._read(field), rest,
                    lambda data, parts: paths.extend_in(data, parts, paths.copied(value),
                                                        unique))
        self._write(field, new)

    def delete(self, path: str) -> None:
        """Remove a node path; a missing sub-field is not an error."""
        field, rest = self._split(path, WRITE_FIELDS)
        if not rest:
            types = WRITE_FIELDS[field]
            if dict in types:
                self._write(field, {})
            elif type(None) in types:
                self._write(field, None)
            else:
                raise ActionError(f"{field} cannot be removed, only set")
            return
        current = self._read(field)
        if isinstance(current, dict) and paths.get_in(current, rest, _MISSING) is not _MISSING:
            self._write(field, _edit(field, current, rest, paths.delete_in))

    def capabilities(self) -> dict[str, str]:
        """``properties['capabilities']`` as a dict."""
        try:
            return parse_capabilities((self._read("properties") or {}).get("capabilities"))
        except CapabilitiesError as exc:
            raise ActionError(str(exc)) from None

    def _update_capabilities(self, new: dict, remove: tuple = ()) -> None:
        props = paths.copied(self._read("properties") or {})
        try:
            props["capabilities"] = update_capabilities(props.get("capabilities"), new, remove)
        except CapabilitiesError as exc:
            raise ActionError(str(exc)) from None
        self._write("properties", props)

    def set_capability(self, name: str, value: Any) -> None:
        """Set one capability, replacing (never duplicating) an existing one."""
        if not isinstance(name, str) or not name.strip():
            raise ActionError("a capability name is a non-empty string without ',' or ':'")
        self._update_capabilities({name: "" if value is None else value})

    def unset_capability(self, name: str) -> None:
        """Remove a capability (no error when absent)."""
        if name in self.capabilities():
            self._update_capabilities({}, (name,))

    def ports(self) -> list[dict]:
        """The node's ports as dicts of :data:`PORT_READ_FIELDS`."""
        return [{f: self._port_read(h, f) for f in PORT_READ_FIELDS}
                for h in self._port_handles()]

    def _find_port(self, port_id: object) -> Any:
        if not isinstance(port_id, str):
            raise ActionError("port_id must be a MAC address or a port UUID")
        try:
            mac = normalize_mac(port_id)
        except InvalidMAC:
            mac = None
        if mac is None and not node_edit.UUID_PATTERN.fullmatch(port_id):
            raise ActionError("port_id must be a MAC address or a port UUID")
        wanted = port_id.lower().replace("-", "") if mac is None else None
        for handle in self._port_handles():
            if mac is not None and _same_mac(self._port_read(handle, "address"), mac):
                return handle
            uuid = str(self._port_read(handle, "uuid") or "").lower().replace("-", "")
            if wanted is not None and uuid == wanted:
                return handle
        raise ActionError("the node has no port with this MAC address or UUID")

    def _port_change(self, port_id: str, path: str, edit, top) -> None:
        handle = self._find_port(port_id)
        field, rest = self._split(path, PORT_WRITE_FIELDS)
        if not rest:
            top(handle, field)
            return
        self._port_write(handle, field,
                         _edit(field, self._port_read(handle, field), rest, edit))

    def port_set(self, port_id: str, path: str, value: Any) -> None:
        """Set an attribute of the port with this MAC or UUID."""
        def top(handle, field):
            _check_type(field, value, PORT_WRITE_FIELDS[field])
            self._port_write(handle, field, paths.copied(value))
        self._port_change(port_id, path,
                          lambda d, p: paths.set_in(d, p, paths.copied(value)), top)

    def port_extend(self, port_id: str, path: str, value: Any, unique: bool = False) -> None:
        """Append to a list attribute of the port with this MAC or UUID."""
        def top(handle, field):
            raise ActionError(f"{field} is not a list")
        self._port_change(port_id, path,
                          lambda d, p: paths.extend_in(d, p, paths.copied(value), unique), top)

    def port_delete(self, port_id: str, path: str) -> None:
        """Remove an attribute of the port with this MAC or UUID (missing is fine)."""
        def top(handle, field):
            types = PORT_WRITE_FIELDS[field]
            if dict in types:
                self._port_write(handle, field, {})
            elif type(None) in types:
                self._port_write(handle, field, None)
            else:
                raise ActionError(f"{field} cannot be removed, only set")
        self._port_change(port_id, path, paths.delete_in, top)


_MISSING = object()


def _same_mac(stored: object, mac: str) -> bool:
    try:
        return normalize_mac(stored) == mac
    except InvalidMAC:
        return False


class InMemoryNode(NodeAdapterBase):
    """A node held in plain dicts: for tests, ``explain`` and callers without a database."""

    def __init__(self, node: dict | None = None, ports: list[dict] | None = None,
                 port_groups: list[dict] | None = None, traits: list[str] | None = None) -> None:
        self.node = {"driver_info": {}, "properties": {}, "extra": {}, "instance_info": {},
                     **(node or {})}
        self.port_list = list(ports or [])
        self.port_group_list = list(port_groups or [])
        self.trait_list = list(traits or [])

    @classmethod
    def from_export(cls, data: dict) -> "InMemoryNode":
        """A detached copy of what :meth:`NodeAdapterBase.export` returned."""
        data = paths.copied(data)
        return cls(data.get("node"), data.get("ports"), data.get("port_groups"),
                   data.get("traits"))

    def _read(self, field: str) -> Any:
        return self.node.get(field)

    def _write(self, field: str, value: Any) -> None:
        self.node[field] = value

    def _port_handles(self) -> list:
        return self.port_list

    def _port_read(self, handle: Any, field: str) -> Any:
        return handle.get(field)

    def _port_write(self, handle: Any, field: str, value: Any) -> None:
        handle[field] = value

    def traits(self) -> list[str]:
        """The node's traits."""
        return list(self.trait_list)

    def add_trait(self, name: str) -> None:
        """Add a trait (no duplicate)."""
        if check_trait(name) not in self.trait_list:
            self.trait_list.append(name)

    def remove_trait(self, name: str) -> None:
        """Remove a trait (no error when absent)."""
        if name in self.trait_list:
            self.trait_list.remove(name)

    def port_groups(self) -> list[dict]:
        """The node's port groups."""
        return [dict(pg) for pg in self.port_group_list]
