"""``/v1/nodes``: list, create, show, delete, provision state changes, stored inventory."""

import uuid as uuidlib

import sqlalchemy as sa
from flask import Blueprint, Response, jsonify, request
from sqlalchemy.orm import Session, load_only

from inspection import attempts, inspect_control, states
from inspection.api import authz, node_fields
from inspection.api.context import ctx, json_body, json_object
from inspection.api.errors import ApiError, integrity_error
from inspection.api.nodes_filters import (
    check_field_versions,
    check_filter_versions,
    children_filter,
    field_filters,
    parent_uuid,
)
from inspection.api.nodes_query import chassis_id, find_node, node_traits, stored_inventory
from inspection.api.pagination import (
    PAGE_ARGS,
    bool_filter,
    check_args,
    detail_and_fields,
    fields_arg,
    fit_page,
    next_link,
    page_args,
    paginate,
    uuid_arg,
)
from inspection.api.patching import (
    NODE_DEFAULTS,
    NODE_DICT_FIELDS,
    NODE_PATCHABLE,
    NODE_STR_FIELDS,
    check_node,
    node_name_problems,
    size_problems,
)
from inspection.api.patching import apply as apply_patch
from inspection.api.versions import allows, require, require_for
from inspection.api.views import (
    BRIEF_NODE_FIELDS,
    COMPUTED_NODE_FIELDS,
    NODE_FIELD_CHOICES,
    NODE_FIELDS,
    mask_secrets,
    node_view,
)
from inspection.db.idents import canonical_uuid
from inspection.db.models import (
    AVAILABLE,
    ENROLL,
    INSPECTING,
    INSPECTION_STATES,
    MANAGEABLE,
    Node,
    NodeInventory,
    NodeTrait,
    Port,
    Portgroup,
)
from inspection.errors import InvalidState
from inspection.inspect_control import node_ports
from inspection.power import tasks as power_tasks
from inspection.reservation import reserved_node

bp = Blueprint("nodes", __name__)

#: The longest maintenance reason stored (it is a TEXT column; see node_fields.STR_FIELDS).
MAINTENANCE_REASON_LENGTH = 4096

#: Inspect interface of nodes created through the API (rules run for it by default).
DEFAULT_INSPECT_INTERFACE = "agent"
_CREATE_FIELDS = {"uuid", "chassis_uuid", *NODE_DICT_FIELDS, *NODE_STR_FIELDS,
                  *node_fields.CREATE_FIELDS}
#: Filters of GET /v1/nodes (Ironic's, where this service holds the field, and ours).
_FILTERS = ("chassis_uuid", "instance_uuid", "associated", "conductor", "provision_state",
            "driver", "maintenance", "resource_class", "conductor_group", "fault",
            "auto_discovered", "owner", "lessee", "project", "description_contains", "shard",
            "sharded", "retired", "parent_node", "include_children")
#: The version at which Ironic added each provision verb (1.x; Ironic's MIN_VERB_VERSIONS):
#: below it the verb gets Ironic's 406, served here or not.
_VERB_VERSIONS = {"manage": 4, "provide": 4, "inspect": 6, "abort": 13, "clean": 15,
                  "adopt": 17, "rescue": 38, "unrescue": 38, "deploy": 73, "undeploy": 73}
#: Sort keys: Ironic refuses its JSON columns; so do we.
_SORT_KEYS = {name: getattr(Node, name) for name in (
    "id", "uuid", "name", "driver", "provision_state", "target_provision_state", "maintenance",
    "resource_class", "conductor_group", "inspect_interface", "reservation",
    "auto_discovered", "inspection_started_at", "inspection_finished_at", "created_at",
    "updated_at", "owner", "lessee", "description", "shard", "parent_node", "protected",
    "retired", "maintenance_reason", *node_fields.INTERFACE_FIELDS)}


def _view(session: Session, node: Node, fields: list[str] | None = None) -> dict:
    """``node`` with every field (or ``fields``), its traits read in ``session``."""
    return authz.redact_node(
        node_view(node, fields=fields, traits=node_traits(session, {node.id})[node.id]),
        node.owner, node.lessee)


