"""Default policies of the API: Ironic 39's rule names and defaults for what this service serves.

System admins may do everything, system readers read, project-scoped users act on the nodes
their project owns (``node.owner``) or leases (``node.lessee``), as Ironic's defaults say. The
pre-RBAC rules (``rule:is_admin``...) remain as the deprecated rules Ironic declares, so that
``[oslo_policy]enforce_new_defaults = false`` behaves as in Ironic.
"""

import itertools
from collections.abc import Iterable

from oslo_policy import policy

# Personas, spelled as Ironic's policy module spells them.
SYSTEM_ADMIN = "role:admin and system_scope:all"
SYSTEM_MEMBER = "(role:member and system_scope:all) or rule:service_role"
SYSTEM_READER = ("(role:reader and system_scope:all) or (role:service and system_scope:all) "
                 "or rule:service_role")
SYSTEM_SERVICE = "role:service and system_scope:all"
PROJECT_SERVICE = "role:service and project_id:%(node.owner)s"
PROJECT_ADMIN = "role:admin and project_id:%(node.owner)s"
PROJECT_MEMBER = "role:member and (project_id:%(node.owner)s or project_id:%(node.lessee)s)"
PROJECT_READER = "role:reader and (project_id:%(node.owner)s or project_id:%(node.lessee)s)"
OWNER_ADMIN = "role:admin and project_id:%(node.owner)s"
OWNER_MANAGER = "role:manager and project_id:%(node.owner)s"
OWNER_MEMBER = "role:member and project_id:%(node.owner)s"
OWNER_READER = "role:reader and project_id:%(node.owner)s"
LESSEE_ADMIN = "role:admin and project_id:%(node.lessee)s"
LESSEE_MANAGER = "role:manager and project_id:%(node.lessee)s"
API_READER = "(role:reader) or (role:service)"


def _any(*checks: str) -> str:
    return " or ".join(f"({check})" for check in checks)


SYSTEM_OR_PROJECT_MEMBER = _any(SYSTEM_MEMBER, PROJECT_MEMBER, SYSTEM_SERVICE)
SYSTEM_OR_PROJECT_READER = _any(SYSTEM_READER, PROJECT_READER, PROJECT_SERVICE)
SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN = _any(SYSTEM_MEMBER, SYSTEM_SERVICE, OWNER_MEMBER,
                                               LESSEE_ADMIN, LESSEE_MANAGER, PROJECT_SERVICE)
SYSTEM_ADMIN_OR_OWNER_ADMIN = _any(SYSTEM_ADMIN, SYSTEM_SERVICE, OWNER_ADMIN, OWNER_MANAGER,
                                   PROJECT_SERVICE)
SYSTEM_MEMBER_OR_OWNER_ADMIN = _any(SYSTEM_MEMBER, SYSTEM_SERVICE, OWNER_ADMIN, OWNER_MANAGER,
                                    PROJECT_SERVICE)
SYSTEM_MEMBER_OR_OWNER_MEMBER = _any(SYSTEM_MEMBER, SYSTEM_SERVICE, OWNER_MEMBER,
                                     PROJECT_SERVICE)
SYSTEM_OR_OWNER_READER = _any(SYSTEM_READER, SYSTEM_SERVICE, OWNER_READER, PROJECT_SERVICE)

SCOPES = ["system", "project"]
_LEGACY = "Pre-RBAC default rule: it knows no scopes and is deprecated, as in Ironic."
_DEPRECATED_SINCE = "W"  # Ironic deprecated its pre-RBAC rules in Wallaby
_NODE_REASON = ("The node and port APIs know system scope and the default roles; the "
                "pre-RBAC admin project rules will go, as in Ironic.")

NODE = "/v1/nodes/{node_ident}"
PORT = "/v1/ports/{port_ident}"
RULE = "/v1/inspection_rules/{rule_id}"


def _deprecated(name: str, check: str) -> policy.DeprecatedRule:
    return policy.DeprecatedRule(name=name, check_str=check, deprecated_reason=_NODE_REASON,
                                 deprecated_since=_DEPRECATED_SINCE)


