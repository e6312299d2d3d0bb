"""Authorisation of Keystone-authenticated requests with oslo.policy, the way Ironic does it.

Each request is matched to an operation (method and path, as the policies document them);
node operations load the node's ``owner`` and ``lessee`` first. A project-scoped user who may
not see a node gets 404, as if it did not exist; lists are narrowed to the nodes (and their
ports) that the user's project owns or leases. With ``noauth`` or ``http_basic`` nothing here
runs: the authenticated user is the admin, as before.
"""

import logging
import re
import sys
from dataclasses import dataclass

import sqlalchemy as sa
from flask import Flask, Response, g, request
from oslo_config import cfg
from oslo_context import context as oslo_context
from oslo_policy import policy

from inspection.api import errors, policies
from inspection.api.context import ctx
from inspection.api.nodes_query import without_json_suffix
from inspection.db.idents import canonical_uuid, node_ident_clause
from inspection.db.models import Node, Port

LOG = logging.getLogger("inspection.api")

_NODE = r"/v1/nodes/(?P<node>(?!detail$)[^/]+)"
_PORT = r"/v1/ports/(?P<port>(?!detail$)[^/]+)"
_RULES = "/v1/inspection_rules"
_CHASSIS = r"/v1/chassis/(?!detail$)[^/]+"

#: Ironic's order: the first prefix a patch path starts with names the rule.
_PATCH_RULES = (
    ("/instance_info", "baremetal:node:update_instance_info"),
    ("/extra", "baremetal:node:update_extra"),
    ("/driver_info", "baremetal:node:update:driver_info"),
    ("/properties", "baremetal:node:update:properties"),
    ("/chassis_uuid", "baremetal:node:update:chassis_uuid"),
    ("/instance_uuid", "baremetal:node:update:instance_uuid"),
    ("/lessee", "baremetal:node:update:lessee"),
    ("/owner", "baremetal:node:update:owner"),
    ("/driver", "baremetal:node:update:driver_interfaces"),
    ("/network_data", "baremetal:node:update:network_data"),
    ("/conductor_group", "baremetal:node:update:conductor_group"),
    ("/name", "baremetal:node:update:name"),
    ("/retired", "baremetal:node:update:retired"),
    ("/shard", "baremetal:node:update:shard"),
    ("/parent_node", "baremetal:node:update:parent_node"),
)
_INTERFACE_PATH = re.compile(r"^/[a-z]+_interface(/|$)")


@dataclass(frozen=True)
class Operation:
    """What a request does: its policy, and what the policy is checked against."""

    method: str
    path: re.Pattern
    rule: str
    kind: str = "plain"  # plain | node | port | list | create_node | create_port | ...


def _op(method: str, path: str, rule: str, kind: str = "plain") -> Operation:
    return Operation(method, re.compile(f"^{path}$"), rule, kind)


OPERATIONS = (
    _op("GET", r"/v1/nodes(/detail)?", "node", "list"),
    _op("POST", r"/v1/nodes", "baremetal:node:create", "create_node"),
    _op("GET", _NODE, "baremetal:node:get", "node"),
    _op("PATCH", _NODE, "baremetal:node:update", "patch_node"),
    _op("DELETE", _NODE, "baremetal:node:delete", "delete_node"),
    _op("PUT", _NODE + "/maintenance", "baremetal:node:set_maintenance", "node"),
    _op("DELETE", _NODE + "/maintenance", "baremetal:node:clear_maintenance", "node"),
    _op("PUT", _NODE + "/states/provision", "baremetal:node:set_provision_state", "node"),
    _op("GET", _NODE + "/traits", "baremetal:node:traits:list", "node"),
    _op("PUT", _NODE + r"/traits(/[^/]+)?", "baremetal:node:traits:set", "node"),
    _op("DELETE", _NODE + r"/traits(/[^/]+)?", "baremetal:node:traits:delete", "node"),
    _op("GET", _NODE + "/inventory", "baremetal:node:inventory:get", "node"),
    _op("GET", _NODE + "/states", "baremetal:node:get_states", "node"),
    _op("PUT", _NODE + "/states/power", "baremetal:node:set_power_state", "node"),
    _op("GET", _NODE + "/validate", "baremetal:node:validate", "node"),
    _op("GET", _NODE + "/children", "baremetal:node:get", "node"),
    _op("GET", r"/v1/shards", "baremetal:shards:get"),
    _op("GET", r"/v1/ports(/detail)?", "port", "list"),
    _op("GET", _NODE + r"/ports(/detail)?", "port", "list"),
    _op("POST", r"/v1/ports", "baremetal:port:create", "create_port"),
    _op("GET", _PORT, "baremetal:port:get", "port"),
    _op("PATCH", _PORT, "baremetal:port:update", "port"),
    _op("DELETE", _PORT, "baremetal:port:delete", "port"),
    _op("GET", _CHASSIS + r"/nodes(/detail)?", "node", "list"),
    _op("GET", r"/v1/chassis(/[^/]+)?", "baremetal:chassis:get"),
    _op("POST", r"/v1/chassis", "baremetal:chassis:create"),
    _op("PATCH", _CHASSIS, "baremetal:chassis:update"),
    _op("DELETE", _CHASSIS, "baremetal:chassis:delete"),
    _op("GET", _RULES + r"(/[^/]+)?", "baremetal:inspection_rule:get"),
    _op("POST", _RULES + "/explain", "baremetal:inspection_rule:get"),
    _op("POST", _RULES, "baremetal:inspection_rule:create"),
    _op("PATCH", _RULES + r"/[^/]+", "baremetal:inspection_rule:update"),
    _op("DELETE", _RULES + r"(/[^/]+)?", "baremetal:inspection_rule:delete"),
    _op("GET", r"/metrics", "baremetal:inspection:metrics"),
)
UNLISTED = "baremetal:inspection:unlisted"