def _list(path: str, detail_path: bool, chassis_uuid: str | None = None) -> Response:
    check_args((*_FILTERS, *PAGE_ARGS, *(() if detail_path else ("detail", "fields"))))
    chassis_uuid = chassis_uuid or uuid_arg("chassis_uuid")
    detail, fields = detail_and_fields(NODE_FIELD_CHOICES, detail_path)
    page = page_args(_SORT_KEYS, versions=node_fields.FIELD_VERSIONS)
    # Only the columns shown: decoding every JSON column of 1000 nodes is most of a page.
    shown = fields or (NODE_FIELDS if detail else BRIEF_NODE_FIELDS)
    columns = {getattr(Node, name) for name in shown if name not in COMPUTED_NODE_FIELDS}
    # owner and lessee decide what the policies let this user see of each node
    c = ctx()
    query = authz.narrow_nodes(sa.select(Node).options(
        load_only(Node.id, Node.uuid, Node.owner, Node.lessee, *columns)))
    check_filter_versions(detail_path)
    if fields:
        check_field_versions(fields, "showing")
    for name in ("provision_state", "driver", "resource_class", "owner", "lessee"):
        value = request.args.get(name)
        if value is not None:
            query = query.where(getattr(Node, name) == value)
    group = request.args.get("conductor_group")
    if group is not None:  # Ironic stores and compares conductor groups in lower case
        query = query.where(sa.func.lower(Node.conductor_group) == group.lower())
    instance = uuid_arg("instance_uuid")
    if instance is not None:
        query = query.where(Node.instance_uuid == instance)
    associated = bool_filter("associated")
    if associated is not None:  # recorded by whoever deploys; this service never does
        query = query.where(Node.instance_uuid.is_not(None) if associated
                            else Node.instance_uuid.is_(None))
    conductor = request.args.get("conductor")
    if conductor is not None and conductor != c.conf.host:
        query = query.where(sa.false())  # every node is served by this host
    if request.args.get("fault") is not None:
        query = query.where(sa.false())  # no node of this service ever has a fault
    for name in ("maintenance", "auto_discovered", "retired"):
        flag = bool_filter(name)
        if flag is not None:
            query = query.where(sa.func.coalesce(getattr(Node, name), False) == flag)
    query = field_filters(query)
    if chassis_uuid is not None:
        query = query.where(Node.chassis_uuid == chassis_uuid)
    with c.session() as session:
        query = children_filter(session, query)
        marker = find_node(session, page.marker) if page.marker else None
        query, more = fit_page(session, paginate(query, Node, page, _SORT_KEYS, marker), Node,
                               columns, c.conf.api.max_page_bytes)
        rows = session.execute(query).scalars().all()
        traits = node_traits(session, {n.id for n in rows}) if "traits" in shown else {}
        nodes = [authz.redact_node(node_view(n, detail, fields, traits.get(n.id, ())),
                                   n.owner, n.lessee) for n in rows]
    body: dict = {"nodes": nodes}
    following = next_link(len(rows), rows[-1].uuid if rows else None, page, path,
                          more=more)
    if following:
        body["next"] = following
    return jsonify(body)


@bp.get("/v1/nodes")
def list_nodes() -> Response:
    """Nodes, filtered, sorted and paged as in Ironic (brief fields unless ``detail``)."""
    return _list("/v1/nodes", detail_path=False)


def list_nodes_of(path: str, detail_path: bool, chassis_uuid: str) -> Response:
    """The nodes of a chassis, listed as ``GET /v1/nodes`` lists them."""
    return _list(path, detail_path, chassis_uuid)


@bp.get("/v1/nodes/detail")
def list_nodes_detail() -> Response:
    """Nodes with every field (Ironic's ``/v1/nodes/detail``, used by ``node list --long``)."""
    return _list("/v1/nodes/detail", detail_path=True)


