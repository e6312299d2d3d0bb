"""``POST /v1/continue_inspection``: the ramdisk's unauthenticated callback."""

import logging

from flask import Blueprint, Response, g, jsonify, request

from inspection.api.context import ctx, json_body
from inspection.api.dispatch import DispatchError
from inspection.api.errors import ApiError
from inspection.db.idents import is_uuid

bp = Blueprint("continue_inspection", __name__)
LOG = logging.getLogger("inspection.api.continue")


@bp.post("/v1/continue_inspection")
def continue_inspection() -> tuple[Response, int]:
    """Find (or enroll) the node synchronously, answer 202 and process in the background."""
    # Firmware does report NULs (e.g. in serial numbers); they are stored escaped.
    body = json_body(check_strings=False)
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object with an 'inventory'")
    node_uuid = request.args.get("node_uuid")
    if node_uuid is not None and not is_uuid(node_uuid):
        raise ApiError(400, "node_uuid must be a UUID")
    c = ctx()
    accepted = c.service.accept(body, node_uuid=node_uuid)
    g.discovered = accepted.created  # the callback's outcome in the metrics
    try:
        c.dispatcher.dispatch(accepted.node_uuid, accepted.data)
    except DispatchError:
        # The node stays in 'inspect wait'; the ramdisk retries or the timeout fails it.
        raise ApiError(503, "Inspection data cannot be processed right now; try again "
                            "later") from None
    LOG.info("Accepted inspection data for node %s", accepted.node_uuid)
    return jsonify({"uuid": accepted.node_uuid}), 202
