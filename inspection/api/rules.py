"""``/v1/inspection_rules``: create, list, show, patch, delete, delete all, explain."""

from flask import Blueprint, Response, jsonify, request

from inspection.api.context import bool_arg, ctx, json_body, json_object
from inspection.api.errors import ApiError
from inspection.api.nodes_query import find_node, stored_inventory
from inspection.rules import OrmNode, interface_supported
from inspection.rules.model import PHASES

bp = Blueprint("inspection_rules", __name__)

BASE = "/v1/inspection_rules"


@bp.post(BASE)
def create_rule() -> tuple[Response, int, dict]:
    """Validate and store a rule; 201 with its Location."""
    doc = json_object()
    c = ctx()
    with c.session() as session:
        rule = c.rules.create(session, doc)
        body = rule.to_dict(detail=True)
    return jsonify(body), 201, {"Location": f"{BASE}/{rule.uuid}"}


@bp.get(BASE)
def list_rules() -> Response:
    """Built-in and stored rules in run order (``detail``, ``scope``, ``phase`` filters)."""
    detail = bool_arg("detail", False)
    c = ctx()
    with c.session() as session:
        rules = c.rules.list(session, scope=request.args.get("scope"),
                             phase=request.args.get("phase"))
    return jsonify({"inspection_rules": [r.to_dict(detail=bool(detail)) for r in rules]})


@bp.get(f"{BASE}/<rule_id>")
def show_rule(rule_id: str) -> Response:
    """One rule (conditions and actions are null for a sensitive rule)."""
    c = ctx()
    with c.session() as session:
        return jsonify(c.rules.get(session, rule_id).to_dict(detail=True))


@bp.patch(f"{BASE}/<rule_id>")
def patch_rule(rule_id: str) -> Response:
    """Apply an RFC 6902 JSON patch (add/replace/remove/move/copy/test)."""
    operations = json_body()
    if not isinstance(operations, list) or not all(isinstance(o, dict) for o in operations):
        raise ApiError(400, "The request body must be a JSON patch: a list of operations "
                            "such as {\"op\": \"replace\", \"path\": \"/priority\", "
                            "\"value\": 10}")
    c = ctx()
    with c.session() as session:
        rule = c.rules.patch(session, rule_id, operations)
        return jsonify(rule.to_dict(detail=True))


@bp.delete(f"{BASE}/<rule_id>")
def delete_rule(rule_id: str) -> tuple[str, int]:
    """Delete one stored rule (built-in rules: 400)."""
    c = ctx()
    with c.session() as session:
        c.rules.delete(session, rule_id)
    return "", 204


@bp.delete(BASE)
def delete_all_rules() -> tuple[str, int]:
    """Delete every stored rule; built-in rules stay."""
    c = ctx()
    with c.session() as session:
        c.rules.delete_all(session)
    return "", 204


@bp.post(f"{BASE}/explain")
def explain_rules() -> Response:
    """What the rules would do for a node's stored inventory or a given one; changes
    nothing."""
    body = json_object()
    unknown = sorted(set(body) - {"node", "inventory", "plugin_data", "phase"})
    if unknown:
        raise ApiError(400, f"Unknown field(s): {', '.join(unknown)}")
    phase = body.get("phase")
    if phase is not None and phase not in PHASES:
        raise ApiError(400, f"phase must be one of: {', '.join(PHASES)}")
    inventory = body.get("inventory")
    plugin_data = body.get("plugin_data")
    for name, value in (("inventory", inventory), ("plugin_data", plugin_data)):
        if value is not None and not isinstance(value, dict):
            raise ApiError(400, f"{name} must be a JSON object")
    ident = body.get("node")
    if ident is not None and not isinstance(ident, str):
        raise ApiError(400, "node must be a node UUID or name")
    if ident is None and inventory is None:
        raise ApiError(400, "Give a node (its stored inventory is used) or an inventory")
    c = ctx()
    with c.session() as session:
        rules = c.rules.list(session)
        node = adapter = None
        if ident is not None:
            node = find_node(session, ident)
            adapter = OrmNode(session, node)
            if inventory is None:
                stored = stored_inventory(session, node)
                if stored is None:
                    raise ApiError(400, f"Node {node.uuid} has no stored inventory: pass "
                                        f"one in the request")
                inventory = stored.inventory_data or {}
                if plugin_data is None:
                    plugin_data = stored.plugin_data or {}
        reports = c.rules_engine.explain(rules, inventory, plugin_data or {}, adapter,
                                         phase=phase)
        supported = c.conf.inspection_rules.supported_interfaces
        result = {
            "node": node.uuid if node is not None else None,
            "rules_run_for_node": (interface_supported(node.inspect_interface, supported)
                                   if node is not None else None),
            "phase": phase,
            "rules": reports,
        }
        session.rollback()  # explain works on copies; make sure nothing is written
    return jsonify(result)
