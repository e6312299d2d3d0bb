"""``/v1/inspection_rules``: create, list, show, patch, delete, delete all, explain."""

from datetime import UTC

from flask import Blueprint, Response, jsonify, request

from inspection.api.context import ctx, json_body, json_object
from inspection.api.errors import ApiError
from inspection.api.nodes_query import find_node, stored_inventory
from inspection.api.pagination import (
    PAGE_ARGS,
    check_args,
    detail_and_fields,
    next_link,
    page_args,
)
from inspection.api.versions import require, resource_links
from inspection.rules import OrmNode, Rule, interface_supported
from inspection.rules.model import PHASES

bp = Blueprint("inspection_rules", __name__)

BASE = "/v1/inspection_rules"
RULE_FIELDS = ("uuid", "priority", "description", "scope", "sensitive", "phase", "built_in",
               "conditions", "actions", "created_at", "updated_at")
#: Sort keys of the list; without one, rules come in run order (phase, priority...).
_SORT_KEYS = ("priority", "uuid", "phase", "description", "scope", "created_at",
              "updated_at")


@bp.before_request
def _rules_need_196() -> None:
    require_rules()


def require_rules() -> None:
    """Below 1.96 Ironic answers 404 to a read and 405 to a write (its controller's
    ``exception_class``), both with this message."""
    require(96, 404 if request.method == "GET" else 405,
            "The API version does not allow inspection rules")


def rule_view(rule: Rule, detail: bool = True, fields: list[str] | None = None) -> dict:
    """A rule as the API shows it: timestamps with their zone (UTC), a self link."""
    data = rule.to_dict(detail=detail or bool(fields))
    for name in ("created_at", "updated_at"):
        value = getattr(rule, name)
        data[name] = value.replace(tzinfo=value.tzinfo or UTC).isoformat() if value else None
    if fields:
        data = {name: data.get(name) for name in fields}
    data["links"] = resource_links(f"inspection_rules/{rule.uuid}")
    return data


@bp.post(BASE)
def create_rule() -> tuple[Response, int, dict]:
    """Validate and store a rule; 201 with its Location."""
    doc = json_object()
    c = ctx()
    with c.session() as session:
        rule = c.rules.create(session, doc)
        body = rule_view(rule)
    return jsonify(body), 201, {"Location": body["links"][0]["href"]}


@bp.get(BASE)
def list_rules() -> Response:
    """Built-in and stored rules in run order (``detail``, ``scope``, ``phase``, ``fields``,
    pages with ``limit``/``marker``, or sorted by ``sort_key``)."""
    check_args(("detail", "scope", "phase", "fields", *PAGE_ARGS))
    detail, fields = detail_and_fields(RULE_FIELDS)
    sorted_by = request.args.get("sort_key")
    page = page_args(_SORT_KEYS, default_key="priority")
    c = ctx()
    with c.session() as session:
        rules = c.rules.list(session, scope=request.args.get("scope"),
                             phase=request.args.get("phase"))
    if sorted_by is not None or "sort_dir" in request.args:
        # None sorts first, as NULL does in the node and port lists.
        rules.sort(key=lambda r: (getattr(r, page.sort_key) is not None,
                                  str(getattr(r, page.sort_key) or ""), r.uuid),
                   reverse=page.sort_dir == "desc")
    if page.marker is not None:
        position = next((i for i, r in enumerate(rules) if r.uuid == page.marker), None)
        if position is None:
            raise ApiError(404, f"Inspection rule {page.marker} could not be found")
        rules = rules[position + 1:]
    rules = rules[:page.limit]
    body: dict = {"inspection_rules": [rule_view(r, detail, fields) for r in rules]}
    following = next_link(len(rules), rules[-1].uuid if rules else None, page, BASE,
                          with_sort=sorted_by is not None or "sort_dir" in request.args)
    if following:
        body["next"] = following
    return jsonify(body)


@bp.get(f"{BASE}/<ident(\"explain\"):rule_id>")
def show_rule(rule_id: str) -> Response:
    """One rule (conditions and actions are null for a sensitive rule)."""
    check_args(())
    c = ctx()
    with c.session() as session:
        return jsonify(rule_view(c.rules.get(session, rule_id)))


@bp.patch(f"{BASE}/<ident(\"explain\"):rule_id>")
def patch_rule(rule_id: str) -> Response:
    """Apply an RFC 6902 JSON patch (add/replace/remove/move/copy/test)."""
    operations = json_body()
    if not isinstance(operations, list) or not all(isinstance(o, dict) for o in operations):
        raise ApiError(400, "The request body must be a JSON patch: a list of operations "
                            "such as {\"op\": \"replace\", \"path\": \"/priority\", "
                            "\"value\": 10}")
    c = ctx()
    with c.session() as session:
        rule = c.rules.patch(session, rule_id, operations,
                             max_size=c.conf.api.max_request_body_size)
        return jsonify(rule_view(rule))


@bp.delete(f"{BASE}/<ident(\"explain\"):rule_id>")
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
