"""How nodes are grouped, as Ironic shows it: ``/v1/shards`` (1.82) and
``/v1/nodes/{node}/children`` (1.83)."""

import sqlalchemy as sa
from flask import Blueprint, Response, jsonify

from inspection.api.context import ctx
from inspection.api.nodes_query import find_node
from inspection.api.pagination import check_args
from inspection.api.versions import link, require
from inspection.db.models import Node

bp = Blueprint("node_groups", __name__)


@bp.get("/v1/shards")
def list_shards() -> Response:
    """Every shard with its number of nodes, largest first (``baremetal shard list``).

    As in Ironic, nodes without a shard count under the name "None".
    """
    require(82, 404, "The API version does not allow shards")
    check_args(())
    with ctx().session() as session:
        rows = session.execute(sa.select(Node.shard, sa.func.count(Node.id))
                               .group_by(Node.shard)).all()
    rows = sorted(rows, key=lambda row: (-row[1], str(row[0])))
    return jsonify({"shards": [{"name": str(shard), "count": count} for shard, count in rows]})


@bp.get("/v1/nodes/<ident(\"detail\"):node_ident>/children")
def list_children(node_ident: str) -> Response:
    """The UUIDs of the node's child nodes (``baremetal node children list``)."""
    require(83, 404, "The resource could not be found.")
    check_args(())
    with ctx().session() as session:
        parent = find_node(session, node_ident)
        children = session.execute(sa.select(Node.uuid).where(Node.parent_node == parent.uuid)
                                   .order_by(Node.id)).scalars().all()
        return jsonify({"children": list(children),
                        "links": link("children", f"/v1/nodes?parent_node={parent.uuid}")})