class Forbidden(Exception):
    """The policy refused ``rule``."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


class Concealed(Exception):
    """The user may not even see the node: answer as if it did not exist."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def make_enforcer(conf: cfg.ConfigOpts) -> policy.Enforcer:
    """An enforcer holding our defaults, overridden by ``[oslo_policy]policy_file``."""
    enforcer = policy.Enforcer(conf)
    # As Ironic: all defaults changed at once; one warning per rule would fill the log.
    enforcer.suppress_default_change_warnings = True
    enforcer.register_defaults(policies.list_policies())
    return enforcer


def enforcer_for_tools() -> policy.Enforcer:
    """The enforcer for oslopolicy-checker and oslopolicy-policy-generator."""
    from inspection import conf as inspection_conf  # noqa: PLC0415

    args, skip = [], False
    for arg in sys.argv[1:]:  # the tools' own options are not ours
        if skip:
            skip = False
        elif arg.split("=", 1)[0].strip("-") in ("namespace", "output-file", "output_file"):
            skip = "=" not in arg
        else:
            args.append(arg)
    conf = cfg.ConfigOpts()
    inspection_conf.register_opts(conf)
    conf(args, project="ironic-inspection")
    return make_enforcer(conf)


def request_context() -> oslo_context.RequestContext:
    """The caller's identity as keystonemiddleware's headers give it."""
    return oslo_context.RequestContext.from_environ(request.environ)


