"""The node adapter over a stored node: rules change it through :class:`NodeEditor`.

The same editor serves the hooks, so rules and hooks validate traits, compare MACs and
persist JSON columns in one way; changes stay in the session until the pipeline commits.
"""

from typing import Any

from sqlalchemy.orm import Session

from inspection.db.models import Node
from inspection.node_edit import InvalidChange, NodeEditor
from inspection.rules.adapters import NodeAdapterBase
from inspection.rules.errors import ActionError


class OrmNode(NodeAdapterBase):
    """Rules' view of a :class:`Node` row; changes stay in ``session`` until commit."""

    def __init__(self, session: Session, node: Node, editor: NodeEditor | None = None) -> None:
        self.edit = editor if editor is not None else NodeEditor(session, node)

    def _read(self, field: str) -> Any:
        return getattr(self.edit.node, field)

    def _write(self, field: str, value: Any) -> None:
        self.edit.write(field, value)

    def _port_handles(self) -> list:
        return self.edit.ports

    def _find_port(self, port_id: object) -> Any:
        port = self.edit.find_port(port_id)
        if port is None:
            raise ActionError("the node has no port with this MAC address or UUID")
        return port

    def _port_read(self, handle: Any, field: str) -> Any:
        return getattr(handle, field)

    def _port_write(self, handle: Any, field: str, value: Any) -> None:
        self.edit.write_port(handle, field, value)

    def traits(self) -> list[str]:
        """The node's traits, sorted."""
        return self.edit.traits()

    def add_trait(self, name: str) -> None:
        """Add a trait unless the node has it."""
        try:
            self.edit.add_trait(name)
        except InvalidChange as exc:
            raise ActionError(str(exc)) from None

    def remove_trait(self, name: str) -> None:
        """Remove a trait (no error when absent)."""
        self.edit.remove_trait(name)

    def port_groups(self) -> list[dict]:
        """The node's port groups as dicts."""
        return [{"uuid": pg.uuid, "name": pg.name, "address": pg.address, "mode": pg.mode,
                 "extra": pg.extra, "properties": pg.properties}
                for pg in self.edit.port_groups()]