def _check_create(body: dict) -> list[str]:
    problems = [f"{name}: unknown field" for name in sorted(set(body) - _CREATE_FIELDS)]
    if not isinstance(body.get("driver"), str) or not body.get("driver"):
        problems.append("driver: required (a hardware type such as 'ipmi')")
    for name, limit in NODE_STR_FIELDS.items():
        value = body.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            problems.append(f"{name}: must be a string of at most {limit} characters")
    for name in NODE_DICT_FIELDS:
        if body.get(name) is not None and not isinstance(body[name], dict):
            problems.append(f"{name}: must be an object")
    if isinstance(body.get("name"), str):
        problems.extend(node_name_problems(body["name"]))
    for name in ("uuid", "chassis_uuid"):
        if body.get(name) is not None and canonical_uuid(body[name]) is None:
            problems.append(f"{name}: must be a UUID")
    problems.extend(node_fields.check(body, node_fields.CREATE_FIELDS))
    problems.extend(node_fields.reason_problems(body))
    return problems


@bp.post("/v1/nodes")
def create_node() -> tuple[Response, int, dict]:
    """Enroll a node (state ``enroll``, as Ironic does); 201 with its Location."""
    body = json_object()
    # Fields newer than the request's version: 406, as Ironic (an explicit null is no value).
    check_field_versions([n for n, v in body.items() if v not in (None, "")], "setting")
    c = ctx()
    problems = _check_create(body) + size_problems(body, c.conf.inspection_rules.max_node_size,
                                                   "node")
    if problems:
        raise ApiError(400, "Invalid node: " + "; ".join(problems), problems=problems)
    node_uuid = str(uuidlib.UUID(str(body["uuid"]))) if body.get("uuid") else \
        str(uuidlib.uuid4())
    fields = {name: body.get(name) for name in node_fields.CREATE_FIELDS
              if name != "inspect_interface"}
    node_fields.fill_interfaces(fields, body["driver"])
    node = Node(uuid=node_uuid, name=body.get("name"), driver=body["driver"],
                driver_info=body.get("driver_info") or {}, driver_internal_info={},
                properties=body.get("properties") or {}, extra=body.get("extra") or {},
                instance_info=body.get("instance_info") or {},
                inspect_interface=body.get("inspect_interface") or DEFAULT_INSPECT_INTERFACE,
                resource_class=body.get("resource_class"),
                conductor_group=(body.get("conductor_group") or "").lower(),
                # below 1.11 Ironic had no enroll state: nodes started available
                provision_state=states.INITIAL if allows(11) else AVAILABLE,
                auto_discovered=False, **fields)
    node.retired = bool(node.retired)
    node.network_data = node.network_data or {}
    node.disable_power_off = False
    if authz.policy_owner():
        # A project-scoped creator's node belongs to its project, as in Ironic.
        node.owner = authz.policy_owner()
    try:
        with c.session() as session:
            if node.parent_node:  # stored as the parent's UUID, as Ironic does
                node.parent_node = parent_uuid(session, node.parent_node)
            node.chassis_id = chassis_id(session, body.get("chassis_uuid"))
            session.add(node)
            session.flush()
            view = node_view(node)
    except sa.exc.IntegrityError as exc:
        raise integrity_error(exc, "A node with this UUID or name already exists",
                              "node") from None
    return jsonify(view), 201, {"Location": view["links"][0]["href"]}


@bp.get("/v1/nodes/<ident(\"detail\"):node_ident>")
def show_node(node_ident: str) -> Response:
    """One node by UUID or name (secrets masked; only ``fields`` if given)."""
    check_args(("fields",))
    fields = fields_arg(NODE_FIELD_CHOICES)
    if fields:
        check_field_versions(fields, "showing")
    c = ctx()
    with c.session() as session:
        return jsonify(_view(session, find_node(session, node_ident), fields))


