"""``/v1/ports``: list (by node), create, show, delete."""

import uuid as uuidlib

import sqlalchemy as sa
from flask import Blueprint, Response, jsonify, request

from inspection.api.context import ctx, json_object
from inspection.api.errors import ApiError
from inspection.api.nodes_query import find_node, find_port, node_uuids
from inspection.api.views import port_view
from inspection.db.models import Node, Port
from pxe_filter.broadcast import NodePorts
from pxe_filter.common.macs import InvalidMAC, normalize_mac

bp = Blueprint("ports", __name__)

_FIELDS = {"address", "node_uuid", "pxe_enabled", "extra", "local_link_connection",
           "physical_network"}


@bp.get("/v1/ports")
def list_ports() -> Response:
    """Ports, optionally of one node (``?node=`` UUID or name)."""
    c = ctx()
    with c.session() as session:
        query = sa.select(Port).order_by(Port.id)
        ident = request.args.get("node")
        if ident is not None:
            query = query.where(Port.node_id == find_node(session, ident).id)
        ports = list(session.execute(query).scalars())
        uuids = node_uuids(session, {p.node_id for p in ports if p.node_id is not None})
        return jsonify({"ports": [port_view(p, uuids.get(p.node_id)) for p in ports]})


def _check(body: dict) -> list[str]:
    problems = [f"{name}: unknown field" for name in sorted(set(body) - _FIELDS)]
    if not isinstance(body.get("node_uuid"), str):
        problems.append("node_uuid: required (the node's UUID or name)")
    if "pxe_enabled" in body and not isinstance(body["pxe_enabled"], bool):
        problems.append("pxe_enabled: must be true or false")
    for name in ("extra", "local_link_connection"):
        if body.get(name) is not None and not isinstance(body[name], dict):
            problems.append(f"{name}: must be an object")
    network = body.get("physical_network")
    if network is not None and (not isinstance(network, str) or len(network) > 64):
        problems.append("physical_network: must be a string of at most 64 characters")
    return problems


@bp.post("/v1/ports")
def create_port() -> tuple[Response, int, dict]:
    """Add a port (MAC) to a node; 201 with its Location."""
    body = json_object()
    problems = _check(body)
    try:
        address = normalize_mac(body.get("address"))
    except InvalidMAC as exc:
        problems.append(f"address: {exc}")
    if problems:
        raise ApiError(400, "Invalid port: " + "; ".join(problems), problems=problems)
    c = ctx()
    try:
        with c.session() as session:
            node = find_node(session, body["node_uuid"])
            port = Port(uuid=str(uuidlib.uuid4()), address=address, node_id=node.id,
                        pxe_enabled=body.get("pxe_enabled", True),
                        extra=body.get("extra") or {},
                        local_link_connection=body.get("local_link_connection") or {},
                        physical_network=body.get("physical_network"), internal_info={})
            session.add(port)
            session.flush()
            view = port_view(port, node.uuid)
            announced = NodePorts(node.provision_state, node.inspect_interface, (address,))
    except sa.exc.IntegrityError:
        raise ApiError(409, f"A port with MAC address {address} already exists") from None
    # Tell the filters at once: with unknown MACs allowed (discovery, or a node on
    # inspection) the wildcard would otherwise serve this NIC until the next full sync.
    c.notifier.announce(announced)
    return jsonify(view), 201, {"Location": f"/v1/ports/{view['uuid']}"}


@bp.get("/v1/ports/<port_id>")
def show_port(port_id: str) -> Response:
    """One port by UUID."""
    c = ctx()
    with c.session() as session:
        port = find_port(session, port_id)
        uuids = node_uuids(session, {port.node_id} if port.node_id is not None else set())
        return jsonify(port_view(port, uuids.get(port.node_id)))


@bp.delete("/v1/ports/<port_id>")
def delete_port(port_id: str) -> tuple[str, int]:
    """Delete a port."""
    c = ctx()
    with c.session() as session:
        port = find_port(session, port_id)
        address = port.address
        node = session.get(Node, port.node_id) if port.node_id is not None else None
        served = node is not None and c.notifier.served(node.provision_state,
                                                        node.inspect_interface)
        session.delete(port)
    if served and address:
        c.notifier.deny([address])
    return "", 204
