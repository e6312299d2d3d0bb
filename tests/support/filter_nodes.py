"""Nodes and ports written straight into the database the filter reads, as Ironic would."""

import uuid

import sqlalchemy as sa

from inspection.db.models import Node, Port
from pxe_filter.common.database import create_engine


def add_node(url: str, state: str, macs: list[str], conductor_group: str = "",
             shard: str | None = None) -> int:
    """A node in ``state`` (agent inspection) with one port per MAC; its id."""
    engine = create_engine(url)
    with engine.begin() as conn:
        node = conn.execute(sa.insert(Node).values(
            uuid=str(uuid.uuid4()), provision_state=state, inspect_interface="agent",
            conductor_group=conductor_group, shard=shard)).inserted_primary_key[0]
        conn.execute(sa.insert(Port), [{"uuid": str(uuid.uuid4()), "address": mac,
                                        "node_id": node} for mac in macs])
    engine.dispose()
    return node


def set_state(url: str, node: int, state: str) -> None:
    """Move ``node`` to ``state``, as Ironic would."""
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.update(Node).where(Node.id == node).values(provision_state=state))
    engine.dispose()
