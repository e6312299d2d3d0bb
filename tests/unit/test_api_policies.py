"""Ironic's policy defaults as this service enforces them, and [oslo_policy] honoured."""

import pytest
from oslo_config import cfg
from oslo_context.context import RequestContext

from inspection import conf as inspection_conf
from inspection.api import authz, policies

OWNER, LESSEE, OTHER = "p-owner", "p-lessee", "p-other"
NODE = {"node.owner": OWNER, "node.lessee": LESSEE}


def _enforcer(tmp_path, policy_file: str | None = None, **oslo_policy):
    tmp_path.mkdir(exist_ok=True)
    lines = ["[oslo_policy]", *(f"{k} = {v}" for k, v in oslo_policy.items())]
    if policy_file is not None:
        (tmp_path / "policy.yaml").write_text(policy_file)
        lines.append(f"policy_file = {tmp_path / 'policy.yaml'}")
    (tmp_path / "api.conf").write_text("\n".join(lines) + "\n")
    conf = cfg.ConfigOpts()
    inspection_conf.register_opts(conf)
    conf(["--config-file", str(tmp_path / "api.conf")], project="ironic-inspection")
    return authz.make_enforcer(conf)


def _creds(roles, project=None, system=False, domain=None) -> dict:
    context = RequestContext(roles=roles, project_id=project, domain_id=domain,
                             system_scope="all" if system else None)
    return dict(context.to_policy_values())


def _allowed(enforcer, rule, creds, target=NODE) -> bool:
    try:
        return bool(enforcer.authorize(rule, {**creds, **target}, creds))
    except authz.policy.InvalidScope:
        return False


PERSONAS = {
    "system admin": _creds(["admin", "member", "reader"], system=True),
    "system reader": _creds(["reader"], system=True),
    "owner member": _creds(["member", "reader"], project=OWNER),
    "owner admin": _creds(["admin", "member", "reader"], project=OWNER),
    "lessee member": _creds(["member", "reader"], project=LESSEE),
    "other admin": _creds(["admin", "member", "reader"], project=OTHER),
}
#: rule -> personas allowed, by Ironic 39's defaults.
EXPECTED = {
    "baremetal:node:get": {"system admin", "system reader", "owner member", "owner admin",
                           "lessee member"},
    "baremetal:node:list_all": {"system admin", "system reader"},
    "baremetal:node:get:filter_threshold": {"system admin", "system reader"},
    "baremetal:node:get:driver_info": {"system admin", "system reader", "owner member",
                                       "owner admin"},
    "baremetal:node:create": {"system admin"},
    "baremetal:node:update_extra": {"system admin", "owner member", "owner admin",
                                    "lessee member"},
    "baremetal:node:update:owner": {"system admin"},
    "baremetal:node:delete": {"system admin"},
    "baremetal:node:delete:self_owned_node": {"owner admin"},
    "baremetal:node:set_provision_state": {"system admin", "owner member", "owner admin"},
    "baremetal:node:traits:set": {"system admin", "owner admin"},
    "baremetal:node:inventory:get": {"system admin", "system reader", "owner member",
                                     "owner admin"},
    "baremetal:port:create": {"system admin", "owner admin"},
    "baremetal:inspection_rule:get": {"system admin", "system reader"},
    "baremetal:inspection_rule:create": {"system admin"},
    "baremetal:inspection:metrics": {"system admin", "system reader"},
}


@pytest.mark.parametrize("rule", sorted(EXPECTED))
def test_defaults_follow_ironic(tmp_path, rule):
    enforcer = _enforcer(tmp_path)
    allowed = {name for name, creds in PERSONAS.items() if _allowed(enforcer, rule, creds)}
    assert allowed == EXPECTED[rule]


def test_every_operation_has_a_registered_rule():
    names = {rule.name for rule in policies.list_policies()}
    for operation in authz.OPERATIONS:
        if operation.kind != "list":
            assert operation.rule in names, operation
    assert {"baremetal:node:list", "baremetal:port:list_all", authz.UNLISTED} <= names


def test_old_defaults_apply_when_new_ones_are_not_enforced(tmp_path):
    legacy_admin = _creds(["admin"], project="admin")  # the pre-RBAC "admin project"
    assert not _allowed(_enforcer(tmp_path / "new"), "baremetal:node:create", legacy_admin)
    old = _enforcer(tmp_path / "old", enforce_new_defaults="false")
    assert _allowed(old, "baremetal:node:create", legacy_admin)


def test_scope_is_enforced(tmp_path):
    # oslo.policy 6 dropped [oslo_policy]enforce_scope: token scopes are always checked.
    # A domain-scoped token fits none of Ironic's scopes (system, project).
    domain_reader = _creds(["reader"], domain="default")
    assert not _allowed(_enforcer(tmp_path), "baremetal:node:list", domain_reader)
    project_reader = _creds(["reader"], project=OTHER)
    assert _allowed(_enforcer(tmp_path), "baremetal:node:list", project_reader)


def test_a_policy_file_overrides_the_defaults(tmp_path):
    enforcer = _enforcer(tmp_path, '"baremetal:node:create": "role:reader"\n')
    assert _allowed(enforcer, "baremetal:node:create", PERSONAS["system reader"])
    assert _allowed(enforcer, "baremetal:node:delete", PERSONAS["system admin"])