def _rule(name: str, check: str, description: str, operations: Iterable[tuple[str, str]],
          deprecated: str | None = None) -> policy.DocumentedRuleDefault:
    return policy.DocumentedRuleDefault(
        name=name, check_str=check, scope_types=SCOPES, description=description,
        operations=[{"path": path, "method": method} for method, path in operations],
        deprecated_rule=_deprecated(name, deprecated) if deprecated else None)


def _legacy(name: str, check: str, description: str) -> policy.RuleDefault:
    return policy.RuleDefault(name, check, description=description,
                              deprecated_for_removal=True, deprecated_reason=_LEGACY,
                              deprecated_since=_DEPRECATED_SINCE)


general_policies = [
    _legacy("admin_api", "role:admin or role:administrator",
            "Legacy rule for cloud admin access"),
    policy.RuleDefault("service_role",
                       "role:service and project_name:%(config.service_project_name)s",
                       description="Service role users of the service project "
                                   "([DEFAULT]rbac_service_project_name), as in Ironic."),
    _legacy("is_member", "(project_domain_id:default or project_domain_id:None) and "
                         "(project_name:demo or project_name:baremetal)",
            "May be used to restrict access to specific projects"),
    _legacy("is_observer", "rule:is_member and (role:observer or role:baremetal_observer)",
            "Read-only API access"),
    _legacy("is_admin", "rule:admin_api or (rule:is_member and role:baremetal_admin)",
            "Full read/write API access"),
]

_GET = "rule:is_admin or rule:is_observer"
_ADMIN = "rule:is_admin"
_UPDATE = ("PATCH", NODE)

