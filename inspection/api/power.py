"""Ironic's power and node-state endpoints: ``PUT /v1/nodes/{node}/states/power``,
``GET /v1/nodes/{node}/states`` and ``GET /v1/nodes/{node}/validate``."""

from flask import Blueprint, Response, jsonify

from inspection.api.context import ctx, json_object
from inspection.api.errors import ApiError
from inspection.api.node_fields import FIELD_VERSIONS
from inspection.api.nodes_query import find_node
from inspection.api.pagination import check_args
from inspection.api.versions import allows, require
from inspection.api.views import shown_state
from inspection.db.models import Node
from inspection.power import drivers
from inspection.power import tasks as power_tasks
from inspection.reservation import reserved_node

bp = Blueprint("power", __name__)

#: Ironic added the soft power targets (and "timeout") in API 1.27.
_SOFT = (drivers.SOFT_REBOOT, drivers.SOFT_POWER_OFF)
#: Interfaces Ironic's validate reports; this service answers for power, management and
#: inspect, and has no other.
_INTERFACES = ("bios", "boot", "console", "deploy", "firmware", "inspect", "management",
               "network", "power", "raid", "rescue", "storage")
_NOT_SERVED = {"result": None, "reason": "not supported by this inspection service"}


def _bmc_validation(node: Node) -> dict:
    """Ironic's validate answer for the power and management interfaces (driver_info only:
    as Ironic, validate does not contact the BMC)."""
    if node.driver == "fake-hardware":
        return {"result": True, "reason": None}
    if node.driver not in drivers.REQUIRED:
        return {"result": False, "reason": f"hardware type {node.driver!r} has no BMC this "
                                           f"service drives (redfish, ipmi); its boot is "
                                           f"not managed"}
    missing = drivers.missing_info(node.driver, node.driver_info)
    if missing:
        return {"result": False, "reason": f"Missing the following {node.driver} "
                                           f"properties in node's driver_info: "
                                           f"{', '.join(missing)}"}
    return {"result": True, "reason": None}


@bp.get("/v1/nodes/<ident(\"detail\"):node_ident>/validate")
def validate(node_ident: str) -> Response:
    """Which interfaces of the node are usable, as Ironic reports them."""
    check_args(())
    c = ctx()
    with c.session() as session:
        node = find_node(session, node_ident)
        bmc = _bmc_validation(node)
        problem = power_tasks.out_of_band_problem(node) if power_tasks.out_of_band(node) \
            else None
        served = {"power": bmc, "management": bmc,
                  "inspect": {"result": not problem, "reason": problem}}
    return jsonify({name: served.get(name, _NOT_SERVED) for name in _INTERFACES})


@bp.get("/v1/nodes/<ident(\"detail\"):node_ident>/states")
def node_states(node_ident: str) -> Response:
    """Power and provision state of the node (Ironic's ``NodeStates``)."""
    check_args(())
    c = ctx()
    with c.session() as session:
        node = find_node(session, node_ident)
        body = {
            "console_enabled": False, "last_error": node.last_error,
            "power_state": node.power_state,
            "provision_state": shown_state(node.provision_state),
            "provision_updated_at": None,  # as on the node: this service keeps no such time
            "target_power_state": node.target_power_state,
            "target_provision_state": node.target_provision_state,
            "raid_config": {}, "target_raid_config": {},
            "boot_mode": node.boot_mode, "secure_boot": node.secure_boot}
        # fields Ironic added later, hidden from older clients as Ironic hides them
        return jsonify({name: value for name, value in body.items()
                        if allows(FIELD_VERSIONS.get(name, 1))})


def _power_target() -> tuple[str, int | None]:
    body = json_object()
    unknown = sorted(set(body) - {"target", "timeout"})
    if unknown:
        raise ApiError(400, f"Unknown field(s) in the request: {', '.join(unknown)}")
    target = body.get("target")
    if not isinstance(target, str) or target not in drivers.POWER_TARGETS:
        raise ApiError(400, f"target must be one of: {', '.join(drivers.POWER_TARGETS)}")
    if target in _SOFT or "timeout" in body:
        require(27, 406, "Request not acceptable.")
    timeout = body.get("timeout")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool)
                                or timeout < 1):
        raise ApiError(400, "timeout must be a positive integer (seconds)")
    if timeout is not None and target not in _SOFT:
        raise ApiError(400, f"timeout is only allowed with {' or '.join(_SOFT)}")
    return target, timeout


@bp.put("/v1/nodes/<ident(\"detail\"):node_ident>/states/power")
def set_power_state(node_ident: str) -> tuple[str, int, dict]:
    """Record a power change for the BMC actor; 202 (Ironic's answer, empty)."""
    target, timeout = _power_target()
    c = ctx()
    with reserved_node(c.engine, c.owner, c.node_id(node_ident)) as task:
        node = task.node
        if node.driver == "fake-hardware":  # Ironic's fake power: done at once
            node.power_state, node.target_power_state = drivers.END_STATE[target], None
        else:
            if not power_tasks.manages_boot(node):
                raise ApiError(400, f"Cannot change the power state of node {node.uuid}: "
                                    f"{_bmc_validation(node)['reason']}")
            if node.target_power_state is not None or node.provision_state in (
                    "verifying", "inspecting"):
                raise ApiError(409, f"Node {node.uuid} is locked by the BMC work in "
                                    f"progress (a power change to "
                                    f"{node.target_power_state or 'boot'}); try again later")
            power_tasks.request(node, target, timeout)
        node_uuid = node.uuid
    c.dispatcher.wake_power()
    return "", 202, {"Location": f"/v1/nodes/{node_uuid}/states"}
