"""Storage of inspection data in ``node_inventory``: the latest inventory of each node only.

Writes go through the caller's session and are never committed here, so the inventory is
stored together with every other change of the run, or not at all. ``plugin_data`` is stored
without the ramdisk logs (``logs``): they are large, base64 and only useful to a person
reading them once (as in Ironic, which stores them elsewhere).
"""

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from inspection.db.models import NodeInventory

#: plugin_data keys that are never stored.
UNSTORED_KEYS = ("logs",)


def storable_plugin_data(plugin_data: dict[str, Any]) -> dict[str, Any]:
    """A shallow copy of ``plugin_data`` without the keys that are never stored."""
    return {k: v for k, v in plugin_data.items() if k not in UNSTORED_KEYS}


def store_inventory(session: Session, node_id: int, inventory: dict,
                    plugin_data: dict) -> NodeInventory:
    """Replace the node's stored inventory and plugin data (not committed)."""
    session.execute(sa.delete(NodeInventory).where(NodeInventory.node_id == node_id))
    row = NodeInventory(node_id=node_id, inventory_data=inventory,
                        plugin_data=storable_plugin_data(plugin_data))
    session.add(row)
    return row