node_policies = [
    _rule("baremetal:node:create", _any(SYSTEM_ADMIN, SYSTEM_SERVICE), "Create Node records",
          [("POST", "/v1/nodes")], _ADMIN),
    _rule("baremetal:node:create:self_owned_node", "(role:admin) or (role:service)",
          "Create node records owned by the project of the user.", [("POST", "/v1/nodes")]),
    _rule("baremetal:node:list", API_READER,
          "Retrieve the Node records of the project of the user (owner or lessee)",
          [("GET", "/v1/nodes"), ("GET", "/v1/nodes/detail")], "rule:baremetal:node:get"),
    _rule("baremetal:node:list_all", SYSTEM_READER, "Retrieve all Node records",
          [("GET", "/v1/nodes"), ("GET", "/v1/nodes/detail")], "rule:baremetal:node:get"),
    _rule("baremetal:node:get", SYSTEM_OR_PROJECT_READER, "Retrieve a single Node record",
          [("GET", NODE)], _GET),
    _rule("baremetal:node:get:filter_threshold", SYSTEM_READER,
          "Users who fail it see the fields below only if their own rules allow",
          [("GET", NODE)], _GET),
    _rule("baremetal:node:get:last_error", SYSTEM_OR_OWNER_READER,
          "See last_error (else redacted)", [("GET", NODE)], _GET),
    _rule("baremetal:node:get:reservation", SYSTEM_OR_OWNER_READER,
          "See reservation (else redacted)", [("GET", NODE)], _GET),
    _rule("baremetal:node:get:driver_internal_info", SYSTEM_OR_OWNER_READER,
          "See driver_internal_info (else redacted)", [("GET", NODE)], _GET),
    _rule("baremetal:node:get:driver_info", SYSTEM_OR_OWNER_READER,
          "See driver_info (else redacted)", [("GET", NODE)], _GET),
    _rule("baremetal:node:update:driver_info", SYSTEM_MEMBER_OR_OWNER_MEMBER,
          "Update the driver_info of a node", [_UPDATE], _ADMIN),
    _rule("baremetal:node:update:properties", SYSTEM_MEMBER_OR_OWNER_MEMBER,
          "Update the properties of a node", [_UPDATE], _ADMIN),
    _rule("baremetal:node:update:chassis_uuid", SYSTEM_ADMIN,
          "Update the chassis_uuid of a node", [_UPDATE], _ADMIN),
    _rule("baremetal:node:update:instance_uuid", SYSTEM_MEMBER_OR_OWNER_MEMBER,
          "Update the instance_uuid of a node", [_UPDATE], _ADMIN),
    _rule("baremetal:node:update:lessee", SYSTEM_MEMBER_OR_OWNER_MEMBER,
          "Update the lessee of a node", [_UPDATE], _ADMIN),
    _rule("baremetal:node:update:owner", SYSTEM_MEMBER, "Update the owner of a node",
          [_UPDATE], _ADMIN),
    _rule("baremetal:node:update:driver_interfaces", SYSTEM_MEMBER_OR_OWNER_ADMIN,
          "Update the driver and the *_interface fields of a node", [_UPDATE], _ADMIN),
    _rule("baremetal:node:update:network_data", SYSTEM_MEMBER_OR_OWNER_MEMBER,
          "Update the network_data of a node", [_UPDATE], _ADMIN),
    _rule("baremetal:node:update:conductor_group", SYSTEM_MEMBER,
          "Update the conductor_group of a node", [_UPDATE], _ADMIN),
    _rule("baremetal:node:update:name", SYSTEM_MEMBER_OR_OWNER_MEMBER,
          "Update the name of a node", [_UPDATE], _ADMIN),
    _rule("baremetal:node:update:retired", SYSTEM_MEMBER_OR_OWNER_MEMBER,
          "Update retired and retired_reason of a node", [_UPDATE], _ADMIN),
    _rule("baremetal:node:update:shard", SYSTEM_ADMIN, "Update the shard of a node",
          [_UPDATE]),
    _rule("baremetal:node:update:parent_node", SYSTEM_MEMBER,
          "Update the parent_node of a node", [_UPDATE]),
    _rule("baremetal:node:update", SYSTEM_OR_PROJECT_MEMBER,
          "Update the other fields of a node", [_UPDATE], _ADMIN),
    _rule("baremetal:node:update_extra", SYSTEM_OR_PROJECT_MEMBER,
          "Update the extra field of a node", [_UPDATE], "rule:baremetal:node:update"),
    _rule("baremetal:node:update_instance_info", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
          "Update the instance_info field of a node", [_UPDATE],
          "rule:baremetal:node:update"),
    _rule("baremetal:node:delete", SYSTEM_ADMIN, "Delete Node records",
          [("DELETE", NODE)], _ADMIN),
    _rule("baremetal:node:delete:self_owned_node", PROJECT_ADMIN,
          "Delete node records owned by the project of the user", [("DELETE", NODE)]),
    _rule("baremetal:node:set_maintenance", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
          "Set the maintenance flag of a node", [("PUT", NODE + "/maintenance")], _ADMIN),
    _rule("baremetal:node:clear_maintenance", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
          "Clear the maintenance flag of a node", [("DELETE", NODE + "/maintenance")],
          _ADMIN),
    _rule("baremetal:node:set_provision_state", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
          "Change the provision state of a node (manage, inspect, abort)",
          [("PUT", NODE + "/states/provision")], _ADMIN),
    _rule("baremetal:node:traits:list", SYSTEM_OR_PROJECT_READER, "List the traits of a node",
          [("GET", NODE + "/traits")], _GET),
    _rule("baremetal:node:traits:set", SYSTEM_MEMBER_OR_OWNER_ADMIN,
          "Set all traits of a node, or add one",
          [("PUT", NODE + "/traits"), ("PUT", NODE + "/traits/{trait}")], _ADMIN),
    _rule("baremetal:node:traits:delete", SYSTEM_MEMBER_OR_OWNER_ADMIN,
          "Remove all traits of a node, or one",
          [("DELETE", NODE + "/traits"), ("DELETE", NODE + "/traits/{trait}")], _ADMIN),
    _rule("baremetal:node:get_states", SYSTEM_OR_PROJECT_READER,
          "View the power and provision state of a node", [("GET", NODE + "/states")],
          _GET),
    _rule("baremetal:node:set_power_state", SYSTEM_OR_PROJECT_MEMBER,
          "Change the power state of a node", [("PUT", NODE + "/states/power")], _ADMIN),
    _rule("baremetal:node:validate", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
          "Validate the power and management information of a node",
          [("GET", NODE + "/validate")], _ADMIN),
    _rule("baremetal:shards:get", SYSTEM_READER, "List the shards and their node counts",
          [("GET", "/v1/shards")]),
    _rule("baremetal:node:inventory:get", SYSTEM_OR_OWNER_READER,
          "Retrieve the inspection data of a node", [("GET", NODE + "/inventory")], _GET),
]