@bp.patch("/v1/nodes/<ident(\"detail\"):node_ident>")
def patch_node(node_ident: str) -> Response:
    """Apply an RFC 6902 patch to the fields Ironic lets clients change; 200 with the node."""
    check_args(("reset_interfaces",))
    reset = bool_filter("reset_interfaces")
    if reset is not None:
        require_for(45, "reset_interfaces")
    body = json_body()
    if isinstance(body, list):  # what the patch touches must exist in the request's version
        touched = {str(op.get("path", "")).lstrip("/").split("/", 1)[0]
                   for op in body if isinstance(op, dict)}
        if "traits" in touched:
            raise ApiError(400, "Cannot update node traits via node patch. Node traits should "
                                "be updated via the node traits API.")
        check_field_versions(touched, "changing")
        if reset and "driver" not in touched:
            raise ApiError(400, "The reset_interfaces parameter can only be used when "
                                "changing the node's driver.")
    c = ctx()
    try:
        with reserved_node(c.engine, c.owner, c.node_id(node_ident), notifier=c.notifier) as task:
            session, node, node_id = task.session, task.node, task.node_id
            before = {name: getattr(node, name) for name in NODE_PATCHABLE}
            for name in ("maintenance", "protected", "retired"):
                before[name] = bool(before[name])
            before["network_data"] = before["network_data"] or {}
            values = check_node(apply_patch(before, body, NODE_PATCHABLE, NODE_DEFAULTS,
                                            c.conf.inspection_rules.max_node_size))
            if reset and values["driver"] != before["driver"]:
                # The new driver's defaults for every interface the patch leaves alone.
                for name in node_fields.INTERFACE_FIELDS:
                    if values[name] == before[name]:
                        values[name] = NODE_DEFAULTS[name]
            node_fields.fill_interfaces(values, values["driver"])
            node_fields.check_transition(node.uuid, node.provision_state,
                                         values["maintenance"], before, values)
            if values["parent_node"] and values["parent_node"] != before["parent_node"]:
                values["parent_node"] = parent_uuid(session, values["parent_node"])
                if values["parent_node"] == node.uuid:
                    raise ApiError(400, "parent_node: a node cannot be its own parent")
            if before["maintenance"] and not values["maintenance"]:
                node.maintenance_reason = None  # as Ironic, out of maintenance
            chassis = values.pop("chassis_uuid")
            if chassis != before.pop("chassis_uuid"):
                if chassis is None:  # Ironic lets a node leave its chassis from 1.25
                    require_for(25, "removing chassis_uuid")
                node.chassis_id = chassis_id(session, chassis)
            for name, value in values.items():
                if value != before[name]:
                    setattr(node, name, value)
            session.flush()
            if values["inspect_interface"] != before["inspect_interface"]:
                # The PXE filters' decision depends on the inspect interface.
                task.announce(node_ports(session, node))
    except sa.exc.IntegrityError as exc:
        raise integrity_error(exc, "A node with this name already exists", "node") from None
    with c.session() as session:
        node = session.get(Node, node_id)
        if node is None:
            raise ApiError(404, f"Node {node_ident[:64]} could not be found")
        return jsonify(_view(session, node))


def _set_maintenance(node_ident: str, value: bool, reason: str | None) -> tuple[str, int]:
    c = ctx()
    with reserved_node(c.engine, c.owner, c.node_id(node_ident)) as task:
        task.node.maintenance = value
        task.node.maintenance_reason = reason
    return "", 202


@bp.put("/v1/nodes/<ident(\"detail\"):node_ident>/maintenance")
def set_maintenance(node_ident: str) -> tuple[str, int]:
    """Put the node in maintenance (Ironic's ``node maintenance set``); 202."""
    check_args(("reason",))
    body = json_body(required=False)
    body = {} if body is None else body
    if not isinstance(body, dict) or set(body) - {"reason"}:
        raise ApiError(400, 'The request body must be {"reason": null} or empty')
    reason = body.get("reason", request.args.get("reason"))
    if reason is not None and (not isinstance(reason, str)
                               or len(reason) > MAINTENANCE_REASON_LENGTH):
        raise ApiError(400, f"reason: must be a string of at most "
                            f"{MAINTENANCE_REASON_LENGTH} characters")
    return _set_maintenance(node_ident, True, reason)


@bp.delete("/v1/nodes/<ident(\"detail\"):node_ident>/maintenance")
def clear_maintenance(node_ident: str) -> tuple[str, int]:
    """Take the node out of maintenance (Ironic's ``node maintenance unset``); 202."""
    check_args(())
    return _set_maintenance(node_ident, False, None)


