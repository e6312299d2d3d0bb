"""``/v1/ports``: list (by node), create, show, delete."""

import uuid as uuidlib
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from flask import Blueprint, Response, jsonify, request
from sqlalchemy.orm import Session

from inspection.api import authz
from inspection.api.context import ctx, json_body, json_object, to_bool
from inspection.api.errors import ApiError, integrity_error
from inspection.api.nodes_query import NAMES_MINOR, find_node, find_port, node_uuids
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
from inspection.api.patching import PORT_DEFAULTS, PORT_PATCHABLE, check_port, size_problems
from inspection.api.patching import apply as apply_patch
from inspection.api.versions import allows, require_for
from inspection.api.views import PORT_FIELD_VERSIONS, PORT_FIELDS, port_view
from inspection.db.idents import canonical_uuid, is_uuid
from inspection.db.models import Node, Port
from inspection.errors import NotFound
from inspection.reservation import NodeTask, reserved_node
from pxe_filter.broadcast import NodePorts
from pxe_filter.common.macs import InvalidMAC, normalize_mac

bp = Blueprint("ports", __name__)

_FIELDS = {"uuid", "address", "node_uuid", "pxe_enabled", "extra", "local_link_connection",
           "physical_network"}
_FILTERS = ("node", "node_uuid", "address", "pxe_enabled")
#: Filters of Ironic's this service lacks (no port groups, no port shards): below Ironic's
#: version they get its 406, from it the 400 of an unknown parameter.
_UNSERVED_FILTER_VERSIONS = {"portgroup": 24, "shard": 82}
#: The fields whose version Ironic checks when they are asked for or sorted by (all but
#: ``internal_info``, which it only hides).
_CHECKED_VERSIONS = {name: minor for name, minor in PORT_FIELD_VERSIONS.items()
                     if name != "internal_info"}
_SORT_KEYS = {name: getattr(Port, name) for name in (
    "id", "uuid", "address", "pxe_enabled", "physical_network", "created_at", "updated_at")}


def _list(path: str, detail_path: bool, node_ident: str | None = None) -> Response:
    for name, minor in _UNSERVED_FILTER_VERSIONS.items():
        if name in request.args:
            require_for(minor, f"filtering ports by {name}")
    check_args((*_FILTERS, *PAGE_ARGS, *(() if detail_path else ("detail", "fields"))))
    _, fields = detail_and_fields(PORT_FIELDS, detail_path, _CHECKED_VERSIONS)
    page = page_args(_SORT_KEYS, versions=_CHECKED_VERSIONS)
    node_uuid = uuid_arg("node_uuid")
    ident = node_ident if node_ident is not None else request.args.get("node")
    if ident is not None and node_uuid is not None:
        raise ApiError(400, "Specify only one of node and node_uuid")
    if node_ident is None and ident is not None and not is_uuid(ident):
        require_for(NAMES_MINOR, "filtering ports by a node name")
    address = request.args.get("address")
    query = authz.narrow_ports(sa.select(Port))
    if address is not None:
        try:
            query = query.where(Port.address == normalize_mac(address))
        except InvalidMAC:
            raise ApiError(400, f"Expected valid MAC address for address: "
                                f"{address[:64]}") from None
    pxe = bool_filter("pxe_enabled")
    if pxe is not None:
        query = query.where(sa.func.coalesce(Port.pxe_enabled, True) == pxe)
    c = ctx()
    with c.session() as session:
        if ident is not None or node_uuid is not None:
            wanted = ident if ident is not None else str(node_uuid)
            node = find_node(session, wanted)
            if not authz.visible(node):  # as Ironic: another project's node does not exist
                raise ApiError(404, f"Node {wanted[:64]} could not be found")
            query = query.where(Port.node_id == node.id)
        marker = find_port(session, page.marker) if page.marker else None
        query, more = fit_page(session, paginate(query, Port, page, _SORT_KEYS, marker), Port,
                               (Port.extra, Port.local_link_connection, Port.internal_info),
                               ctx().conf.api.max_page_bytes)
        ports = session.execute(query).scalars().all()
        uuids = node_uuids(session, {p.node_id for p in ports if p.node_id is not None})
        body: dict = {"ports": [port_view(p, uuids.get(p.node_id), fields) for p in ports]}
    following = next_link(len(ports), ports[-1].uuid if ports else None, page, path,
                          more=more)
    if following:
        body["next"] = following
    return jsonify(body)


