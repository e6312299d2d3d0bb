"""The node adapter over ORM objects (Node, Port, Portgroup, NodeTrait) in a session.

JSON columns are not mutation-tracked: every change assigns a fresh copy and flags the
attribute, so the caller's commit writes it (and a rollback discards it).
"""

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import flag_modified

from inspection.db.models import Node, NodeTrait, Port, Portgroup
from inspection.rules.adapters import NodeAdapterBase, check_trait

_JSON_FIELDS = frozenset({"driver_info", "properties", "extra", "instance_info",
                          "local_link_connection", "internal_info"})


class OrmNode(NodeAdapterBase):
    """Rules' view of a :class:`Node` row; changes stay in ``session`` until commit."""

    def __init__(self, session: Session, node: Node) -> None:
        self.session = session
        self.node = node
        self._ports: list[Port] | None = None

    def _read(self, field: str) -> Any:
        return getattr(self.node, field)

    def _write(self, field: str, value: Any) -> None:
        setattr(self.node, field, value)
        if field in _JSON_FIELDS:
            flag_modified(self.node, field)

    def _port_handles(self) -> list:
        if self._ports is None:
            self._ports = list(self.session.execute(
                sa.select(Port).where(Port.node_id == self.node.id).order_by(Port.id)).scalars())
        return self._ports

    def _port_read(self, handle: Any, field: str) -> Any:
        return getattr(handle, field)

    def _port_write(self, handle: Any, field: str, value: Any) -> None:
        setattr(handle, field, value)
        if field in _JSON_FIELDS:
            flag_modified(handle, field)

    def traits(self) -> list[str]:
        """The node's traits, sorted."""
        return sorted(self.session.execute(
            sa.select(NodeTrait.trait).where(NodeTrait.node_id == self.node.id)).scalars())

    def add_trait(self, name: str) -> None:
        """Add a trait row unless the node has it."""
        check_trait(name)
        if self.session.get(NodeTrait, (self.node.id, name)) is None:
            self.session.add(NodeTrait(node_id=self.node.id, trait=name))
            self.session.flush()

    def remove_trait(self, name: str) -> None:
        """Delete a trait row (no error when absent)."""
        row = self.session.get(NodeTrait, (self.node.id, name)) if isinstance(name, str) \
            else None
        if row is not None:
            self.session.delete(row)
            self.session.flush()

    def port_groups(self) -> list[dict]:
        """The node's port groups as dicts."""
        rows = self.session.execute(sa.select(Portgroup).where(
            Portgroup.node_id == self.node.id).order_by(Portgroup.id)).scalars()
        return [{"uuid": pg.uuid, "name": pg.name, "address": pg.address, "mode": pg.mode,
                 "extra": pg.extra, "properties": pg.properties} for pg in rows]
