"""The per-inspection context that hooks receive.

Hooks read the node, the inventory and the plugin data here, and change the node only through
``ctx.edit`` (:class:`inspection.node_edit.NodeEditor`, the layer rules use too).
"""

from dataclasses import dataclass

from oslo_config import cfg
from sqlalchemy import select
from sqlalchemy.orm import Session

from inspection.db.models import Node, NodeInventory
from inspection.node_edit import NodeEditor


@dataclass
class InspectionContext:
    """Everything one inspection run works on: node, inventory, plugin data, config.

    ``inventory`` must not be modified by hooks; ``plugin_data`` may be. ``previous_inventory``
    is the inventory stored by the previous inspection of the node (None if there was none).
    """

    session: Session
    node: Node
    inventory: dict
    plugin_data: dict
    conf: cfg.ConfigOpts
    edit: NodeEditor
    previous_inventory: dict | None = None

    @classmethod
    def load(cls, session: Session, node: Node, inventory: dict, plugin_data: dict,
             conf: cfg.ConfigOpts) -> "InspectionContext":
        """Build a context for ``node`` with its stored inventory."""
        previous = None
        if node.id is not None:
            stored = session.scalars(select(NodeInventory.inventory_data)
                                     .where(NodeInventory.node_id == node.id)
                                     .order_by(NodeInventory.id.desc()).limit(1)).first()
            previous = stored if isinstance(stored, dict) else None
        return cls(session=session, node=node, inventory=inventory, plugin_data=plugin_data,
                   conf=conf, edit=NodeEditor(session, node),
                   previous_inventory=previous)

    @property
    def node_ident(self) -> str:
        """How log lines and errors name the node."""
        return self.node.uuid or "<new node>"