@bp.get("/v1/ports")
def list_ports() -> Response:
    """Ports, filtered by node, address or pxe_enabled, sorted and paged as in Ironic."""
    return _list("/v1/ports", detail_path=False)


@bp.get("/v1/nodes/<ident(\"detail\"):node_ident>/ports")
def list_node_ports(node_ident: str) -> Response:
    """A node's ports (Ironic's sub-resource; as ``GET /v1/ports?node=``)."""
    return _list(f"/v1/nodes/{node_ident}/ports", detail_path=False, node_ident=node_ident)


@bp.get("/v1/nodes/<ident(\"detail\"):node_ident>/ports/detail")
def list_node_ports_detail(node_ident: str) -> Response:
    """A node's ports with every field."""
    return _list(f"/v1/nodes/{node_ident}/ports/detail", detail_path=True,
                 node_ident=node_ident)


@bp.get("/v1/ports/detail")
def list_ports_detail() -> Response:
    """Ports with every field (Ironic's ``/v1/ports/detail``, used by ``port list --long``)."""
    return _list("/v1/ports/detail", detail_path=True)


def _check(body: dict) -> list[str]:
    problems = [f"{name}: unknown field" for name in sorted(set(body) - _FIELDS)]
    if not isinstance(body.get("node_uuid"), str):
        problems.append("node_uuid: required (the node's UUID or name)")
    if "pxe_enabled" in body:
        try:
            body["pxe_enabled"] = to_bool("pxe_enabled", body["pxe_enabled"])
        except ApiError as exc:
            problems.append(exc.message)
    for name in ("extra", "local_link_connection"):
        if body.get(name) is not None and not isinstance(body[name], dict):
            problems.append(f"{name}: must be an object")
    network = body.get("physical_network")
    if network is not None and (not isinstance(network, str) or len(network) > 64):
        problems.append("physical_network: must be a string of at most 64 characters")
    if body.get("uuid") is not None and canonical_uuid(body["uuid"]) is None:
        problems.append("uuid: must be a UUID")
    return problems


def _port_node(session: Session, ident: str) -> Node:
    """The node a port is put on: 400 when there is none, as Ironic answers."""
    try:
        return find_node(session, ident)
    except NotFound:
        raise ApiError(400, f"Node {ident[:64]} could not be found.") from None


@bp.post("/v1/ports")
def create_port() -> tuple[Response, int, dict]:
    """Add a port (MAC) to a node; 201 with its Location."""
    body = json_object()
    for name, value in body.items():  # newer than the request's version: 406, as Ironic
        if value is not None and not allows(PORT_FIELD_VERSIONS.get(name, 1)):
            require_for(PORT_FIELD_VERSIONS[name], f"setting the port field {name}")
    problems = _check(body) + size_problems(body, ctx().conf.inspection_rules.max_node_size,
                                            "port")
    try:
        address = normalize_mac(body.get("address"))
    except InvalidMAC as exc:
        problems.append(f"address: {exc}")
    if problems:
        raise ApiError(400, "Invalid port: " + "; ".join(problems), problems=problems)
    c = ctx()
    try:
        with c.session() as session:  # an unknown node is a bad request, as in Ironic
            node_ident = _port_node(session, body["node_uuid"]).uuid
        port_uuid = canonical_uuid(body["uuid"]) if body.get("uuid") else str(uuidlib.uuid4())
        with reserved_node(c.engine, c.owner, node_ident, notifier=c.notifier) as task:
            node, session = task.node, task.session
            # Checked again under the reservation: the owner may have changed since.
            authz.check_touched("baremetal:port:create", node)
            port = Port(uuid=port_uuid, address=address, node_id=node.id,
                        pxe_enabled=body.get("pxe_enabled", True),
                        extra=body.get("extra") or {},
                        local_link_connection=body.get("local_link_connection") or {},
                        physical_network=body.get("physical_network"), internal_info={})
            session.add(port)
            session.flush()
            view = port_view(port, node.uuid)
            # Tell the filters at once: with unknown MACs allowed (discovery, or a node on
            # inspection) the wildcard would otherwise serve this NIC until the next sync.
            task.announce(NodePorts(node.provision_state, node.inspect_interface, (address,)))
    except sa.exc.IntegrityError as exc:
        raise integrity_error(exc, f"A port with MAC address {address} or UUID {port_uuid} "
                                   f"already exists", "port") from None
    return jsonify(view), 201, {"Location": view["links"][0]["href"]}


