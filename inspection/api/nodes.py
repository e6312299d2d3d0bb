"""``/v1/nodes``: list, create, show, delete, provision state changes, stored inventory."""

import re
import uuid as uuidlib

import sqlalchemy as sa
from flask import Blueprint, Response, jsonify, request

from inspection import inspect_control, locking, states
from inspection.api.context import bool_arg, ctx, json_object
from inspection.api.errors import ApiError
from inspection.api.nodes_query import find_node, stored_inventory
from inspection.api.views import mask_secrets, node_view
from inspection.db.models import (
    INSPECTION_STATES,
    MANAGEABLE,
    Node,
    NodeInventory,
    NodeTrait,
    Port,
    Portgroup,
)
from inspection.errors import InvalidState

bp = Blueprint("nodes", __name__)

#: Inspect interface of nodes created through the API (rules run for it by default).
DEFAULT_INSPECT_INTERFACE = "agent"
#: States a node may be moved to ``manageable`` from with target "manage" (as in Ironic;
#: we cannot check the BMC credentials the way Ironic's "verifying" state does).
_DICT_FIELDS = ("driver_info", "properties", "extra", "instance_info")
#: Ironic's logical node names: RFC 3986 unreserved characters, so they fit in a URL path.
_NAME = re.compile(r"[A-Za-z0-9._~-]{1,255}")
_STR_FIELDS = {"name": 255, "driver": 255, "inspect_interface": 255, "resource_class": 80,
               "conductor_group": 255}
_CREATE_FIELDS = {"uuid", *_DICT_FIELDS, *_STR_FIELDS}


@bp.get("/v1/nodes")
def list_nodes() -> Response:
    """Nodes, optionally by ``provision_state`` and ``auto_discovered``; ``detail`` for all
    fields."""
    detail = bool_arg("detail", False)
    discovered = bool_arg("auto_discovered", None)
    query = sa.select(Node).order_by(Node.id)
    state = request.args.get("provision_state")
    if state is not None:
        query = query.where(Node.provision_state == state)
    if discovered is not None:
        query = query.where(sa.func.coalesce(Node.auto_discovered, False) == discovered)
    c = ctx()
    with c.session() as session:
        nodes = [node_view(n, bool(detail)) for n in session.execute(query).scalars()]
    return jsonify({"nodes": nodes})


def _check_create(body: dict) -> list[str]:
    problems = [f"{name}: unknown field" for name in sorted(set(body) - _CREATE_FIELDS)]
    if not isinstance(body.get("driver"), str) or not body.get("driver"):
        problems.append("driver: required (a hardware type such as 'ipmi')")
    for name, limit in _STR_FIELDS.items():
        value = body.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            problems.append(f"{name}: must be a string of at most {limit} characters")
    for name in _DICT_FIELDS:
        if body.get(name) is not None and not isinstance(body[name], dict):
            problems.append(f"{name}: must be an object")
    name = body.get("name")
    if isinstance(name, str):
        if not _NAME.fullmatch(name):
            problems.append("name: may hold only letters, digits and '-', '.', '_', '~' "
                            "(Ironic's logical names: RFC 3986 unreserved characters)")
        try:
            uuidlib.UUID(name)
            problems.append("name: must not be a UUID (nodes are found by UUID or name)")
        except ValueError:
            pass
    if body.get("uuid") is not None:
        try:
            uuidlib.UUID(str(body["uuid"]))
        except ValueError:
            problems.append("uuid: must be a UUID")
    return problems


