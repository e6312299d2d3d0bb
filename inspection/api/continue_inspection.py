"""``POST /v1/continue_inspection``: the ramdisk's unauthenticated callback."""

import logging

import sqlalchemy as sa
from flask import Blueprint, Response, g, jsonify, request

from inspection.api.context import ctx, json_body
from inspection.api.dispatch import API_RETRY_BUDGET, DispatchError
from inspection.api.errors import ApiError
from inspection.api.versions import MIN_VERSION, allows, current
from inspection.db import retry
from inspection.db.idents import is_uuid
from pxe_filter.common.database import error_reason

bp = Blueprint("continue_inspection", __name__)
LOG = logging.getLogger("inspection.api.continue")


#: Ironic's version of the callback; it also takes it at 1.1, which IPA uses (it sends no
#: version header), but not ``node_uuid`` there.
CALLBACK_MINOR = 84


def _check_version(node_uuid: str | None) -> None:
    """404 as Ironic answers a version that has no callback (1.2 to 1.83), or ``node_uuid``
    below 1.84."""
    if allows(CALLBACK_MINOR) or (current() == MIN_VERSION and node_uuid is None):
        return
    raise ApiError(404, f"API version 1.{CALLBACK_MINOR} or newer is required")


@bp.post("/v1/continue_inspection")
def continue_inspection() -> tuple[Response, int]:
    """Find (or enroll) the node and store the data synchronously, answer 202, process in
    the background."""
    # Firmware does report NULs (e.g. in serial numbers); they are stored escaped.
    body = json_body(check_strings=False)
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object with an 'inventory'")
    node_uuid = request.args.get("node_uuid")
    if node_uuid is not None and not is_uuid(node_uuid):
        raise ApiError(400, "node_uuid must be a UUID")
    _check_version(node_uuid)
    c = ctx()
    try:
        # Every step is a transaction of its own: a deadlock or a dropped connection runs
        # it again (a node that discovery enrolled is then found by the lookup).
        accepted = retry.call(c.service.accept, body, node_uuid, True,
                              what="accepting inspection data", budget=API_RETRY_BUDGET)
        g.discovered = accepted.created  # the callback's outcome in the metrics
        # 202 only once the data is committed: from then on it survives any one crash.
        c.dispatcher.dispatch(accepted.node_uuid, accepted.data, accepted.callback_id,
                              attempt=accepted.attempt)
    except (DispatchError, sa.exc.SQLAlchemyError) as exc:
        if isinstance(exc, sa.exc.SQLAlchemyError):
            if not isinstance(exc, sa.exc.OperationalError) and not retry.is_transient(exc) \
                    and not retry.is_read_only(exc):
                raise
            LOG.error("Inspection data not accepted, the database failed: %s",
                      error_reason(exc))
        # Nothing was accepted; the ramdisk retries (or the inspect-wait timeout fails it).
        raise ApiError(503, "Inspection data cannot be accepted right now; try again "
                            "later") from None
    LOG.info("Accepted inspection data for node %s", accepted.node_uuid)
    return jsonify({"uuid": accepted.node_uuid}), 202
