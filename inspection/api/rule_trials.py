"""``POST /v1/inspection_rules/test``: what rules not stored yet would do to stored nodes.

Body: ``{"rules": [rule, ...], "nodes": [UUID or name, ...]}`` (``nodes`` optional: every
node with stored inspection data, a page at a time with ``?limit=`` and ``?marker=``).
Answer: ``{"results": [{"node", "matched", "changes"[, "error"]}], "next"?}``. Nothing is
written: the rules run on copies (:mod:`inspection.rules.dry_run`) and the session is rolled
back.
"""

import sqlalchemy as sa
from flask import Blueprint, Response, jsonify, request

from inspection.api.context import ctx, json_object
from inspection.api.errors import ApiError
from inspection.api.nodes_query import find_node, stored_inventory
from inspection.api.pagination import check_args, next_link, page_args
from inspection.api.rules import require_rules
from inspection.db.models import Node, NodeInventory
from inspection.processing.pipeline import rules_enabled
from inspection.rules import OrmNode, Rule, RuleValidationError, validate_rule
from inspection.rules.dry_run import quiet_engine, try_rules

bp = Blueprint("inspection_rule_trials", __name__)

PATH = "/v1/inspection_rules/test"
#: Most rules one request may try (a file of rules, not a rule base).
MAX_RULES = 100


@bp.before_request
def _rules_need_196() -> None:
    require_rules()


def _rules(docs: object) -> list[Rule]:
    if isinstance(docs, dict):
        docs = [docs]
    if not isinstance(docs, list) or not docs or len(docs) > MAX_RULES:
        raise ApiError(400, f"rules must be a rule or a list of 1 to {MAX_RULES} rules")
    repository = ctx().rules
    rules, problems = [], []
    for index, doc in enumerate(docs, 1):
        try:
            # As creating them would store them: the default scope fills a missing one.
            rules.append(validate_rule(doc, registry=repository.registry,
                                       default_scope=repository.default_scope))
        except RuleValidationError as exc:
            problems += [f"rule {index}: {p}" for p in exc.problems]
    if problems:
        raise ApiError(400, "Invalid inspection rule(s): " + "; ".join(problems),
                       problems=problems)
    return rules


def _named_nodes(session, idents: object) -> list[Node]:
    limit = ctx().conf.api.max_limit
    if not isinstance(idents, list) or not idents or len(idents) > limit \
            or not all(isinstance(i, str) for i in idents):
        raise ApiError(400, f"nodes must be a list of 1 to {limit} node UUIDs or names")
    return [find_node(session, ident) for ident in dict.fromkeys(idents)]


def _stored_nodes(session, limit: int, marker: str | None) -> list[Node]:
    query = sa.select(Node).where(sa.exists().where(NodeInventory.node_id == Node.id))
    if marker is not None:
        marker_id = session.scalar(sa.select(Node.id).where(Node.uuid == marker))
        if marker_id is None:
            raise ApiError(400, f"Marker {marker} is not a node")
        query = query.where(Node.id > marker_id)
    return list(session.scalars(query.order_by(Node.id).limit(limit)))


@bp.post(PATH)
def test_rules() -> Response:
    """Run the given rules on each node's stored inventory and plugin data; writes nothing."""
    check_args(("limit", "marker"))
    body = json_object()
    unknown = sorted(set(body) - {"rules", "nodes"})
    if unknown:
        raise ApiError(400, f"Unknown field(s): {', '.join(unknown)}")
    rules = _rules(body.get("rules"))
    named = body.get("nodes")
    if named is not None and request.args:
        raise ApiError(400, "limit and marker page through every node with stored data; "
                            "they cannot be used with nodes")
    page = page_args(("id",))
    c = ctx()
    engine = quiet_engine(c.rules_engine)
    results = []
    with c.session() as session:
        nodes = _named_nodes(session, named) if named is not None else \
            _stored_nodes(session, page.limit, page.marker)
        for node in nodes:
            results.append(_row(session, engine, rules, node))
        last = nodes[-1].uuid if nodes else None
        session.rollback()  # the rules ran on copies; make sure nothing is written
    answer: dict = {"results": results}
    if named is None:
        following = next_link(len(nodes), last, page, PATH, with_sort=False)
        if following:
            answer["next"] = following
    return jsonify(answer)


def _row(session, engine, rules: list[Rule], node: Node) -> dict:
    stored = stored_inventory(session, node)
    if stored is None:
        return {"node": node.uuid, "matched": False, "changes": [],
                "error": "the node has no stored inspection data"}
    if not rules_enabled(ctx().conf, node):
        return {"node": node.uuid, "matched": False, "changes": [],
                "error": f"rules do not run for inspect interface {node.inspect_interface} "
                         f"([inspection_rules]supported_interfaces)"}
    result = try_rules(engine, rules, stored.inventory_data or {}, stored.plugin_data or {},
                       OrmNode(session, node))
    return {"node": node.uuid, **result}
