"""``/v1/nodes/{node}/traits``: list, set all, add one, remove one, remove all (Ironic 1.37)."""

import re

import os_traits
import sqlalchemy as sa
from flask import Blueprint, Response, jsonify, request

from inspection.api.context import ctx, json_body
from inspection.api.errors import ApiError
from inspection.api.nodes_query import find_node, node_traits
from inspection.api.pagination import check_args
from inspection.api.versions import link, require
from inspection.db.models import NodeTrait
from inspection.reservation import reserved_node

bp = Blueprint("traits", __name__)

#: Placement's limit, which Ironic applies to every node.
MAX_TRAITS_PER_NODE = 50
_STANDARD = frozenset(os_traits.get_traits())
_CUSTOM = re.compile(rf"{os_traits.CUSTOM_NAMESPACE}[A-Z0-9_]+")
_BOTH = ("A single node trait may be added via PUT /v1/nodes/<node identifier>/traits/<trait> "
         "with no body, or all node traits may be replaced via PUT /v1/nodes/<node "
         "identifier>/traits with the list of traits specified in the request body.")


def _check_trait(trait: object) -> str:
    """``trait`` if Ironic accepts it (a standard os-traits name or CUSTOM_...); else 400."""
    if isinstance(trait, str) and len(trait) <= 255 and (
            trait in _STANDARD or _CUSTOM.fullmatch(trait)):
        return trait
    raise ApiError(400, f"Invalid trait {str(trait)[:64]!r}: a trait is a standard name of "
                        f"os-traits (such as HW_CPU_X86_AVX2) or CUSTOM_ followed by upper-case "
                        f"letters, digits and '_', at most 255 characters")


def _require_traits() -> None:
    """Below 1.37 Ironic has no traits path: it answers as for the node path it takes the
    request for (406 for a GET, 405 for a PUT, 404 for a DELETE)."""
    status = {"GET": 406, "PUT": 405}.get(request.method, 404)
    require(37, status, "The resource could not be found." if status == 404 else
            "Request not acceptable." if status == 406 else
            "The method is not allowed for this resource")


def _replace(node_ident: str, change) -> tuple[str, int]:
    """Apply ``change(current traits) -> new traits`` under the node's reservation."""
    c = ctx()
    with reserved_node(c.engine, c.owner, c.node_id(node_ident)) as task:
        session, node_id, node_uuid = task.session, task.node_id, task.node.uuid
        current = set(node_traits(session, {node_id})[node_id])
        wanted = change(current, node_uuid)
        if len(wanted) > MAX_TRAITS_PER_NODE:
            raise ApiError(400, f"Could not modify traits for node {node_uuid} as it would "
                                f"exceed the maximum number of traits per node "
                                f"({len(wanted)} vs. {MAX_TRAITS_PER_NODE})")
        gone = current - wanted
        if gone:
            session.execute(sa.delete(NodeTrait).where(NodeTrait.node_id == node_id,
                                                       NodeTrait.trait.in_(sorted(gone))))
        session.add_all(NodeTrait(node_id=node_id, trait=t) for t in sorted(wanted - current))
    return "", 204


@bp.get("/v1/nodes/<ident(\"detail\"):node_ident>/traits")
def list_traits(node_ident: str) -> Response:
    """The node's traits, sorted (``baremetal node trait list``)."""
    _require_traits()
    check_args(())
    c = ctx()
    with c.session() as session:
        node = find_node(session, node_ident)
        return jsonify({"traits": sorted(node_traits(session, {node.id})[node.id])})


@bp.put("/v1/nodes/<ident(\"detail\"):node_ident>/traits")
def set_traits(node_ident: str) -> tuple[str, int]:
    """Replace every trait with ``{"traits": [...]}``; 204."""
    _require_traits()
    check_args(())
    body = json_body(required=False)
    if not isinstance(body, dict) or set(body) != {"traits"} \
            or not isinstance(body["traits"], list):
        raise ApiError(400, _BOTH)
    wanted = {_check_trait(t) for t in body["traits"]}
    return _replace(node_ident, lambda current, uuid: wanted)


@bp.put("/v1/nodes/<ident(\"detail\"):node_ident>/traits/<trait>")
def add_trait(node_ident: str, trait: str) -> tuple[str, int, dict]:
    """Add one trait (no body); 204 with its Location."""
    _require_traits()
    check_args(())
    if json_body(required=False):
        raise ApiError(400, "No body should be provided when adding a trait")
    _check_trait(trait)
    result = _replace(node_ident, lambda current, uuid: current | {trait})
    return *result, {"Location": link("self", f"/v1/nodes/{node_ident}/traits/{trait}")["href"]}


@bp.delete("/v1/nodes/<ident(\"detail\"):node_ident>/traits")
def remove_traits(node_ident: str) -> tuple[str, int]:
    """Remove every trait; 204."""
    _require_traits()
    check_args(())
    return _replace(node_ident, lambda current, uuid: set())


@bp.delete("/v1/nodes/<ident(\"detail\"):node_ident>/traits/<trait>")
def remove_trait(node_ident: str, trait: str) -> tuple[str, int]:
    """Remove one trait; 404 when the node lacks it, as in Ironic."""
    _require_traits()
    check_args(())

    def without(current: set[str], uuid: str) -> set[str]:
        if trait not in current:
            raise ApiError(404, f"Node {uuid} doesn't have a trait '{trait[:255]}'")
        return current - {trait}

    return _replace(node_ident, without)