class Authorizer:
    """Checks each request of a Keystone-authenticated app against the policies."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        self.enforcer = make_enforcer(conf)

    def creds(self, context: oslo_context.RequestContext) -> dict:
        values = dict(context.to_policy_values())
        values["project_name"] = context.project_name
        if self.conf.rbac_service_role_elevated_access:
            values["config.service_project_name"] = self.conf.rbac_service_project_name
        return values

    def allowed(self, rule: str, target: dict, creds: dict) -> bool:
        try:
            return bool(self.enforcer.authorize(rule, target, creds, do_raise=False))
        except policy.InvalidScope:
            return False

    def check(self, rule: str, target: dict, creds: dict) -> None:
        if not self.allowed(rule, target, creds):
            raise Forbidden(rule)

    def check_node(self, rule: str, node: tuple[str | None, str | None] | None,
                   creds: dict, missing: str = "") -> dict:
        """Check ``rule`` on a node (owner, lessee); None (no such node) passes to the
        handler, which answers 404. ``missing`` is the 404 message that hides the node."""
        if node is None:
            return dict(creds)
        target = {**creds, "node.owner": node[0], "node.lessee": node[1]}
        if not self.allowed("baremetal:node:get", target, creds):
            if creds.get("project_id"):  # as Ironic: hide the node from other projects
                raise Concealed(missing or "The resource could not be found")
            raise Forbidden("baremetal:node:get")
        self.check(rule, target, creds)
        return target

    def check_list(self, kind: str, creds: dict) -> str | None:
        """None when the user may list everything, else the project to narrow to."""
        if self.allowed(f"baremetal:{kind}:list_all", creds, creds):
            return None
        project = creds.get("project_id")
        owner = request.args.get("owner")
        if not project or (owner and owner != project):
            raise Forbidden(f"baremetal:{kind}:list_all")
        self.check(f"baremetal:{kind}:list", creds, creds)
        return project


def _node_of(ident: str) -> tuple[str | None, str | None] | None:
    with ctx().session() as session:
        row = session.execute(sa.select(Node.owner, Node.lessee)
                              .where(node_ident_clause(ident))).first()
    stripped = without_json_suffix(ident) if row is None else None
    if stripped:  # the node the handler will find
        return _node_of(stripped)
    return None if row is None else (row.owner, row.lessee)


def _node_of_port(ident: str) -> tuple[str | None, str | None] | None:
    uuid = canonical_uuid(ident)
    if uuid is None:
        return None
    with ctx().session() as session:
        row = session.execute(sa.select(Node.owner, Node.lessee)
                              .join(Port, Port.node_id == Node.id)
                              .where(Port.uuid == uuid)).first()
    return None if row is None else (row.owner, row.lessee)


def _patch_rules() -> list[str]:
    body = request.get_json(silent=True)
    rules: list[str] = []
    generic = False
    # A move writes where it reads from (it removes the value there) as well as its path.
    paths = [op.get(key) for op in body if isinstance(op, dict) for key in ("path", "from")
             if key == "path" or op.get("op") == "move"] if isinstance(body, list) else []
    for path in paths:
        if not isinstance(path, str):
            continue
        rule = next((name for prefix, name in _PATCH_RULES if path.startswith(prefix)), None)
        if rule is None and _INTERFACE_PATH.match(path):
            rule = "baremetal:node:update:driver_interfaces"
        if rule is None:
            generic = True
        elif rule not in rules:
            rules.append(rule)
    if generic or not rules:
        rules.append("baremetal:node:update")
    return rules


def authorize(authorizer: Authorizer, creds: dict) -> None:
    """Raise Forbidden or Concealed unless the policies allow this request."""
    operation = next((op for op in OPERATIONS if op.method == request.method
                      and op.path.match(request.path)), None)
    if operation is None:
        authorizer.check(UNLISTED, creds, creds)
        return
    match = operation.path.match(request.path)
    kind = operation.kind
    if kind == "plain":
        authorizer.check(operation.rule, creds, creds)
    elif kind == "list":
        g.policy_project = authorizer.check_list(operation.rule, creds)
    elif kind == "create_node":
        if not authorizer.allowed(operation.rule, creds, creds):
            body = request.get_json(silent=True)
            wanted = body.get("owner") if isinstance(body, dict) else None
            project = creds.get("project_id")
            if not project or (wanted and wanted != project):
                raise Forbidden(operation.rule)
            authorizer.check("baremetal:node:create:self_owned_node", creds, creds)
            g.policy_owner = project  # as Ironic: the node belongs to the creator's project
    elif kind == "create_port":
        body = request.get_json(silent=True)
        node_uuid = body.get("node_uuid") if isinstance(body, dict) else None
        node = _node_of(node_uuid) if isinstance(node_uuid, str) else None
        target = creds if node is None else \
            {**creds, "node.owner": node[0], "node.lessee": node[1]}
        authorizer.check(operation.rule, target, creds)
    elif kind == "port":
        ident = match["port"]
        authorizer.check_node(operation.rule, _node_of_port(ident), creds,
                              f"Port {ident[:64]} could not be found")
    else:
        ident = match["node"]
        node, missing = _node_of(ident), f"Node {ident[:64]} could not be found"
        if kind == "node":
            authorizer.check_node(operation.rule, node, creds, missing)
        elif kind == "patch_node":
            for rule in _patch_rules():
                target = authorizer.check_node(rule, node, creds, missing)
            if node is not None:  # else the handler answers 404
                _check_patch_reads(authorizer, target, creds)
        elif kind == "delete_node":
            try:
                authorizer.check_node(operation.rule, node, creds, missing)
            except Forbidden:
                authorizer.check_node("baremetal:node:delete:self_owned_node", node, creds,
                                      missing)


def visible(node: Node) -> bool:
    """Whether this user may see ``node`` (always, without Keystone)."""
    authorizer, creds = g.get("authorizer"), g.get("policy_creds")
    if authorizer is None or creds is None:
        return True
    target = {**creds, "node.owner": node.owner, "node.lessee": node.lessee}
    return authorizer.allowed("baremetal:node:get", target, creds)


def check_touched(rule: str, node: Node, missing: str = "") -> None:
    """Check ``rule`` on a node the request touches besides the one its URL names (a
    port's node, a port's destination), as read under the reservation: 404 when the user
    may not see it, 403 when the rule refuses. Nothing to check without Keystone."""
    authorizer, creds = g.get("authorizer"), g.get("policy_creds")
    if authorizer is None or creds is None:
        return
    missing = missing or f"Node {node.uuid} could not be found"
    try:
        authorizer.check_node(rule, (node.owner, node.lessee), creds, missing)
    except Concealed as exc:
        LOG.info("Refused %s %s to project %s: node %s is not visible to it (%s)",
                 request.method, request.path[:200], creds.get("project_id"), node.uuid, rule)
        raise errors.ApiError(404, exc.message) from None
    except Forbidden as exc:
        LOG.info("Refused %s %s to project %s on node %s: policy %s", request.method,
                 request.path[:200], creds.get("project_id"), node.uuid, exc.rule)
        raise errors.ApiError(
            403, f"Access was denied to the following resource: {exc.rule}") from None


def policy_project() -> str | None:
    """The project a list is narrowed to by the policies (None: no narrowing)."""
    return g.get("policy_project")


#: Fields hidden from users who may see a node but fail the field's rule, as Ironic words it.
_REDACTED = (
    ("last_error", "baremetal:node:get:last_error",
     "** Value Redacted - Requires baremetal:node:get:last_error permission. **"),
    ("reservation", "baremetal:node:get:reservation",
     "** Redacted - requires baremetal:node:get:reservation permission. **"),
    ("driver_internal_info", "baremetal:node:get:driver_internal_info",
     {"content": "** Redacted - Requires baremetal:node:get:driver_internal_info "
                 "permission. **"}),
    ("driver_info", "baremetal:node:get:driver_info",
     {"content": "** Redacted - requires baremetal:node:get:driver_info permission. **"}),
)


def _check_patch_reads(authorizer: Authorizer, target: dict, creds: dict) -> None:
    """Refuse a patch that reads (``copy``/``move`` from, ``test``) a field the policies
    hide from this user: it would show, probe or move what the user may not see."""
    body = request.get_json(silent=True)
    if authorizer.allowed("baremetal:node:get:filter_threshold", target, creds):
        return
    for op in body if isinstance(body, list) else []:
        kind = op.get("op") if isinstance(op, dict) else None
        path = op.get("path" if kind == "test" else "from") if kind in (
            "test", "copy", "move") else None
        if not isinstance(path, str):
            continue
        for field, rule, _ in _REDACTED:
            if (path == f"/{field}" or path.startswith(f"/{field}/")) \
                    and not authorizer.allowed(rule, target, creds):
                raise Forbidden(rule)


def redact_node(view: dict, owner: str | None, lessee: str | None) -> dict:
    """``view`` without the fields this user's policies hide (Ironic's node_sanitize)."""
    authorizer, creds = g.get("authorizer"), g.get("policy_creds")
    if authorizer is None or creds is None:
        return view  # noauth, http_basic: the admin sees everything
    target = {**creds, "node.owner": owner, "node.lessee": lessee}
    if authorizer.allowed("baremetal:node:get:filter_threshold", target, creds):
        return view
    for field, rule, hidden in _REDACTED:
        if field in view and not authorizer.allowed(rule, target, creds):
            view[field] = hidden
    return view


def narrow_nodes(query: sa.Select) -> sa.Select:
    """``query`` of nodes limited to those the policies let this user list."""
    project = policy_project()
    if project is None:
        return query
    return query.where(sa.or_(Node.owner == project, Node.lessee == project))


def narrow_ports(query: sa.Select) -> sa.Select:
    """``query`` of ports limited to the ports of the nodes this user may list."""
    project = policy_project()
    if project is None:
        return query
    return query.where(Port.node_id.in_(sa.select(Node.id).where(
        sa.or_(Node.owner == project, Node.lessee == project))))


def policy_owner() -> str | None:
    """The owner the policies give a node created by a project-scoped user."""
    return g.get("policy_owner")


def install(app: Flask, conf: cfg.ConfigOpts, public_endpoints: frozenset[str]) -> None:
    """Check every non-public request against the policies ([api]auth_strategy=keystone)."""
    authorizer = Authorizer(conf)

    @app.before_request
    def enforce() -> Response | None:
        if request.endpoint in public_endpoints or request.url_rule is None:
            return None  # open endpoints; unknown paths get their 404 or 405
        context = request_context()
        g.authorizer, g.policy_creds = authorizer, authorizer.creds(context)
        try:
            authorize(authorizer, g.policy_creds)
        except Concealed as exc:
            return errors.json_error(404, exc.message)
        except Forbidden as exc:
            LOG.info("Refused %s %s to user %s of project %s: policy %s", request.method,
                     request.path[:200], context.user_id, context.project_id, exc.rule)
            return errors.json_error(
                403, f"Access was denied to the following resource: {exc.rule}")
        return None