@bp.post("/v1/nodes")
def create_node() -> tuple[Response, int, dict]:
    """Enroll a node (state ``enroll``, as Ironic does); 201 with its Location."""
    body = json_object()
    problems = _check_create(body)
    if problems:
        raise ApiError(400, "Invalid node: " + "; ".join(problems), problems=problems)
    node_uuid = str(uuidlib.UUID(str(body["uuid"]))) if body.get("uuid") else \
        str(uuidlib.uuid4())
    node = Node(uuid=node_uuid, name=body.get("name"), driver=body["driver"],
                driver_info=body.get("driver_info") or {}, driver_internal_info={},
                properties=body.get("properties") or {}, extra=body.get("extra") or {},
                instance_info=body.get("instance_info") or {},
                inspect_interface=body.get("inspect_interface") or DEFAULT_INSPECT_INTERFACE,
                resource_class=body.get("resource_class"),
                conductor_group=body.get("conductor_group") or "",
                provision_state=states.INITIAL, auto_discovered=False)
    c = ctx()
    try:
        with c.session() as session:
            session.add(node)
            session.flush()
            view = node_view(node)
    except sa.exc.IntegrityError:
        raise ApiError(409, "A node with this UUID or name already exists") from None
    return jsonify(view), 201, {"Location": f"/v1/nodes/{node_uuid}"}


@bp.get("/v1/nodes/<node_ident>")
def show_node(node_ident: str) -> Response:
    """One node by UUID or name (secrets masked)."""
    c = ctx()
    with c.session() as session:
        return jsonify(node_view(find_node(session, node_ident)))


@bp.delete("/v1/nodes/<node_ident>")
def delete_node(node_ident: str) -> tuple[str, int]:
    """Delete a node with its ports and inventory; refused while it is being inspected."""
    c = ctx()
    with c.session() as session:
        node = find_node(session, node_ident)
        node_id, node_uuid, state = node.id, node.uuid, node.provision_state
    if state in INSPECTION_STATES:
        raise InvalidState(f"Node {node_uuid} is in state {state!r}: abort the inspection "
                           f"before deleting it")
    locking.acquire(c.engine, node_id, c.conf.host)
    try:
        with c.session() as session:
            for model in (Port, NodeTrait, NodeInventory, Portgroup):
                session.execute(sa.delete(model).where(model.node_id == node_id))
            session.execute(sa.delete(Node).where(Node.id == node_id))
    except BaseException:
        locking.release(c.engine, node_id, c.conf.host)
        raise
    return "", 204


def _manage(node_ident: str) -> None:
    c = ctx()
    with c.session() as session:
        node_id = find_node(session, node_ident).id
    with locking.reserved(c.engine, node_id, c.conf.host), c.session() as session:
        node = session.get(Node, node_id)
        if node is None:
            raise ApiError(404, f"Node {node_ident[:64]} could not be found")
        if node.provision_state == MANAGEABLE:
            return
        states.apply(node, states.MANAGE)
        node.last_error = None


@bp.put("/v1/nodes/<node_ident>/states/provision")
def set_provision_state(node_ident: str) -> tuple[Response, int, dict]:
    """``{"target": "inspect" | "abort" | "manage"}``; 202 with the node."""
    body = json_object()
    target = body.get("target")
    c = ctx()
    if target == "inspect":
        inspect_control.start_inspection(c.engine, c.conf, node_ident, c.notifier)
    elif target == "abort":
        inspect_control.abort_inspection(c.engine, c.conf, node_ident, c.notifier)
    elif target == "manage":
        _manage(node_ident)
    else:
        raise ApiError(400, "target must be one of: inspect, abort, manage")
    with c.session() as session:
        node = find_node(session, node_ident)
        view = node_view(node)
    return jsonify(view), 202, {"Location": f"/v1/nodes/{view['uuid']}"}


@bp.get("/v1/nodes/<node_ident>/inventory")
def node_inventory(node_ident: str) -> Response:
    """The inventory and plugin data stored by the last inspection (404 when none)."""
    c = ctx()
    with c.session() as session:
        node = find_node(session, node_ident)
        row = stored_inventory(session, node)
        if row is None:
            raise ApiError(404, f"Node {node.uuid} has no stored inventory")
        # As the ramdisk sent them, secrets masked: a BMC password, a token, a URL password.
        return jsonify({"inventory": mask_secrets(row.inventory_data),
                        "plugin_data": mask_secrets(row.plugin_data)})