@bp.delete("/v1/nodes/<ident(\"detail\"):node_ident>")
def delete_node(node_ident: str) -> tuple[str, int]:
    """Delete a node with its ports and inventory; refused while it is being inspected."""
    c = ctx()
    with reserved_node(c.engine, c.owner, c.node_id(node_ident)) as task:
        node = task.node  # checked under the reservation: nothing starts inspecting it now
        if node.protected:  # Ironic's NodeProtected
            raise ApiError(403, f"Node {node.uuid} is protected and cannot be undeployed, "
                                f"rebuilt or deleted")
        if node.provision_state in INSPECTION_STATES:
            raise InvalidState(f"Node {node.uuid} is in state {node.provision_state!r}: "
                               f"abort the inspection before deleting it")
        for model in (Port, NodeTrait, NodeInventory, Portgroup):
            task.session.execute(sa.delete(model).where(model.node_id == node.id))
        task.session.execute(sa.delete(Node).where(Node.id == node.id))
        attempts.discard_callbacks(task.session, node.uuid)
        task.deleting()
    return "", 204


def _manage(node_ident: str) -> None:
    c = ctx()
    with reserved_node(c.engine, c.owner, c.node_id(node_ident)) as task:
        node = task.node
        if node.provision_state == MANAGEABLE:
            return
        # As Ironic's 'verifying': a node whose BMC this service drives becomes manageable
        # once the BMC actor has read its power state.
        verify = node.provision_state == ENROLL and power_tasks.manages_boot(node)
        states.apply(node, states.VERIFY if verify else states.MANAGE)
        if verify:
            power_tasks.start_verification(node)
        node.last_error = None
    if verify:
        c.dispatcher.wake_power()


#: Ironic's provision targets this service does not serve: 501 names them (a 400 reads like a
#: client mistake; openstacksdk's register_machine asks for "provide").
_UNSERVED_TARGETS = frozenset({"provide", "active", "deploy", "deleted", "undeploy", "rebuild",
                               "clean", "adopt", "rescue", "unrescue", "service", "unhold"})


@bp.put("/v1/nodes/<ident(\"detail\"):node_ident>/states/provision")
def set_provision_state(node_ident: str) -> tuple[Response, int, dict]:
    """``{"target": "inspect" | "abort" | "manage"}``; 202 with the node."""
    body = json_object()
    target = body.get("target")
    if isinstance(target, str) and target in _VERB_VERSIONS:  # 406 below Ironic's version
        require(_VERB_VERSIONS[target], 406, "Request not acceptable.")
    c = ctx()
    if target == "inspect":
        node = inspect_control.start_inspection(c.engine, c.conf, node_ident, c.notifier)
        if node.provision_state == INSPECTING:
            c.dispatcher.wake_power()
    elif target == "abort":
        inspect_control.abort_inspection(c.engine, c.conf, node_ident, c.notifier)
        c.dispatcher.wake_power()
    elif target == "manage":
        _manage(node_ident)
    elif isinstance(target, str) and target in _UNSERVED_TARGETS:
        raise ApiError(501, f"Provision target {target!r} is not available through this "
                            f"service: it serves Ironic's API for enrolment, inspection and "
                            f"inspection rules only (targets inspect, abort, manage). Use a "
                            f"full Ironic deployment to provide, deploy or clean nodes.")
    else:
        raise ApiError(400, "target must be one of: inspect, abort, manage")
    with c.session() as session:
        node = find_node(session, node_ident)
        view = _view(session, node)
    return jsonify(view), 202, {"Location": f"/v1/nodes/{view['uuid']}"}


@bp.get("/v1/nodes/<ident(\"detail\"):node_ident>/inventory")
def node_inventory(node_ident: str) -> Response:
    """The inventory and plugin data stored by the last inspection (404 when none)."""
    require(81, 404, "The API version does not allow node inventory")
    c = ctx()
    with c.session() as session:
        node = find_node(session, node_ident)
        row = stored_inventory(session, node)
        if row is None:
            raise ApiError(404, f"Node {node.uuid} has no stored inventory")
        # As the ramdisk sent them, secrets masked: a BMC password, a token, a URL password.
        return jsonify({"inventory": mask_secrets(row.inventory_data),
                        "plugin_data": mask_secrets(row.plugin_data)})