_PORT_GET = "rule:baremetal:port:get"

port_policies = [
    _rule("baremetal:port:get", SYSTEM_OR_PROJECT_READER, "Retrieve a Port record",
          [("GET", PORT)], _GET),
    _rule("baremetal:port:list", API_READER,
          "Retrieve the Port records of the nodes of the project of the user",
          [("GET", "/v1/ports"), ("GET", "/v1/ports/detail")], _PORT_GET),
    _rule("baremetal:port:list_all", SYSTEM_READER, "Retrieve all Port records",
          [("GET", "/v1/ports"), ("GET", "/v1/ports/detail")], _PORT_GET),
    _rule("baremetal:port:create", SYSTEM_ADMIN_OR_OWNER_ADMIN, "Create Port records",
          [("POST", "/v1/ports")], _ADMIN),
    _rule("baremetal:port:delete", SYSTEM_ADMIN_OR_OWNER_ADMIN, "Delete Port records",
          [("DELETE", PORT)], _ADMIN),
    _rule("baremetal:port:update", SYSTEM_MEMBER_OR_OWNER_ADMIN, "Update Port records",
          [("PATCH", PORT)], _ADMIN),
]

CHASSIS = "/v1/chassis/{chassis_id}"


def _system_rule(name: str, check: str, description: str,
                 operations: Iterable[tuple[str, str]], deprecated: str) -> policy.RuleDefault:
    rule = _rule(name, check, description, operations, deprecated)
    rule.scope_types = ["system"]  # as Ironic: chassis are no project's
    return rule


chassis_policies = [
    _system_rule("baremetal:chassis:get", SYSTEM_READER, "Retrieve Chassis records",
                 [("GET", "/v1/chassis"), ("GET", "/v1/chassis/detail"), ("GET", CHASSIS)],
                 _GET),
    _system_rule("baremetal:chassis:create", SYSTEM_ADMIN, "Create Chassis records",
                 [("POST", "/v1/chassis")], _ADMIN),
    _system_rule("baremetal:chassis:delete", SYSTEM_ADMIN, "Delete Chassis records",
                 [("DELETE", CHASSIS)], _ADMIN),
    _system_rule("baremetal:chassis:update", SYSTEM_ADMIN, "Update Chassis records",
                 [("PATCH", CHASSIS)], _ADMIN),
]

rule_policies = [
    _rule("baremetal:inspection_rule:get", SYSTEM_READER,
          "Get inspection rules, and explain what they would do",
          [("GET", "/v1/inspection_rules"), ("GET", RULE),
           ("POST", "/v1/inspection_rules/explain")]),
    _rule("baremetal:inspection_rule:list_all", SYSTEM_READER,
          "Retrieve all inspection rule records", [("GET", "/v1/inspection_rules")]),
    _rule("baremetal:inspection_rule:create", SYSTEM_ADMIN, "Create an inspection rule",
          [("POST", "/v1/inspection_rules")]),
    _rule("baremetal:inspection_rule:update", SYSTEM_ADMIN, "Update an inspection rule",
          [("PATCH", RULE)]),
    _rule("baremetal:inspection_rule:delete", SYSTEM_ADMIN, "Delete inspection rules",
          [("DELETE", "/v1/inspection_rules"), ("DELETE", RULE)]),
]

# Not in Ironic: what this service serves beyond Ironic's API.
service_policies = [
    _rule("baremetal:inspection:metrics", SYSTEM_READER,
          "Read the service's Prometheus metrics", [("GET", "/metrics")]),
    policy.RuleDefault("baremetal:inspection:unlisted", SYSTEM_ADMIN,
                       description="Any endpoint without a rule of its own",
                       scope_types=SCOPES),
]


def list_policies() -> Iterable[policy.RuleDefault]:
    """Every default policy (the ``oslo.policy.policies`` entry point)."""
    return itertools.chain(general_policies, node_policies, port_policies, chassis_policies,
                           rule_policies, service_policies)
