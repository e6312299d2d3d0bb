"""``POST /v1/nodes/{node}/inventory/reprocess``: run the hooks and rules again on the node's
stored inventory (:mod:`inspection.processing.reprocess`); 200 with what changed."""

from flask import Blueprint, Response, jsonify

from inspection.api.context import ctx
from inspection.api.nodes_query import find_node
from inspection.api.pagination import check_args
from inspection.api.versions import require
from inspection.processing.reprocess import reprocess

bp = Blueprint("reprocess", __name__)


@bp.post("/v1/nodes/<node_ident>/inventory/reprocess")
def reprocess_node(node_ident: str) -> Response:
    """No boot, no power action, no PXE allow; the node keeps its state (409 when it is not
    manageable or has no stored inventory, 400 when a hook or rule fails); a path under the
    inventory, which Ironic has from 1.81."""
    require(81, 404, "The API version does not allow node inventory")
    check_args(())
    c = ctx()
    with c.session() as session:
        node_id = find_node(session, node_ident).id
    outcome = reprocess(c.service, node_id)
    return jsonify({"node": outcome.node_uuid, "provision_state": outcome.provision_state,
                    "changes": outcome.changes})