@bp.get("/v1/ports/<ident(\"detail\"):port_id>")
def show_port(port_id: str) -> Response:
    """One port by UUID (only ``fields`` if given)."""
    check_args(("fields",))
    fields = fields_arg(PORT_FIELDS, _CHECKED_VERSIONS)
    c = ctx()
    with c.session() as session:
        port = find_port(session, port_id)
        uuids = node_uuids(session, {port.node_id} if port.node_id is not None else set())
        return jsonify(port_view(port, uuids.get(port.node_id), fields))


@bp.patch("/v1/ports/<ident(\"detail\"):port_id>")
def patch_port(port_id: str) -> Response:
    """Apply an RFC 6902 patch (address, node, pxe_enabled, ...); 200 with the port.

    The PXE filters hear of it at once: a moved address is closed where it was served and
    announced under its (new) node.
    """
    check_args(())
    body = json_body()
    for op in body if isinstance(body, list) else ():
        field = str(op.get("path", "")).lstrip("/").split("/", 1)[0] \
            if isinstance(op, dict) else ""
        if not allows(PORT_FIELD_VERSIONS.get(field, 1)):
            require_for(PORT_FIELD_VERSIONS[field], f"changing the port field {field}")
    c = ctx()
    try:
        with _port_task(c, port_id) as (task, port):
            session, old_node = task.session, task.node
            before = {name: getattr(port, name) for name in PORT_PATCHABLE if name != "node_uuid"}
            before["node_uuid"] = old_node.uuid
            before["pxe_enabled"] = True if before["pxe_enabled"] is None else \
                bool(before["pxe_enabled"])
            values = check_port(apply_patch(before, body, PORT_PATCHABLE,
                                            {**PORT_DEFAULTS, "address": None,
                                             "node_uuid": None},
                                            c.conf.inspection_rules.max_node_size, what="port"))
            node = old_node
            if values["node_uuid"] != before["node_uuid"]:
                # A move changes the destination too: it is reserved, and the user must be
                # allowed to change its ports (Ironic authorises every node it touches).
                node = task.reserve(_port_node(session, values["node_uuid"]).id)
                authz.check_touched("baremetal:port:update", node,
                                    f"Node {values['node_uuid'][:64]} could not be found")
            old_address = port.address
            for name, value in values.items():
                if name != "node_uuid" and value != before[name]:
                    setattr(port, name, value)
            port.node_id = node.id
            session.flush()
            view = port_view(port, node.uuid)
            if old_address != port.address or old_node.id != node.id:
                if old_address and old_address != port.address and c.notifier.served(
                        old_node.provision_state, old_node.inspect_interface):
                    task.deny([old_address])
                task.announce(NodePorts(node.provision_state, node.inspect_interface,
                                        (port.address,)))
    except sa.exc.IntegrityError as exc:
        raise integrity_error(exc, "A port with this MAC address already exists",
                              "port") from None
    return jsonify(view)


@bp.delete("/v1/ports/<ident(\"detail\"):port_id>")
def delete_port(port_id: str) -> tuple[str, int]:
    """Delete a port (under its node's reservation)."""
    c = ctx()
    with _port_task(c, port_id) as (task, port):
        if port.address and c.notifier.served(task.node.provision_state,
                                              task.node.inspect_interface):
            task.deny([port.address])
        task.session.delete(port)
    return "", 204


@contextmanager
def _port_task(c, port_id: str) -> Iterator[tuple[NodeTask, Port]]:
    """The port under its node's reservation, read again and authorised under it."""
    with c.session() as session:
        node_id = find_port(session, port_id).node_id
    if node_id is None:
        raise ApiError(409, f"Port {port_id[:64]} belongs to no node; it cannot be changed "
                            f"here")
    with reserved_node(c.engine, c.owner, node_id, notifier=c.notifier) as task:
        port = find_port(task.session, port_id)
        if port.node_id != node_id:  # moved meanwhile
            raise ApiError(409, f"Port {port_id[:64]} was moved to another node meanwhile; "
                                f"try again")
        rule = {"PATCH": "baremetal:port:update", "DELETE": "baremetal:port:delete"}
        authz.check_touched(rule[request.method], task.node,
                            f"Port {port_id[:64]} could not be found")
        yield task, port
